// One job: what it carries (payload, tags, metadata), where it stands
// (state, attempt n of max, progress, timeline), what it left (error,
// output tail, result, the attempts that ended without success), its keys, group and workflow, and the actions
// retry, cancel, run now and delete. Every value is shown as text.
import { api } from "./api.js";
import { confirmAction, duration, h, jobsHref, json, link, replace, setText, stateBadge, time } from "./dom.js";

const FINAL = ["succeeded", "failed", "cancelled"];
// ACTIONS: the label of each action and the states it applies to.
const ACTIONS = [
  { a: "retry", label: "Retry", when: (s) => s === "failed" || s === "cancelled" },
  { a: "cancel", label: "Cancel", when: (s) => !FINAL.includes(s) },
  { a: "run", label: "Run now", when: (s) => s === "scheduled" || s === "delayed" },
  { a: "delete", label: "Delete", when: (s) => s !== "running" },
];

// jobView shows job args.id and refreshes it live.
export function jobView(el, args, ctx) {
  const id = args.id;
  document.title = `usher — job ${id}`;
  const badge = h("span", { id: "job-state" });
  const msg = h("p", { id: "job-message", role: "status" });
  const buttons = ACTIONS.map(({ a, label }) => h("button", { type: "button", "data-action": a, onclick: () => act(a, label) }, label));
  const body = h("div", { id: "job-body" });
  el.append(h("h2", {}, `Job ${id} `, badge), h("div", { className: "toolbar", role: "toolbar", "aria-label": "job actions" }, buttons), msg, body);
  let shown = "";

  async function act(a, label) {
    if (a === "delete" && !(await confirmAction(`Delete job ${id}? This cannot be undone.`, "Delete"))) return;
    try {
      if (a === "delete") {
        await api("DELETE", `/jobs/${encodeURIComponent(id)}`);
        ctx.navigate(jobsHref({ queue: body.dataset.queue || "" }));
        return;
      }
      await api("POST", `/jobs/${encodeURIComponent(id)}/${a}`);
      setText(msg, `${label}: done.`);
      await refresh();
    } catch (e) {
      setText(msg, `${label} failed: ${e.message}`);
    }
  }

  async function refresh() {
    let j;
    try {
      j = await api("GET", `/jobs/${encodeURIComponent(id)}`);
    } catch (e) {
      if (e.status !== 404) throw e;
      replace(body, h("p", {}, `There is no job ${id} (it may have been deleted).`));
      for (const b of buttons) b.disabled = true;
      shown = "";
      return;
    }
    for (const b of buttons) b.disabled = !ACTIONS.find((x) => x.a === b.dataset.action).when(j.state);
    const text = JSON.stringify(j);
    if (text === shown) return; // nothing changed: the page stays as it is (scroll, selection)
    shown = text;
    replace(badge, stateBadge(j.state));
    body.dataset.queue = j.queue;
    render(body, j);
  }
  return { refresh };
}

// render fills body with the job's sections, keeping the output's scroll.
function render(body, j) {
  const out = body.querySelector("#job-output");
  const atEnd = !out || out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
  replace(body,
    h("section", { "aria-labelledby": "h-facts" }, h("h3", { id: "h-facts" }, "Facts"), facts(j)),
    progress(j),
    h("section", { "aria-labelledby": "h-time" }, h("h3", { id: "h-time" }, "Timeline"), timeline(j)),
    h("section", { "aria-labelledby": "h-tags" }, h("h3", { id: "h-tags" }, "Tags"),
      j.tags?.length ? h("ul", { id: "job-tags", className: "tags" }, j.tags.map((t) => h("li", {}, link(jobsHref({ tag: t }), t)))) : h("p", {}, "none")),
    block("metadata", "Metadata", j.metadata),
    block("payload", "Payload (args)", j.payload),
    attempts(j),
    j.error ? textBlock("error", "Last error", j.error) : null,
    j.output ? textBlock("output", "Output (the tail the server keeps)", j.output) : null,
    j.result !== undefined ? block("result", "Result", j.result) : null);
  const o = body.querySelector("#job-output");
  if (o && atEnd) o.scrollTop = o.scrollHeight;
}

function facts(j) {
  const dl = h("dl", { id: "job-facts" });
  const row = (k, ...v) => dl.append(h("dt", {}, k), h("dd", {}, ...v));
  row("queue", link(`/jobs/queues/${encodeURIComponent(j.queue)}`, j.queue));
  row("state", j.state);
  row("attempt", h("span", { id: "job-attempt" }, `${j.attempt} of ${j.maxAttempts}`));
  if (j.agent) row("agent", j.agent);
  row("tier", `${j.tier || "–"}${j.timeoutMs ? `, time limit ${duration(j.timeoutMs)}` : ""}`);
  if (j.priority) row("priority", j.priority);
  row("keys", j.keys?.length ? h("span", { id: "job-keys" }, j.keys.map((k, i) => [i ? ", " : "", link(jobsHref({ key: k }), k)])) : "none");
  row("group", j.group ? `${j.group} (${j.mode || "write"})` : "none");
  if (j.workflow) row("workflow", link(`/jobs/workflows/${encodeURIComponent(j.workflow)}`, `workflow ${j.workflow}`, { id: "job-workflow" }));
  if (j.after?.length) row("after", j.after.map((a, i) => [i ? ", " : "", link(`/jobs/job/${encodeURIComponent(a)}`, `job ${a}`)]));
  if (j.exitCode !== undefined) row("exit code", j.exitCode);
  return dl;
}

// attempts lists the job's attempts that ended without success, oldest
// first, each with its error and the tail of its output.
function attempts(j) {
  if (!j.attempts?.length) return null;
  const rows = j.attempts.map((a) => h("tr", {},
    h("td", {}, String(a.attempt)), h("td", {}, a.agent || "–"),
    h("td", {}, a.startedAt ? time(a.startedAt) : "–"), h("td", {}, time(a.endedAt)),
    h("td", {}, a.exitCode === undefined ? "–" : String(a.exitCode)),
    h("td", { className: "err" }, a.error || "–"),
    h("td", {}, a.output ? h("details", {}, h("summary", {}, "output"), h("pre", { tabindex: "0" }, a.output)) : "–")));
  return h("section", { "aria-labelledby": "h-attempts" }, h("h3", { id: "h-attempts" }, "Attempts that did not succeed"),
    h("table", { id: "job-attempts" },
      h("thead", {}, h("tr", {}, ["attempt", "agent", "started", "ended", "exit", "error", "output tail"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows)));
}

function progress(j) {
  if (!j.progress) return null;
  const v = Math.max(0, Math.min(1, j.progress.value));
  return h("section", { "aria-labelledby": "h-progress" }, h("h3", { id: "h-progress" }, "Progress"),
    h("progress", { id: "job-progress", max: "1", value: String(v), "aria-label": "progress" }),
    h("span", { id: "job-progress-text" }, ` ${Math.round(v * 100)}% ${j.progress.message || ""}`));
}

// timeline lists the times the job carries, in order, with the time
// between each and the one before.
function timeline(j) {
  const tries = (j.attempts || []).flatMap((a) => [[`attempt ${a.attempt} started`, a.startedAt], [`attempt ${a.attempt} ended`, a.endedAt]]);
  const ev = [["created", j.createdAt], ["due (runAt)", j.runAt], ...tries, ["started", j.startedAt], ["finished", j.finishedAt], ["deadline", j.deadline]]
    .filter(([, t]) => t).map(([k, t]) => [k, t, Date.parse(t)]);
  ev.sort((a, b) => a[2] - b[2]);
  return h("ol", { id: "job-timeline" }, ev.map(([k, t, at], i) =>
    h("li", {}, h("strong", {}, k), ` ${time(t)}`, i ? ` (+${duration(at - ev[i - 1][2])})` : "")));
}

function block(name, title, v) {
  return h("section", { "aria-labelledby": `h-${name}` }, h("h3", { id: `h-${name}` }, title),
    v === undefined ? h("p", {}, "none") : h("pre", { id: `job-${name}`, tabindex: "0" }, json(v)));
}

function textBlock(name, title, s) {
  return h("section", { "aria-labelledby": `h-${name}` }, h("h3", { id: `h-${name}` }, title), h("pre", { id: `job-${name}`, tabindex: "0" }, s));
}
