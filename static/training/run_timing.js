// Ticks the run page's elapsed time and counts the training ETA down between live updates.
// The server renders both in seconds (data-seconds, on its own clock); each new #run-timing
// (a live update swaps #run-progress) restarts the count from the fresh figures, and the last
// update of a finished run carries the final duration instead (data-ticking="false"). The
// figures are written with Trainboard.formatDuration, the server's `duration` format.
(function () {
  "use strict";

  function tick() {
    const line = document.getElementById("run-timing");
    if (!line || line.dataset.ticking !== "true") return;
    const now = Date.now();
    if (!line.dataset.seenAt) line.dataset.seenAt = String(now);
    const passed = (now - Number(line.dataset.seenAt)) / 1000;
    const elapsed = line.querySelector(".run-elapsed[data-seconds]");
    if (elapsed) elapsed.textContent = Trainboard.formatDuration(Number(elapsed.dataset.seconds) + passed);
    const eta = line.querySelector(".run-eta[data-seconds]");
    if (eta) eta.textContent = Trainboard.formatDuration(Number(eta.dataset.seconds) - passed);
  }

  setInterval(tick, 1000);
  htmx.onLoad((elt) => { if (Trainboard.within(elt, "run-timing")) tick(); });
})();
