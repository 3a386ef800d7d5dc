// Launch form: open the parameters of the optimizer that is selected, fold the others.
(function () {
  "use strict";
  function sync(select) {
    document.querySelectorAll("#run-form details.optimizer-params").forEach(function (box) {
      box.open = box.dataset.optimizer === select.value;
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var select = document.getElementById("id_optimizer");
    if (!select) return;
    select.addEventListener("change", function () { sync(select); });
  });
})();
