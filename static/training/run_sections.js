// The run page's section outline (partials/run_sections_nav.html) is plain anchors and works
// without this script; this only marks, with aria-current, the section the reader is in.
(() => {
  const start = () => {
    const nav = document.getElementById("run-sections");
    if (!nav || !("IntersectionObserver" in window)) return;
    const links = new Map(
      Array.from(nav.querySelectorAll("a[href^='#']")).map((a) => [a.hash.slice(1), a]),
    );
    const visible = new Set();
    const mark = () => {
      const current = Array.from(links.keys()).find((id) => visible.has(id));
      links.forEach((a, id) => {
        if (id === current) a.setAttribute("aria-current", "true");
        else a.removeAttribute("aria-current");
      });
    };
    const observer = new IntersectionObserver(
      (entries) => {
        entries.forEach((e) => (e.isIntersecting ? visible.add(e.target.id) : visible.delete(e.target.id)));
        mark();
      },
      // A section counts as "in" while it crosses the band just under the sticky outline.
      { rootMargin: "-15% 0px -70% 0px" },
    );
    links.forEach((_, id) => {
      const section = document.getElementById(id);
      if (section) observer.observe(section);
    });
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
