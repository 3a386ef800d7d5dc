// Trainboard's own JS, shared by every page's scripts. htmx sends the CSRF token from
// <body hx-headers>.
document.addEventListener("htmx:responseError", (event) => {
  console.warn("htmx request failed", event.detail.xhr.status, event.detail.pathInfo);
});

// A form with data-confirm asks first (the Content-Security-Policy allows no onsubmit="…").
document.addEventListener("submit", (event) => {
  const message = event.target.dataset && event.target.dataset.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});

// A plain form being submitted sends no more htmx requests of its own: a preview typed
// 400 ms before "Create dataset" would otherwise reach the server after the submit has used
// up what it previews, and its 404 land on the leaving page. (Those already in flight are
// left to finish: htmx logs an aborted request as a console error.) The rest of the page
// goes on (a submit stopped with Esc leaves it working), and a page restored from the
// back-forward cache works again.
(() => {
  let submitted = null;
  document.addEventListener("submit", (event) => {
    if (event.defaultPrevented || event.target.matches("[hx-post], [hx-get]")) return;
    submitted = event.target;
  });
  document.addEventListener("htmx:beforeRequest", (event) => {
    if (submitted && submitted.contains(event.detail.elt)) event.preventDefault();
  });
  window.addEventListener("pageshow", (event) => {
    if (event.persisted) submitted = null;
  });
})();

window.Trainboard = {
  // The element `id` when `elt` (what htmx.onLoad hands a script: the body at page load,
  // then each swapped-in element) is it or holds it, else null. A script redraws only what
  // a swap brought: `htmx.onLoad((elt) => { const x = Trainboard.within(elt, "x"); ... })`.
  within(elt, id) {
    if (!elt || elt.nodeType !== Node.ELEMENT_NODE) return null;
    if (elt.id === id) return elt;
    return elt.querySelector(`#${CSS.escape(id)}`);
  },

  // "1h 02m", "3m 05s", "45s": the browser's one duration format (run_timing.js ticks with
  // it), the same as the server's `duration` template filter that renders the first figures
  // (training/templatetags/training_extras.py); a browser test holds the two together.
  formatDuration(total) {
    const seconds = Math.max(0, Math.floor(total));
    const hours = Math.floor(seconds / 3600);
    const minutes = Math.floor((seconds % 3600) / 60);
    const rest = seconds % 60;
    const pad = (value) => String(value).padStart(2, "0");
    if (hours) return `${hours}h ${pad(minutes)}m`;
    if (minutes) return `${minutes}m ${pad(rest)}s`;
    return `${rest}s`;
  },
};

// A table wider than its box scrolls inside it (.table-scroll); on a narrow screen that is not
// visible, so each such box says which way there is more: data-more="right", "left right" or
// "left" (trainboard.css fades that edge). Checked again when the box is resized, scrolled, or
// a live swap brings new rows.
(() => {
  const mark = (box) => {
    const more = [];
    if (box.scrollLeft > 1) more.push("left");
    if (box.scrollLeft + box.clientWidth < box.scrollWidth - 1) more.push("right");
    if (more.length) box.dataset.more = more.join(" ");
    else delete box.dataset.more;
  };
  const resized = "ResizeObserver" in window ? new ResizeObserver((es) => es.forEach((e) => mark(e.target))) : null;
  const watch = (root) => {
    if (!root || root.nodeType !== Node.ELEMENT_NODE) return;
    const boxes = Array.from(root.querySelectorAll(".table-scroll"));
    if (root.matches(".table-scroll")) boxes.push(root);
    boxes.forEach((box) => {
      if (!box.dataset.watched) {
        box.dataset.watched = "1";
        box.addEventListener("scroll", () => mark(box), { passive: true });
        if (resized) {
          resized.observe(box);
          if (box.firstElementChild) resized.observe(box.firstElementChild);
        }
      }
      mark(box);
    });
  };
  document.addEventListener("DOMContentLoaded", () => watch(document.body));
  document.addEventListener("htmx:load", (event) => watch(event.target));
})();

// A page's advanced sections are folds, <details data-fold="name">, closed in the markup; each
// stays as its reader left it, across reloads and runs: localStorage "trainboard:fold:<name>"
// is "open" or "closed". A fold that opens sends a resize, so the drawings inside it (folded,
// they had no size) draw again at the size they now have.
(() => {
  const key = (fold) => `trainboard:fold:${fold.dataset.fold}`;
  const read = (fold) => {
    try { return window.localStorage.getItem(key(fold)); } catch (error) { return null; }
  };
  const write = (fold) => {
    try { window.localStorage.setItem(key(fold), fold.open ? "open" : "closed"); } catch (error) { /* storage off: folds reset */ }
  };
  const restore = (root) => {
    if (!root || root.nodeType !== Node.ELEMENT_NODE) return;
    const folds = Array.from(root.querySelectorAll("details[data-fold]"));
    if (root.matches("details[data-fold]")) folds.push(root);
    folds.forEach((fold) => {
      const state = read(fold);
      if (state === "open" || state === "closed") fold.open = state === "open";
      if (fold.dataset.foldWatched) return;
      fold.dataset.foldWatched = "1";
      fold.addEventListener("toggle", () => {
        write(fold);
        if (fold.open) window.dispatchEvent(new Event("resize"));
      });
    });
  };
  document.addEventListener("DOMContentLoaded", () => restore(document.body));
  document.addEventListener("htmx:load", (event) => restore(event.target));
})();
