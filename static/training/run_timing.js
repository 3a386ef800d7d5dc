// Ticks the run page's elapsed time and counts the training ETA down between live updates.
// The server renders both in seconds (data-seconds, on its own clock); each new fragment
// (a live update swaps #run-progress) restarts the count from the fresh figures, and the last
// update of a finished run carries the final duration instead (data-ticking="false").
(function () {
  "use strict";

  // Same format as the `duration` template filter: "1h 02m", "3m 05s", "45s".
  function formatDuration(total) {
    const seconds = Math.max(0, Math.floor(total));
    const hours = Math.floor(seconds / 3600);
    const minutes = Math.floor((seconds % 3600) / 60);
    const rest = seconds % 60;
    const pad = (value) => String(value).padStart(2, "0");
    if (hours) return `${hours}h ${pad(minutes)}m`;
    if (minutes) return `${minutes}m ${pad(rest)}s`;
    return `${rest}s`;
  }

  function tick() {
    const line = document.getElementById("run-timing");
    if (!line || line.dataset.ticking !== "true") return;
    const now = Date.now();
    if (!line.dataset.seenAt) line.dataset.seenAt = String(now);
    const passed = (now - Number(line.dataset.seenAt)) / 1000;
    const elapsed = line.querySelector(".run-elapsed[data-seconds]");
    if (elapsed) elapsed.textContent = formatDuration(Number(elapsed.dataset.seconds) + passed);
    const eta = line.querySelector(".run-eta[data-seconds]");
    if (eta) eta.textContent = formatDuration(Number(eta.dataset.seconds) - passed);
  }

  setInterval(tick, 1000);
  document.addEventListener("DOMContentLoaded", tick);
})();
