/* Trainboard "Selection" section: two SVG scatter charts of the scored candidates.
 *
 * The server sends the points in #run-candidate-confidence (data-points, JSON), swapped in by
 * htmx; we redraw on htmx.onLoad. #selection-scatter: validation reward (x) against selection
 * reward (y) for the selection split's contenders, with the diagonal. #cost-quality-chart:
 * reward (y, with its 95% interval) against prompt tokens per call (x), the non-dominated
 * points outlined and joined by the front. Candidate text never reaches this script; ids go
 * through textContent only.
 */
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const WIDTH = 420, HEIGHT = 300, PAD = 40;

  function el(name, attrs) {
    const node = document.createElementNS(NS, name);
    Object.entries(attrs || {}).forEach(([key, value]) => node.setAttribute(key, String(value)));
    return node;
  }
  function fmt(value, digits) { return value == null ? "—" : Number(value).toFixed(digits == null ? 3 : digits); }

  function readPoints() {
    const holder = document.getElementById("run-candidate-confidence");
    if (!holder) return null;
    try { return JSON.parse(holder.getAttribute("data-points") || "[]"); } catch (error) { return null; }
  }

  function frame(svg, xLabel, yLabel, xTicks, yTicks, sx, sy) {
    svg.replaceChildren();
    svg.appendChild(el("rect", { x: PAD, y: 10, width: WIDTH - PAD - 10, height: HEIGHT - PAD - 10, class: "map-frame" }));
    xTicks.forEach((t) => {
      const label = el("text", { x: sx(t), y: HEIGHT - PAD + 14, "text-anchor": "middle", class: "map-axis" });
      label.textContent = String(Math.round(t * 100) / 100);
      svg.appendChild(label);
    });
    yTicks.forEach((t) => {
      const label = el("text", { x: PAD - 4, y: sy(t) + 4, "text-anchor": "end", class: "map-axis" });
      label.textContent = String(t);
      svg.appendChild(label);
    });
    const xl = el("text", { x: (WIDTH + PAD) / 2, y: HEIGHT - 6, "text-anchor": "middle", class: "map-axis" });
    xl.textContent = xLabel;
    const yl = el("text", { x: 12, y: HEIGHT / 2, "text-anchor": "middle", class: "map-axis", transform: `rotate(-90 12 ${HEIGHT / 2})` });
    yl.textContent = yLabel;
    svg.append(xl, yl);
  }

  function tipOn(node, text) {
    const tip = document.getElementById("selection-tip");
    const title = el("title");
    title.textContent = text;
    node.appendChild(title);
    if (!tip) return;
    node.addEventListener("mouseenter", (event) => {
      tip.textContent = text;
      tip.hidden = false;
      const box = tip.parentElement.getBoundingClientRect();
      tip.style.left = `${Math.max(0, event.clientX - box.left + 12)}px`;
      tip.style.top = `${Math.max(0, event.clientY - box.top + 12)}px`;
    });
    node.addEventListener("mouseleave", () => { tip.hidden = true; });
  }

  const unit = (v) => PAD + v * (WIDTH - PAD - 10);
  const unitY = (v) => 10 + (1 - v) * (HEIGHT - PAD - 10);

  function drawScatter(points) {
    const svg = document.getElementById("selection-scatter");
    if (!svg) return;
    const shown = points.filter((p) => p.selection != null);
    frame(svg, "validation reward", "selection reward", [0, 0.25, 0.5, 0.75, 1], [0, 0.5, 1], unit, unitY);
    svg.appendChild(el("line", { x1: unit(0), y1: unitY(0), x2: unit(1), y2: unitY(1), class: "chart-diagonal" }));
    shown.sort((a, b) => Number(a.chosen) - Number(b.chosen)).forEach((p) => {
      const dot = el("circle", { cx: unit(p.reward), cy: unitY(p.selection), r: p.chosen ? 7 : 5, class: `chart-point${p.chosen ? " chosen" : ""}`, "data-candidate": p.id });
      tipOn(dot, `${p.id} · ${p.operation}: validation ${fmt(p.reward)}, selection ${fmt(p.selection)}${p.chosen ? " · chosen" : ""}`);
      svg.appendChild(dot);
    });
  }

  function drawCost(points) {
    const svg = document.getElementById("cost-quality-chart");
    if (!svg) return;
    const shown = points.filter((p) => p.tokens != null);
    if (!shown.length) { svg.replaceChildren(); return; }
    let lo = Math.min(...shown.map((p) => p.tokens)), hi = Math.max(...shown.map((p) => p.tokens));
    if (hi - lo < 1) { lo -= 1; hi += 1; }
    const margin = (hi - lo) * 0.05;
    lo -= margin; hi += margin;
    const sx = (v) => unit((v - lo) / (hi - lo));
    const ticks = [lo + margin, (lo + hi) / 2, hi - margin].map((t) => Math.round(t));
    frame(svg, "prompt tokens per call", "reward", [], [0, 0.5, 1], sx, unitY);
    ticks.forEach((t) => {
      const label = el("text", { x: sx(t), y: HEIGHT - PAD + 14, "text-anchor": "middle", class: "map-axis" });
      label.textContent = String(t);
      svg.appendChild(label);
    });
    const front = shown.filter((p) => p.pareto).sort((a, b) => a.tokens - b.tokens);
    if (front.length > 1) {
      svg.appendChild(el("polyline", { points: front.map((p) => `${sx(p.tokens)},${unitY(p.reward)}`).join(" "), class: "chart-front" }));
    }
    // the chosen candidate last, on top of any point at the same place
    shown.sort((a, b) => Number(a.chosen) - Number(b.chosen)).forEach((p) => {
      if (p.low != null) {
        svg.appendChild(el("line", { x1: sx(p.tokens), x2: sx(p.tokens), y1: unitY(p.low), y2: unitY(p.high), class: "chart-interval" }));
      }
      const classes = ["chart-point"];
      if (p.pareto) classes.push("pareto");
      if (p.chosen) classes.push("chosen");
      const dot = el("circle", { cx: sx(p.tokens), cy: unitY(p.reward), r: p.chosen ? 7 : 5, class: classes.join(" "), "data-candidate": p.id });
      tipOn(dot, `${p.id} · ${p.operation}: reward ${fmt(p.reward)} [${fmt(p.low, 2)}, ${fmt(p.high, 2)}] · ${fmt(p.tokens, 0)} prompt tokens/call · ${fmt(p.latency, 2)} s/call${p.pareto ? " · non-dominated" : ""}${p.cheaper ? " · cheaper, within noise of the best" : ""}`);
      svg.appendChild(dot);
    });
  }

  function draw() {
    const points = readPoints();
    if (!points) return;
    drawScatter(points);
    drawCost(points);
  }

  if (window.htmx) window.htmx.onLoad(draw);
  document.addEventListener("DOMContentLoaded", draw);
})();
