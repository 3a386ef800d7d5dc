/* Trainboard population map: candidates placed by a PCA of their embeddings (SVG).
 *
 * The server sends the points in #run-population (data-map, JSON), swapped in by the htmx
 * WebSocket extension as candidates arrive; we redraw when it is swapped in (htmx.onLoad). The slider picks
 * an epoch: the points born up to it, marked kept or dropped as the competitions up to it
 * left them. It follows the newest epoch until the user moves it back. Text from candidates
 * (LM output) only ever goes through textContent.
 */
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const WIDTH = 640, HEIGHT = 400, PAD = 28;
  let followLatest = true;

  function readMap() {
    const holder = document.getElementById("run-population");
    if (!holder) return null;
    try { return JSON.parse(holder.getAttribute("data-map") || "null"); } catch (error) { return null; }
  }

  // Reward 0 → 1: dark blue → teal → yellow (a short viridis-like ramp).
  const STOPS = [[68, 1, 84], [33, 145, 140], [253, 231, 37]];
  function rewardColor(reward) {
    if (reward == null) return "#9ca3af";
    const t = Math.max(0, Math.min(1, reward)) * (STOPS.length - 1);
    const i = Math.min(Math.floor(t), STOPS.length - 2), f = t - i;
    const c = STOPS[i].map((v, k) => Math.round(v + (STOPS[i + 1][k] - v) * f));
    return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
  }

  function radius(novelty) {
    if (novelty == null) return 6;
    return 4 + 8 * Math.max(0, Math.min(1, novelty));
  }

  function el(name, attrs) {
    const node = document.createElementNS(NS, name);
    Object.entries(attrs || {}).forEach(([key, value]) => node.setAttribute(key, String(value)));
    return node;
  }

  function fmt(value) { return value == null ? "—" : Number(value).toFixed(3); }

  // Where a point stands at the end of `epoch` (0-based): null (not born yet), or a status.
  function statusAt(point, epoch, last) {
    if (point.epoch > epoch) return null;
    if (point.dropped_at != null && point.dropped_at <= epoch) return "dropped";
    if (point.status === "best" && epoch >= last) return "best";
    return point.status === "dropped" ? "kept" : (point.status === "scored" ? "scored" : "kept");
  }

  function showTip(tip, point, status, event) {
    tip.replaceChildren();
    const title = document.createElement("strong");
    title.textContent = `${point.id} · ${point.operation} · ${status}`;
    const facts = document.createElement("div");
    facts.textContent = `epoch ${point.epoch + 1} · reward ${fmt(point.reward)} · novelty ${fmt(point.novelty)} · ${point.variable}`;
    const text = document.createElement("div");
    text.className = "map-tip-text";
    text.textContent = point.preview || "";
    tip.append(title, facts, text);
    tip.hidden = false;
    const box = tip.parentElement.getBoundingClientRect();
    const x = event.clientX - box.left, y = event.clientY - box.top;
    tip.style.left = `${Math.min(Math.max(4, x + 12), Math.max(4, box.width - tip.offsetWidth - 4))}px`;
    tip.style.top = `${y + 14}px`;
  }

  function draw() {
    const svg = document.getElementById("population-svg");
    const slider = document.getElementById("population-epoch");
    const label = document.getElementById("population-epoch-label");
    const tip = document.getElementById("population-tip");
    const data = readMap();
    if (!svg || !slider || !data) return;
    const epochs = Math.max(1, data.epochs || 1);
    const previousMax = Number(slider.max);
    slider.max = String(epochs);
    if (followLatest || Number(slider.value) > epochs || previousMax < 1) slider.value = String(epochs);
    const epoch = Number(slider.value) - 1;
    label.textContent = String(epoch + 1);
    const [x0, x1, y0, y1] = data.extent || [0, 0, 0, 0];
    const sx = (x) => (x1 > x0 ? PAD + ((x - x0) / (x1 - x0)) * (WIDTH - 2 * PAD) : WIDTH / 2);
    const sy = (y) => (y1 > y0 ? HEIGHT - PAD - ((y - y0) / (y1 - y0)) * (HEIGHT - 2 * PAD) : HEIGHT / 2);
    const byPk = new Map(data.points.map((p) => [p.pk, p]));
    svg.replaceChildren();
    svg.append(el("rect", { x: 0, y: 0, width: WIDTH, height: HEIGHT, class: "map-frame" }));
    const axis = el("text", { x: WIDTH - 6, y: HEIGHT - 6, "text-anchor": "end", class: "map-axis" });
    axis.textContent = `PC1 ${Math.round(100 * (data.explained[0] || 0))}% · PC2 ${Math.round(100 * (data.explained[1] || 0))}%`;
    const axisHelp = el("title", {});
    axisHelp.textContent = "PC1 / PC2: the share of all the differences between the candidates' embeddings that the horizontal / vertical axis shows";
    axis.append(axisHelp);
    svg.append(axis);
    const edges = el("g", { class: "map-edges" });
    const dots = el("g", { class: "map-points" });
    svg.append(edges, dots);
    const last = epochs - 1;
    // On a narrow screen the drawing shrinks: grow the points back so they stay visible.
    const grow = Math.min(1.8, Math.max(1, WIDTH / Math.max(1, svg.clientWidth)));
    let shown = 0;
    const ordered = data.points.slice().sort((a, b) => (b.novelty || 0) - (a.novelty || 0));
    // The best candidate last, on top: never hidden under (or its hover taken by) another point.
    const isBest = (point) => statusAt(point, epoch, last) === "best";
    ordered.sort((a, b) => Number(isBest(a)) - Number(isBest(b)));
    ordered.forEach((point) => {
      const status = statusAt(point, epoch, last);
      if (status === null) return;
      shown += 1;
      const cx = sx(point.x), cy = sy(point.y);
      point.parents.forEach((parentPk) => {
        const parent = byPk.get(parentPk);
        if (!parent || statusAt(parent, epoch, last) === null) return;
        edges.append(el("line", { x1: sx(parent.x), y1: sy(parent.y), x2: cx, y2: cy, class: `map-edge op-${point.operation}` }));
      });
      const color = rewardColor(point.reward);
      const dot = el("circle", {
        cx, cy, r: radius(point.novelty) * grow,
        class: `map-point status-${status}`,
        fill: status === "dropped" ? "#ffffff" : color,
        stroke: status === "dropped" ? color : (status === "best" ? "#dc2626" : "#1f2937"),
        "data-candidate": point.id,
        "data-status": status,
        tabindex: 0,
      });
      const hint = el("title");
      hint.textContent = `${point.id} (${status})`;
      dot.append(hint);
      dot.addEventListener("mousemove", (event) => showTip(tip, point, status, event));
      dot.addEventListener("mouseleave", () => { tip.hidden = true; });
      dot.addEventListener("click", () => { if (point.url) window.location.assign(point.url); });
      dot.addEventListener("keydown", (event) => { if (event.key === "Enter" && point.url) window.location.assign(point.url); });
      dots.append(dot);
    });
    svg.dataset.points = String(shown);
    svg.dataset.total = String(data.points.length);
  }

  function wire() {
    const slider = document.getElementById("population-epoch");
    if (slider && !slider.dataset.wired) {
      slider.dataset.wired = "1";
      slider.addEventListener("input", () => {
        followLatest = Number(slider.value) >= Number(slider.max);
        draw();
      });
    }
    draw();
  }

  // a folded map is drawn at no size: trainboard.js sends resize when its fold opens
  window.addEventListener("resize", draw);
  htmx.onLoad((elt) => {
    if (Trainboard.within(elt, "population-epoch")) wire();
    else if (Trainboard.within(elt, "run-population")) draw();
  });
})();
