// The dashboard's charts of the last hour, drawn with uPlot from the
// history that /api/dashboard sends (docs/operations.md, "The dashboard"):
// a stream's first snapshot carries every sample, later ones the new ones.
// Each chart's element carries data-points (samples drawn), and
// window.usherCharts holds the uPlot instances, for tests.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

const HOUR = 3600;
// Tableau 10's first colours: distinct on light and dark backgrounds.
const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948"];
const TIERS = ["fast", "medium", "slow"];
const REASONS = ["request", "idle", "queue_full", "no_backend", "other"];
const q = (k, i) => (s) => s[k]?.[i] ?? null;

// Each chart: its title, unit, series (label and value of a sample), and
// whether its scale is logarithmic.
const CHARTS = [
  { id: "waiting", title: "Tasks waiting, by class", series: [...TIERS, "default"].map((c) => [c, (s) => s.waiting?.[c] ?? 0]) },
  { id: "running", title: "Tasks running, by tier", series: [...TIERS, "interactive"].map((c) => [c, (s) => s.running?.[c] ?? 0]) },
  { id: "throughput", title: "Tasks ended per interval", series: [["done", (s) => s.done], ["failed", (s) => s.failed], ["denied", (s) => s.denied]] },
  { id: "compile", title: "Compile time (ms)", log: true, series: [["p50", q("compileMs", 0)], ["p90", q("compileMs", 1)], ["p99", q("compileMs", 2)]] },
  { id: "wait", title: "Queue wait (ms)", log: true, series: [["p50", q("waitMs", 0)], ["p90", q("waitMs", 1)], ["p99", q("waitMs", 2)]] },
  { id: "cache", title: "Result cache hit rate (%)", series: [["hit rate", (s) => {
    const n = s.cacheHits + s.cacheMisses;
    return n ? Math.round((1000 * s.cacheHits) / n) / 10 : null;
  }]] },
  { id: "denials", title: "Denials, by reason", series: REASONS.map((r) => [r, (s) => s.denials?.[r] ?? 0]) },
];

let samples = []; // oldest first
let intervalS = 10;
const charts = {};
window.usherCharts = charts;

// addHistory merges a snapshot's history and redraws.
export function addHistory(h) {
  if (!h) return;
  intervalS = (h.intervalMs || 10000) / 1000;
  const last = samples.length ? samples[samples.length - 1].t : 0;
  for (const s of h.samples || []) if (s.t > last) samples.push(s);
  const cut = (samples.length ? samples[samples.length - 1].t : 0) - HOUR * 1000;
  samples = samples.filter((s) => s.t > cut);
  draw();
}

// columns turns the samples into uPlot's columns; a missing interval (no
// scheduler led) becomes a null point, which breaks the lines.
function columns(chart) {
  const xs = [], ys = chart.series.map(() => []);
  let prev = null;
  for (const s of samples) {
    const t = s.t / 1000;
    if (prev !== null && t - prev > intervalS * 1.5) {
      xs.push(prev + intervalS);
      for (const y of ys) y.push(null);
    }
    xs.push(t);
    chart.series.forEach(([, v], i) => ys[i].push(v(s)));
    prev = t;
  }
  return [xs, ...ys];
}

function colours() {
  const css = getComputedStyle(document.documentElement);
  return { fg: css.getPropertyValue("--fg").trim() || "#1e1e1e", grid: css.getPropertyValue("--border").trim() || "#d0d4da" };
}

function options(chart, width) {
  const c = colours();
  const axis = { stroke: c.fg, grid: { stroke: c.grid, width: 1 }, ticks: { stroke: c.grid, width: 1 } };
  return {
    title: chart.title, width, height: 180,
    scales: { x: { time: true }, y: chart.log ? { distr: 3 } : { range: (u, min, max) => [0, Math.max(1, max)] } },
    axes: [axis, { ...axis, size: 50 }],
    series: [{}, ...chart.series.map(([label], i) => ({ label, stroke: PALETTE[i % PALETTE.length], width: 2, spanGaps: false, points: { size: 4 } }))],
    legend: { live: false },
  };
}

// hour is the x range: the hour up to the newest sample's interval.
function hour() {
  const hi = samples.length ? samples[samples.length - 1].t / 1000 + intervalS : Date.now() / 1000;
  return [hi - HOUR, hi];
}

function widthOf(el) { return Math.max(200, Math.floor(el.clientWidth)); }

// draw creates the charts (once per theme) or gives them the new data.
function draw() {
  const box = document.getElementById("charts");
  if (!box) return;
  for (const chart of CHARTS) {
    let el = document.getElementById("chart-" + chart.id);
    if (!el) {
      el = document.createElement("figure");
      el.id = "chart-" + chart.id;
      el.className = "chart";
      el.setAttribute("aria-label", chart.title);
      box.append(el);
    }
    const data = columns(chart);
    if (charts[chart.id]) charts[chart.id].setData(data);
    else charts[chart.id] = new uPlot(options(chart, widthOf(el)), data, el);
    const [min, max] = hour();
    charts[chart.id].setScale("x", { min, max });
    el.dataset.points = String(samples.length);
  }
}

// redraw rebuilds the charts, in the colours of the theme now.
export function redraw() {
  for (const [id, u] of Object.entries(charts)) { u.destroy(); delete charts[id]; }
  draw();
}

// The charts follow the width of their box.
let pending = 0;
new ResizeObserver(() => {
  cancelAnimationFrame(pending);
  pending = requestAnimationFrame(() => {
    for (const chart of CHARTS) {
      const el = document.getElementById("chart-" + chart.id), u = charts[chart.id];
      if (el && u) u.setSize({ width: widthOf(el), height: 180 });
    }
  });
}).observe(document.getElementById("charts") || document.body);
