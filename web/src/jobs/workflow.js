// A workflow drawn as a DAG: jobs in layers (a job sits one layer right
// of its deepest dependency), ordered within a layer by the mean position
// of their dependencies, edges from each dependency (`after`) to its job,
// each job's state as a colour and a label, each a link to the job.
import { api } from "./api.js";
import { h, jobsHref, link, replace, setText, stateBadge } from "./dom.js";

const W = 180, H = 46, GX = 70, GY = 18, PAD = 12;

// layout answers each job's layer and row: {pos: Map id → {layer, row}, layers}.
export function layout(jobs) {
  const byId = new Map(jobs.map((j) => [j.id, j]));
  const deps = (j) => (j.after || []).filter((a) => byId.has(a));
  const layerOf = new Map();
  const visit = (j, seen = new Set()) => {
    if (layerOf.has(j.id)) return layerOf.get(j.id);
    if (seen.has(j.id)) return 0; // a cycle cannot be submitted; stay finite anyway
    seen.add(j.id);
    const l = deps(j).reduce((m, a) => Math.max(m, visit(byId.get(a), seen) + 1), 0);
    layerOf.set(j.id, l);
    return l;
  };
  const layers = [];
  for (const j of [...jobs].sort((a, b) => Number(a.id) - Number(b.id))) (layers[visit(j)] ||= []).push(j);
  const pos = new Map();
  layers.forEach((layer, l) => {
    if (l > 0) {
      const mean = (j) => { const d = deps(j).map((a) => pos.get(a).row); return d.reduce((s, x) => s + x, 0) / (d.length || 1); };
      layer.sort((a, b) => mean(a) - mean(b) || Number(a.id) - Number(b.id));
    }
    layer.forEach((j, row) => pos.set(j.id, { layer: l, row }));
  });
  return { pos, layers, deps };
}

// clip shortens s to n characters, ending it with "…" when cut (the
// job's page has the whole name).
const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);

// drawDag draws the jobs as an SVG element.
export function drawDag(jobs) {
  const { pos, layers, deps } = layout(jobs);
  const rows = Math.max(1, ...layers.map((l) => l.length));
  const width = PAD * 2 + layers.length * W + Math.max(0, layers.length - 1) * GX;
  const height = PAD * 2 + rows * H + (rows - 1) * GY;
  const at = (id) => { const p = pos.get(id); return { x: PAD + p.layer * (W + GX), y: PAD + p.row * (H + GY) }; };
  const svg = h("svg:svg", { id: "dag", width, height, viewBox: `0 0 ${width} ${height}`, role: "group", "aria-label": `workflow of ${jobs.length} jobs` },
    h("svg:defs", {}, h("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "8", markerHeight: "8", orient: "auto-start-reverse" },
      h("svg:path", { d: "M 0 0 L 10 5 L 0 10 z", className: "arrowhead" }))));
  for (const j of jobs) {
    for (const d of deps(j)) {
      const a = at(d), b = at(j.id);
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
      svg.append(h("svg:path", { className: "edge", "data-from": d, "data-to": j.id, "marker-end": "url(#arrow)",
        d: `M ${x1} ${y1} C ${x1 + GX / 2} ${y1}, ${x2 - GX / 2} ${y2}, ${x2} ${y2}` }));
    }
  }
  for (const j of jobs) {
    const { x, y } = at(j.id);
    svg.append(h("svg:a", { href: `/jobs/job/${encodeURIComponent(j.id)}`, "data-route": "", "data-job": j.id, className: "node" },
      h("svg:rect", { x, y, width: W, height: H, rx: "6", className: `state-${j.state}` }),
      h("svg:text", { x: x + 8, y: y + 18, className: "node-title" }, clip(`job ${j.id} · ${j.queue}`, 25)),
      h("svg:text", { x: x + 8, y: y + 36, className: "node-state" }, j.state)));
  }
  return svg;
}

// workflowView shows workflow args.id and redraws it when a job changes.
export function workflowView(el, args) {
  document.title = `usher — workflow ${args.id}`;
  const summary = h("p", { id: "wf-summary" });
  const pic = h("div", { id: "dag-box" });
  const legend = h("p", { className: "legend" }, "Colours: ", ["waiting", "scheduled", "delayed", "queued", "running", "succeeded", "failed", "cancelled"].map((s) => [stateBadge(s), " "]));
  el.append(h("h2", {}, `Workflow ${args.id}`), summary, legend, pic,
    h("p", {}, link(jobsHref({ workflow: args.id }), "its jobs as a list")));
  let shown = "";
  async function refresh() {
    const wf = await api("GET", `/workflows/${encodeURIComponent(args.id)}`);
    const counts = {};
    for (const j of wf.jobs) counts[j.state] = (counts[j.state] || 0) + 1;
    setText(summary, `${wf.name ? `“${wf.name}”, ` : ""}${wf.state}: ${Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(", ")}`);
    const sig = wf.jobs.map((j) => `${j.id}:${j.state}:${(j.after || []).join(",")}`).join(" ");
    if (sig === shown) return;
    shown = sig;
    const focused = document.activeElement?.closest?.("a.node")?.dataset.job;
    replace(pic, drawDag(wf.jobs));
    if (focused) pic.querySelector(`a[data-job="${CSS.escape(focused)}"]`)?.focus();
  }
  return { refresh };
}
