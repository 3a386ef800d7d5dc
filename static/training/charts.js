/* Trainboard run charts (Chart.js from npm, served by Django staticfiles).
 *
 * The server sends the whole history as JSON in #run-chart-data (data-history) and the
 * before/after rows in #run-evaluations (data-before-after), both swapped in by the htmx
 * WebSocket extension. When one of them is swapped in (htmx.onLoad) its chart is updated in
 * place, so the history chart grows point by point without a reload.
 */
(function () {
  "use strict";
  const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];
  const charts = {};
  window.TBCharts = charts;

  function readJSON(element, attribute) {
    if (!element) return null;
    const raw = element.getAttribute(attribute);
    if (!raw) return null;
    try { return JSON.parse(raw); } catch (error) { return null; }
  }

  // Every reward names its split: fit logs training batches as "reward", validation as "val_".
  function splitLabel(key) {
    return key.startsWith("val_") ? `validation ${key.slice(4)}` : `training ${key}`;
  }

  function historyDatasets(history, labelPrefix, colorOffset) {
    const keys = Object.keys(history.series || {});
    const bases = [];
    keys.forEach((key) => { const base = key.replace(/^val_/, ""); if (!bases.includes(base)) bases.push(base); });
    return keys.map((key) => {
      const color = PALETTE[(bases.indexOf(key.replace(/^val_/, "")) + (colorOffset || 0)) % PALETTE.length];
      return {
        label: (labelPrefix || "") + splitLabel(key),
        data: history.series[key],
        borderColor: color,
        backgroundColor: color,
        borderDash: key.startsWith("val_") ? [6, 4] : [],
        tension: 0.2,
        spanGaps: true,
        pointRadius: 3,
      };
    });
  }

  const lineOptions = {
    responsive: true,
    maintainAspectRatio: false,
    animation: false,
    interaction: { mode: "index", intersect: false },
    scales: { y: { suggestedMin: 0, suggestedMax: 1 }, x: { title: { display: true, text: "epoch" } } },
    plugins: {
      tooltip: { callbacks: { label: (ctx) => `${ctx.dataset.label}: ${ctx.parsed.y == null ? "—" : ctx.parsed.y.toFixed(3)}` } },
      // Legend swatches drawn as a flat box (a stretch of line) stroked with the dataset's
      // dash: a dashed validation curve showed as a filled blob, like its solid training twin
      // (usePointStyle would drop the dash: it takes the point's style, not the line's).
      legend: { labels: { boxWidth: 32, boxHeight: 0 } },
    },
  };

  // The run's chart puts epoch e's logs at e + 1 on a number line, so the epoch under way
  // (``in_epoch``: its running training reward after each batch) sits between e and e + 1 and
  // the line grows batch by batch before the epoch's point is in.
  const historyOptions = {
    ...lineOptions,
    scales: {
      y: lineOptions.scales.y,
      x: { type: "linear", min: 0, ticks: { stepSize: 1, precision: 0 }, title: { display: true, text: "epoch" } },
    },
  };

  function historyPoints(history) {
    const datasets = historyDatasets(history).map((dataset) => ({
      ...dataset,
      data: dataset.data.map((y, i) => ({ x: history.epochs[i] + 1, y })),
    }));
    const now = history.in_epoch;
    if (now && now.batches && (now.points || []).length) {
      const points = now.points.map(([done, reward]) => ({ x: now.epoch + done / now.batches, y: reward }));
      const last = history.epochs.length ? history.epochs.length - 1 : -1;
      const start = last >= 0 && history.series.reward ? [{ x: history.epochs[last] + 1, y: history.series.reward[last] }] : [];
      datasets.push({
        label: `training reward, epoch ${now.epoch + 1} so far`,
        data: [...start, ...points],
        borderColor: PALETTE[0],
        backgroundColor: PALETTE[0],
        borderDash: [2, 3],
        tension: 0.2,
        pointRadius: 1.5,
      });
    }
    return datasets;
  }

  function renderHistory() {
    const canvas = document.getElementById("history-chart");
    const history = readJSON(document.getElementById("run-chart-data"), "data-history");
    if (!canvas || !history || typeof Chart === "undefined") return;
    const labels = history.epochs.map((epoch) => epoch + 1);
    const chart = charts.history;
    if (!chart || chart.canvas !== canvas) {
      charts.history = new Chart(canvas, { type: "line", data: { datasets: historyPoints(history) }, options: historyOptions });
    } else {
      const fresh = historyPoints(history);
      fresh.forEach((dataset, index) => {
        if (chart.data.datasets[index] && chart.data.datasets[index].label === dataset.label) {
          chart.data.datasets[index].data = dataset.data;
        } else {
          chart.data.datasets[index] = dataset;
        }
      });
      chart.data.datasets.length = fresh.length;
      chart.update("none");
    }
    canvas.dataset.points = String(labels.length);
    canvas.dataset.batchPoints = String(((history.in_epoch || {}).points || []).length);
  }

  /* Error bars (mean ± std) drawn over bar charts: Chart.js has none built in. */
  const errorBars = {
    id: "tbErrorBars",
    afterDatasetsDraw(chart) {
      const { ctx } = chart;
      chart.data.datasets.forEach((dataset, datasetIndex) => {
        if (!dataset.errors) return;
        const meta = chart.getDatasetMeta(datasetIndex);
        if (meta.hidden) return;
        meta.data.forEach((bar, index) => {
          const std = dataset.errors[index];
          const mean = dataset.data[index];
          if (std == null || mean == null || std === 0) return;
          const scale = chart.scales.y;
          const top = scale.getPixelForValue(mean + std);
          const bottom = scale.getPixelForValue(Math.max(0, mean - std));
          ctx.save();
          ctx.strokeStyle = "#111";
          ctx.lineWidth = 1.5;
          ctx.beginPath();
          ctx.moveTo(bar.x, top); ctx.lineTo(bar.x, bottom);
          ctx.moveTo(bar.x - 5, top); ctx.lineTo(bar.x + 5, top);
          ctx.moveTo(bar.x - 5, bottom); ctx.lineTo(bar.x + 5, bottom);
          ctx.stroke();
          ctx.restore();
        });
      });
    },
  };

  function barDatasets(rows, prefix, colors) {
    return [
      { label: (prefix || "") + "test before", data: rows.map((r) => r.before_mean), errors: rows.map((r) => r.before_std), backgroundColor: colors[0] },
      { label: (prefix || "") + "test after", data: rows.map((r) => r.after_mean), errors: rows.map((r) => r.after_std), backgroundColor: colors[1] },
    ];
  }

  const barOptions = {
    responsive: true,
    maintainAspectRatio: false,
    animation: false,
    scales: { y: { suggestedMin: 0, suggestedMax: 1 } },
    // A 0.000 mean still draws a sliver, so "before: 0" reads as a measured zero, not a gap.
    datasets: { bar: { minBarLength: 3 } },
    plugins: {
      tooltip: {
        callbacks: {
          label: (ctx) => {
            const std = ctx.dataset.errors ? ctx.dataset.errors[ctx.dataIndex] : null;
            const mean = ctx.parsed.y;
            if (mean == null) return `${ctx.dataset.label}: —`;
            return `${ctx.dataset.label}: ${mean.toFixed(3)}` + (std != null ? ` ± ${std.toFixed(3)}` : "");
          },
        },
      },
    },
  };

  function renderBeforeAfter() {
    const holder = document.getElementById("run-evaluations");
    const canvas = document.getElementById("before-after-chart");
    const rows = readJSON(holder, "data-before-after");
    if (!canvas || !rows || !rows.length || typeof Chart === "undefined") return;
    if (charts.beforeAfter && charts.beforeAfter.canvas === canvas) {
      charts.beforeAfter.data.labels = rows.map((r) => r.metric);
      charts.beforeAfter.data.datasets = barDatasets(rows, "", ["#94a3b8", "#2563eb"]);
      charts.beforeAfter.update("none");
      return;
    }
    if (charts.beforeAfter) charts.beforeAfter.destroy();
    charts.beforeAfter = new Chart(canvas, {
      type: "bar",
      data: { labels: rows.map((r) => r.metric), datasets: barDatasets(rows, "", ["#94a3b8", "#2563eb"]) },
      options: barOptions,
      plugins: [errorBars],
    });
  }

  function renderCompare() {
    const source = document.getElementById("compare-data");
    if (!source || typeof Chart === "undefined") return;
    const data = JSON.parse(source.textContent);
    const canvas = document.getElementById("compare-history-chart");
    if (canvas && !charts.compareHistory) {
      const longest = Math.max(0, ...data.runs.map((run) => (run.history.epochs.length ? Math.max(...run.history.epochs) + 1 : 0)));
      const labels = Array.from({ length: longest }, (_, i) => i + 1);
      const datasets = [];
      data.runs.forEach((run, runIndex) => {
        ["reward", "val_reward"].forEach((key) => {
          if (!run.history.series[key]) return;
          const values = new Array(longest).fill(null);
          run.history.epochs.forEach((epoch, i) => { values[epoch] = run.history.series[key][i]; });
          const color = PALETTE[runIndex % PALETTE.length];
          datasets.push({ label: `${run.label} ${splitLabel(key)}`, data: values, borderColor: color, backgroundColor: color, borderDash: key.startsWith("val_") ? [6, 4] : [], spanGaps: true, tension: 0.2 });
        });
      });
      charts.compareHistory = new Chart(canvas, { type: "line", data: { labels, datasets }, options: lineOptions });
    }
    const bars = document.getElementById("compare-bars-chart");
    if (bars && !charts.compareBars) {
      const metrics = [];
      data.runs.forEach((run) => run.before_after.forEach((row) => { if (!metrics.includes(row.metric)) metrics.push(row.metric); }));
      const datasets = [];
      data.runs.forEach((run, runIndex) => {
        const rows = metrics.map((metric) => run.before_after.find((row) => row.metric === metric) || {});
        const color = PALETTE[runIndex % PALETTE.length];
        datasets.push({ label: `${run.label} test before`, data: rows.map((r) => r.before_mean ?? null), errors: rows.map((r) => r.before_std ?? null), backgroundColor: color + "66", stack: `run${runIndex}b` });
        datasets.push({ label: `${run.label} test after`, data: rows.map((r) => r.after_mean ?? null), errors: rows.map((r) => r.after_std ?? null), backgroundColor: color, stack: `run${runIndex}a` });
      });
      charts.compareBars = new Chart(bars, { type: "bar", data: { labels: metrics, datasets }, options: barOptions, plugins: [errorBars] });
    }
  }

  // Each chart is redrawn when what feeds it arrives: the page at load, then the fragment a
  // live update swapped in (the others are left as they are).
  htmx.onLoad((elt) => {
    if (Trainboard.within(elt, "run-chart-data")) renderHistory();
    if (Trainboard.within(elt, "run-evaluations")) renderBeforeAfter();
    if (Trainboard.within(elt, "compare-data")) renderCompare();
  });
})();
