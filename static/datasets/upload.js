// Upload page: drag-and-drop onto the drop zone, a size check before sending anything,
// and an XMLHttpRequest upload whose progress events drive the progress bar. Without
// JavaScript the form still posts normally.
(function () {
  "use strict";

  function formatBytes(bytes) {
    if (bytes >= 1024 * 1024) return (bytes / 1024 / 1024).toFixed(1) + " MB";
    if (bytes >= 1024) return (bytes / 1024).toFixed(1) + " KB";
    return bytes + " bytes";
  }

  function init() {
    var form = document.getElementById("upload-form");
    if (!form) return;
    var input = form.querySelector("input[type=file]");
    var zone = document.getElementById("dropzone");
    var chosen = document.getElementById("chosen-file");
    var progress = document.getElementById("upload-progress");
    var status = document.getElementById("upload-status");
    var errorBox = document.getElementById("upload-error");
    var submit = document.getElementById("upload-submit");
    var maxBytes = parseInt(form.dataset.maxBytes, 10);

    function showChosen() {
      var file = input.files && input.files[0];
      chosen.textContent = file ? file.name + " (" + formatBytes(file.size) + ")" : "";
      errorBox.textContent = "";
    }

    input.addEventListener("change", showChosen);
    ["dragenter", "dragover"].forEach(function (name) {
      zone.addEventListener(name, function (event) {
        event.preventDefault();
        zone.classList.add("ds-dragover");
      });
    });
    ["dragleave", "drop"].forEach(function (name) {
      zone.addEventListener(name, function (event) {
        event.preventDefault();
        zone.classList.remove("ds-dragover");
      });
    });
    zone.addEventListener("drop", function (event) {
      if (event.dataTransfer && event.dataTransfer.files.length) {
        input.files = event.dataTransfer.files;
        showChosen();
      }
    });

    function fail(message) {
      errorBox.textContent = message;
      status.textContent = "";
      progress.hidden = true;
      submit.disabled = false;
    }

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var file = input.files && input.files[0];
      if (!file) return fail("Choose a file to upload.");
      if (maxBytes && file.size > maxBytes) {
        // Refused here, before a single byte is sent.
        return fail("The file is " + formatBytes(file.size) + ", over the upload limit of " +
          formatBytes(maxBytes) + ".");
      }
      var xhr = new XMLHttpRequest();
      xhr.open("POST", form.action);
      xhr.setRequestHeader("Accept", "application/json");
      var token = form.querySelector("input[name=csrfmiddlewaretoken]");
      if (token) xhr.setRequestHeader("X-CSRFToken", token.value);
      xhr.upload.addEventListener("progress", function (e) {
        if (!e.lengthComputable) return;
        var percent = Math.round((e.loaded / e.total) * 100);
        progress.value = percent;
        status.textContent = percent < 100 ? "Uploading… " + percent + "%" : "Checking the file…";
      });
      xhr.addEventListener("load", function () {
        var body = null;
        try { body = JSON.parse(xhr.responseText); } catch (ignored) { body = null; }
        if (xhr.status === 200 && body && body.redirect) {
          progress.value = 100;
          status.textContent = "Done. Opening the preview…";
          window.location.assign(body.redirect);
        } else {
          fail((body && body.error) || "The upload failed (HTTP " + xhr.status + ").");
        }
      });
      xhr.addEventListener("error", function () {
        fail("The upload was interrupted. If the file is over the limit the server stops reading it.");
      });
      errorBox.textContent = "";
      progress.hidden = false;
      progress.value = 0;
      submit.disabled = true;
      status.textContent = "Uploading…";
      xhr.send(new FormData(form));
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
