// The queues: a table of every queue with its jobs per state (from
// /v1/stats), the job rates of the whole server, and, for an admin,
// pause and resume (PATCH /v1/queues/{name} {"active"}); and one queue's
// page, which lists its jobs.
import { api } from "./api.js";
import { append, emptyRow, h, jobsHref, keyedRows, link, setText } from "./dom.js";
import { listView } from "./list.js";
import { loadStats, rates } from "./stats.js";

const COUNTS = ["queued", "running", "waiting", "delayed", "blocked"];

// roleNote explains to a client why queue actions are missing.
function roleNote(ctx) {
  return ctx.admin ? null : h("p", { id: "role-note", className: "note" },
    `You are logged in with a client token: you may retry, cancel, run now and delete jobs. Pausing and resuming queues needs an admin token, so those buttons are not shown.`);
}

// pauseButton toggles a queue's active flag, then calls done.
function pauseButton(done) {
  const b = h("button", { type: "button", className: "pause" });
  b.addEventListener("click", async () => {
    b.disabled = true;
    try {
      await api("PATCH", `/queues/${encodeURIComponent(b.dataset.queue)}`, { active: b.dataset.active !== "true" });
      await done();
    } catch (e) {
      b.title = e.message;
      setText(b.parentElement.querySelector(".err") || b.parentElement.appendChild(h("span", { className: "err" })), e.message);
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

function showPause(b, q) {
  b.dataset.queue = q.name;
  b.dataset.active = String(q.active);
  setText(b, q.active ? "Pause" : "Resume");
  b.setAttribute("aria-label", `${q.active ? "Pause" : "Resume"} queue ${q.name}`);
}

// showRates writes the server's job rates into el.
function showRates(el) {
  const r = rates();
  const f = (k) => (r ? r[k].toFixed(1) : "…");
  setText(el, `Whole server, per second over the last 10 s: ${f("started")} started, ${f("succeeded")} succeeded, ${f("failed")} failed, ${f("retried")} retried, ${f("cancelled")} cancelled.`);
}

// queuesView lists the queues.
export function queuesView(el, _args, ctx) {
  document.title = "usher — queues";
  const tbody = h("tbody");
  const cols = ["queue", "status", ...COUNTS, "jobs"];
  if (ctx.admin) cols.push("action");
  const rateLine = h("p", { id: "rates" });
  append(el, h("h2", {}, "Queues"), rateLine, roleNote(ctx),
    h("table", { id: "queues" }, h("thead", {}, h("tr", {}, cols.map((c) => h("th", { scope: "col" }, c)))), tbody));
  const refresh = async () => {
    const [{ queues }, stats] = await Promise.all([api("GET", "/queues"), loadStats()]);
    const byName = new Map((stats.queues || []).map((q) => [q.name, q]));
    keyedRows(tbody, queues, (q) => q.name, (q) => {
      const tr = h("tr", {}, h("td", {}, link(`/jobs/queues/${encodeURIComponent(q.name)}`, q.name)), h("td", { className: "status" }),
        COUNTS.map((c) => h("td", { className: `n ${c}` })),
        h("td", {}, link(jobsHref({ queue: q.name, state: "failed" }), "failed"), " ", link(jobsHref({ queue: q.name }), "all")));
      if (ctx.admin) tr.append(h("td", {}, pauseButton(refresh)));
      return tr;
    }, (tr, q) => {
      const s = byName.get(q.name) || {};
      setText(tr.querySelector(".status"), q.active ? "active" : "paused");
      tr.classList.toggle("paused", !q.active);
      for (const c of COUNTS) setText(tr.querySelector(`.${c}`), s[c] ?? 0);
      const b = tr.querySelector("button.pause");
      if (b) showPause(b, q);
    });
    emptyRow(tbody, cols.length, "no queues");
    showRates(rateLine);
  };
  return { refresh };
}

// queueView is one queue: its counts, pause or resume, and its jobs.
export function queueView(el, args, ctx) {
  document.title = `usher — queue ${args.name}`;
  const summary = h("p", { id: "queue-summary" });
  const actions = h("span", { className: "queue-actions" });
  const pause = ctx.admin ? pauseButton(() => refresh()) : null;
  if (pause) actions.append(pause);
  const listEl = h("div");
  append(el, h("h2", {}, "Queue ", h("span", { id: "queue-name" }, args.name)), h("div", { className: "toolbar" }, summary, actions), roleNote(ctx), listEl);
  const list = listView(listEl, { params: args.params, fixed: { queue: args.name } }, ctx);
  const refresh = async () => {
    const [q, stats] = await Promise.all([api("GET", `/queues/${encodeURIComponent(args.name)}`), loadStats(), list.refresh()]);
    const s = (stats.queues || []).find((x) => x.name === q.name) || {};
    setText(summary, `${q.active ? "active" : "paused"} · ${COUNTS.map((c) => `${s[c] ?? 0} ${c}`).join(" · ")}`);
    if (pause) showPause(pause, q);
  };
  return { refresh, dispose: list.dispose };
}
