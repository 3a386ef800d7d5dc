// Upload page: drag-and-drop onto the drop zone, a size check before sending anything, and
// the upload itself through htmx (the form's hx-post), whose htmx:xhr:progress events drive
// the progress bar. The server answers an htmx upload in JSON (a redirect to the preview, or
// the error to show). Without JavaScript the form still posts normally.
(function () {
  "use strict";

  function formatBytes(bytes) {
    if (bytes >= 1024 * 1024) return (bytes / 1024 / 1024).toFixed(1) + " MB";
    if (bytes >= 1024) return (bytes / 1024).toFixed(1) + " KB";
    return bytes + " bytes";
  }

  function wire(form) {
    var input = form.querySelector("input[type=file]");
    var zone = form.querySelector("#dropzone");
    var chosen = form.querySelector("#chosen-file");
    var progress = form.querySelector("#upload-progress");
    var status = form.querySelector("#upload-status");
    var errorBox = form.querySelector("#upload-error");
    var submit = form.querySelector("#upload-submit");
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

    form.addEventListener("htmx:beforeRequest", function (event) {
      var file = input.files && input.files[0];
      if (!file) {
        event.preventDefault();
        return fail("Choose a file to upload.");
      }
      if (maxBytes && file.size > maxBytes) {
        // Refused here, before a single byte is sent.
        event.preventDefault();
        return fail("The file is " + formatBytes(file.size) + ", over the upload limit of " +
          formatBytes(maxBytes) + ".");
      }
      errorBox.textContent = "";
      progress.hidden = false;
      progress.value = 0;
      submit.disabled = true;
      status.textContent = "Uploading…";
    });
    form.addEventListener("htmx:configRequest", function (event) {
      event.detail.headers["Accept"] = "application/json";
    });
    form.addEventListener("htmx:xhr:progress", function (event) {
      if (!event.detail.lengthComputable) return;
      var percent = Math.round((event.detail.loaded / event.detail.total) * 100);
      progress.value = percent;
      status.textContent = percent < 100 ? "Uploading… " + percent + "%" : "Checking the file…";
    });
    form.addEventListener("htmx:afterRequest", function (event) {
      var xhr = event.detail.xhr;
      if (!xhr.status) {
        return fail("The upload was interrupted. If the file is over the limit the server stops reading it.");
      }
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
  }

  htmx.onLoad(function (elt) {
    var form = Trainboard.within(elt, "upload-form");
    if (form) wire(form);
  });
})();
