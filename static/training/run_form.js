// Launch form: show the parameters of the selected optimizer, hide the others; the
// presets ("Quick try", "Thorough") fill the form in place (without JS their links reload
// the form with ?preset=..., which the server fills the same way).
(function () {
  "use strict";
  function sync(form, select) {
    form.querySelectorAll(".optimizer-params").forEach(function (box) {
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
  htmx.onLoad(function (elt) {
    var form = Trainboard.within(elt, "run-form");
    if (!form) return;
    var select = form.querySelector("#id_optimizer");
    if (select) select.addEventListener("change", function () { sync(form, select); });
    var data = document.getElementById("run-presets");
    if (!data) return;
    var presets = JSON.parse(data.textContent);
    var links = document.querySelectorAll("#presets a[data-preset]");
    links.forEach(function (link) {
      if (link.dataset.wired) return;  // a form swapped in again: its links still listen
      link.dataset.wired = "1";
      link.addEventListener("click", function (event) {
        var preset = presets[link.dataset.preset];
        if (!preset) return;
        event.preventDefault();
        applyPreset(preset.values);
        links.forEach(function (other) {
          other.setAttribute("aria-pressed", other === link ? "true" : "false");
        });
      });
    });
  });
})();
