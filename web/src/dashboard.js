// The dashboard: renders each `snapshot` event of /api/dashboard.
import { markDocument, onThemeChange } from "./themepref.js";

// The editor's theme choice (themepref.js), here too.
markDocument();
onThemeChange(markDocument);
const $ = (id) => document.getElementById(id);
const ms = (v) => (v === undefined || v === null ? "–" : (v / 1000).toFixed(1) + " s");
const time = (v) => (v ? new Date(v).toLocaleTimeString() : "–");

function fill(id, rows, cols) {
  const tb = $(id).tBodies[0];
  tb.textContent = "";
  for (const r of rows || []) {
    const tr = tb.insertRow();
    for (const c of cols) tr.insertCell().textContent = typeof c === "function" ? c(r) : String(r[c] ?? "");
  }
  if (!rows?.length) { const td = tb.insertRow().insertCell(); td.colSpan = cols.length; td.textContent = "none"; td.className = "empty"; }
}

function render(s) {
  fill("tiers", s.tiers, ["name", (r) => ms(r.durationMs), (r) => `${r.running} / ${r.limit}`, "counted", "limit"]);
  fill("running", s.running, ["id", "class", "tier", "backend", (r) => time(r.startedAt), (r) => (r.interactive ? "yes" : "no")]);
  fill("queue", s.queue, ["position", "id", "class", (r) => ms(r.estimateMs)]);
  fill("backends", s.backends, ["id", "state"]);
  fill("events", (s.events || []).slice().reverse(), [(r) => time(r.time), "kind", "task", "detail"]);
  const jobs = s.jobs || {};
  const blockedBy = (r) => Object.entries(r.blockedBy || {}).map(([k, n]) => `${k} (${n})`).join(", ") || "–";
  fill("jobqueues", jobs.queues, ["name", "queued", "running", "waiting", "delayed", "blocked", blockedBy]);
  fill("jobkeys", [...(jobs.keys || []), ...(jobs.groups || []).map((g) => ({ ...g, key: `group ${g.key}` }))],
    ["key", (r) => `${r.running} / ${r.limit || "∞"}`, "queued"]);
  fill("agents", jobs.agents, ["id", (r) => `${r.running} / ${r.slots}`]);
  fill("jobtiers", jobs.tiers, ["name", (r) => ms(r.durationMs), (r) => `${r.running} / ${r.limit}`]);
  $("tps").textContent = `tasks per second: ${(s.tasksPerSecond ?? 0).toFixed(2)}`;
  showLeader(s);
}

// showLeader names the leading scheduler of a multi-node deployment, or
// says why there is no state to show; single-node mode sends neither.
function showLeader(s) {
  const el = $("leader");
  const parts = [];
  if (s.leader) parts.push(`leader: ${s.leader.node}`);
  if (s.noData) parts.push(s.noData);
  el.textContent = parts.join(" — ");
  el.className = s.noData ? "warn" : "";
}

const es = new EventSource("/api/dashboard");
es.addEventListener("snapshot", (e) => { $("conn").textContent = "live"; render(JSON.parse(e.data)); });
es.onerror = () => { $("conn").textContent = "reconnecting…"; };
