// Trainboard's own JS. htmx sends the CSRF token from <body hx-headers>; nothing else yet.
document.addEventListener("htmx:responseError", (event) => {
  console.warn("htmx request failed", event.detail.xhr.status, event.detail.pathInfo);
});
