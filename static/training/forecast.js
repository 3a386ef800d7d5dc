// The launch form's forecast never shows an answer for an older form: every change of the
// form bumps its revision (#forecast-revision, sent with each forecast request); the answer
// echoes the revision it was computed for (data-revision on #forecast-answer), and an answer
// to an older revision is not swapped in. hx-sync="this:replace" already aborts the request
// in flight when a newer one starts; this covers an answer that was already on its way.
(function () {
  "use strict";
  if (window.TrainboardForecast) return;  // the box is on the page once; the script may load twice
  window.TrainboardForecast = true;
  function revisionInput() { return document.getElementById("forecast-revision"); }
  function bump(event) {
    var input = revisionInput();
    var form = document.getElementById("run-form");
    if (!input || !form || event.target === input || !form.contains(event.target)) return;
    input.value = String(Number(input.value || "0") + 1);
  }
  // Capture phase: the revision is bumped before htmx's own listeners see the change.
  document.addEventListener("input", bump, true);
  document.addEventListener("change", bump, true);
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (!target || target.id !== "run-forecast") return;
    var input = revisionInput();
    var match = /data-revision="(\d*)"/.exec(event.detail.serverResponse || "");
    if (input && match && match[1] !== input.value) event.detail.shouldSwap = false;
  });
})();
