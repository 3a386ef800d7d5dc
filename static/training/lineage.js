/* Trainboard lineage tree (SVG): the server lays it out (training/services/lineage.py), this
 * only draws it: one row per generation, edges coloured by operation, the best path thick.
 * Redrawn when a live update swaps #run-lineage in (and on resize); candidate text goes
 * through textContent only.
 */
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const ROW = 64, MIN_COLUMN = 46, PAD = 24;

  function el(name, attrs) {
    const node = document.createElementNS(NS, name);
    Object.entries(attrs || {}).forEach(([key, value]) => node.setAttribute(key, String(value)));
    return node;
  }

  function readLineage() {
    const holder = document.getElementById("run-lineage");
    if (!holder) return null;
    try { return JSON.parse(holder.getAttribute("data-lineage") || "null"); } catch (error) { return null; }
  }

  function fmt(value) { return value == null ? "—" : Number(value).toFixed(3); }

  function draw() {
    const svg = document.getElementById("lineage-svg");
    const tip = document.getElementById("lineage-tip");
    const data = readLineage();
    if (!svg || !data) return;
    const holder = svg.parentElement;
    const available = Math.max(300, holder.clientWidth - 4);
    const width = Math.max(available, PAD * 2 + data.widest * MIN_COLUMN);
    const height = PAD * 2 + Math.max(0, data.depth - 1) * ROW + 20;
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("width", String(width));
    svg.setAttribute("height", String(height));
    svg.replaceChildren();
    const at = new Map();
    data.nodes.forEach((node) => at.set(node.id, [PAD + node.x * (width - 2 * PAD), PAD + node.depth * ROW]));
    const edges = el("g", { class: "lineage-edges" });
    const nodes = el("g", { class: "lineage-nodes" });
    svg.append(edges, nodes);
    data.edges.forEach((edge) => {
      const a = at.get(edge.source), b = at.get(edge.target);
      if (!a || !b) return;
      const midY = (a[1] + b[1]) / 2;
      const path = el("path", {
        d: `M${a[0]},${a[1]} C${a[0]},${midY} ${b[0]},${midY} ${b[0]},${b[1]}`,
        class: `lineage-edge op-${edge.operation}${edge.best ? " best" : ""}`,
        "data-operation": edge.operation,
      });
      const hint = el("title");
      hint.textContent = `${edge.source} → ${edge.target}: ${edge.operation === "by_hand" ? "by hand" : edge.operation}`;
      path.append(hint);
      edges.append(path);
    });
    data.nodes.forEach((node) => {
      const [x, y] = at.get(node.id);
      const group = el("g", { class: `lineage-node${node.best ? " best" : ""} status-${node.status}`, "data-candidate": node.id, tabindex: 0 });
      group.append(el("circle", { cx: x, cy: y, r: node.best ? 9 : 7 }));
      const text = el("text", { x, y: y + 22, "text-anchor": "middle" });
      text.textContent = node.id;
      group.append(text);
      group.addEventListener("mousemove", (event) => {
        tip.replaceChildren();
        const title = document.createElement("strong");
        title.textContent = `${node.id} · ${node.operation === "by_hand" ? "by hand" : node.operation}`;
        const facts = document.createElement("div");
        facts.textContent = `epoch ${node.epoch + 1} · reward ${fmt(node.reward)} · ${node.status}`;
        tip.append(title, facts);
        tip.hidden = false;
        const box = tip.parentElement.getBoundingClientRect();
        tip.style.left = `${Math.min(event.clientX - box.left + 12, Math.max(4, box.width - tip.offsetWidth - 4))}px`;
        tip.style.top = `${event.clientY - box.top + 14}px`;
      });
      group.addEventListener("mouseleave", () => { tip.hidden = true; });
      group.addEventListener("click", () => { if (node.url) window.location.assign(node.url); });
      nodes.append(group);
    });
    svg.dataset.nodes = String(data.nodes.length);
  }

  htmx.onLoad((elt) => { if (Trainboard.within(elt, "run-lineage")) draw(); });
  window.addEventListener("resize", draw);
})();
