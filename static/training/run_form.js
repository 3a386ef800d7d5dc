// Launch form: show the parameters of the selected optimizer, hide the others; the
// presets ("Quick try", "Thorough") fill the form in place (without JS their links reload
// the form with ?preset=..., which the server fills the same way).
(function () {
  "use strict";
  function sync(select) {
    document.querySelectorAll("#run-form .optimizer-params").forEach(function (box) {
      box.hidden = box.dataset.optimizer !== select.value;
    });
  }
  function applyPreset(values) {
    Object.keys(values).forEach(function (name) {
      var input = document.getElementById("id_" + name);
      if (!input || input.disabled) return;
      if (input.type === "checkbox") input.checked = Boolean(values[name]);
      else input.value = String(values[name]);
      input.dispatchEvent(new Event("change", { bubbles: true }));
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var select = document.getElementById("id_optimizer");
    if (select) select.addEventListener("change", function () { sync(select); });
    var data = document.getElementById("run-presets");
    if (!data) return;
    var presets = JSON.parse(data.textContent);
    document.querySelectorAll("#presets a[data-preset]").forEach(function (link) {
      link.addEventListener("click", function (event) {
        var preset = presets[link.dataset.preset];
        if (!preset) return;
        event.preventDefault();
        applyPreset(preset.values);
        document.querySelectorAll("#presets a[data-preset]").forEach(function (other) {
          other.setAttribute("aria-pressed", other === link ? "true" : "false");
        });
      });
    });
  });
})();
