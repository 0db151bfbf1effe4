// The job list: filters and text search kept in the address (shareable,
// the back button works), newest first by default, cursor paging that
// fills each page, a selection with actions on it, and actions on every
// job the filter selects with their progress.
import { FILTER_FIELDS, api, fetchPage, filterOf } from "./api.js";
import { actOnFilter, actOnIds } from "./bulk.js";
import { STATES, append, confirmAction, emptyRow, h, keyedRows, link, replace, setText, stateBadge, time } from "./dom.js";

// PAGE is the jobs shown at once: the list never loads more than a page.
export const PAGE = 50;
const ACTIONS = { retry: "Retry", cancel: "Cancel", run: "Run now", delete: "Delete" };
const COLS = ["select", "id", "queue", "state", "attempt", "tags", "created", "detail"];

// toLocalInput turns an RFC 3339 time into a datetime-local value.
function toLocalInput(iso) {
  const d = new Date(iso);
  if (!iso || isNaN(d)) return "";
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

// field is a labelled input of the filter form.
function field(name, label, input) {
  input.id = `f-${name}`;
  input.name = name;
  return h("span", { className: "field" }, h("label", { for: input.id }, label), input);
}

// filterForm builds the form from params; fixed conditions (a queue's
// page) are not offered.
function filterForm(params, fixed, onApply) {
  const val = (k) => params.get(k) || "";
  const stateSel = h("select", {}, h("option", { value: "" }, "any"), STATES.map((s) => h("option", { value: s }, s)));
  stateSel.value = val("state");
  const order = h("select", {}, h("option", { value: "desc" }, "newest first"), h("option", { value: "asc" }, "oldest first"));
  order.value = val("order") || "desc";
  const text = (k) => h("input", { type: "text", value: val(k), size: 14 });
  const when = (k) => h("input", { type: "datetime-local", value: toLocalInput(val(k)) });
  const form = h("form", { id: "filters", role: "search", "aria-label": "find jobs" },
    fixed.queue ? null : field("queue", "queue", h("input", { type: "text", value: val("queue"), size: 14, list: "queue-names" })),
    fixed.queue ? null : queueNames(),
    field("state", "state", stateSel),
    field("workflow", "workflow", text("workflow")),
    field("key", "key", text("key")),
    field("tag", "tag", text("tag")),
    field("q", "search (id or tag prefix)", h("input", { type: "search", value: val("q"), size: 18 })),
    field("from", "created from", when("from")),
    field("to", "created before", when("to")),
    field("order", "order", order),
    h("button", { type: "submit", id: "apply" }, "Apply"),
    h("button", { type: "button", id: "clear", onclick: () => onApply(new URLSearchParams()) }, "Clear"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const k of FILTER_FIELDS) {
      const input = form.elements[k];
      if (!input || !input.value.trim()) continue;
      const v = input.value.trim();
      p.set(k, input.type === "datetime-local" ? new Date(v).toISOString() : v);
    }
    if (order.value !== "desc") p.set("order", order.value);
    onApply(p);
  });
  return form;
}

// queueNames is a datalist of the queues, filled when /v1/queues answers
// (the queue field suggests them; any text may still be typed).
function queueNames() {
  const dl = h("datalist", { id: "queue-names" });
  api("GET", "/queues").then(({ queues }) => append(dl, queues.map((q) => h("option", { value: q.name })))).catch(() => {});
  return dl;
}

// describe names a filter for people: "queue=mail, state=failed".
const describe = (f) => Object.entries(f).map(([k, v]) => `${k}=${v}`).join(", ") || "no condition: every job";

// listView lists jobs; args.fixed holds conditions of the page it sits in.
export function listView(el, args, ctx) {
  const fixed = args.fixed || {};
  if (!fixed.queue) document.title = "usher — jobs";
  const params = args.params;
  const filter = filterOf({ ...Object.fromEntries(params), ...fixed });
  const order = params.get("order") === "asc" ? "asc" : "desc";
  const after = params.get("after") || "";
  const pageNo = Number(params.get("page") || 1);
  const go = (p) => ctx.navigate(location.pathname + (p.toString() ? "?" + p : ""));
  const selected = new Set();
  let next = "";
  let ids = [];

  const tbody = h("tbody");
  const all = h("input", { type: "checkbox", id: "select-page", "aria-label": "select every job on this page" });
  const table = h("table", { id: "jobs" }, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, all),
    COLS.slice(1).map((c) => h("th", { scope: "col" }, c)))), tbody);
  const info = h("span", { id: "page-info" });
  const nextBtn = h("button", { type: "button", id: "next-page", disabled: true }, "Next page");
  const firstLink = after ? link(location.pathname + "?" + withoutCursor(params), "First page", { id: "first-page" }) : null;
  const selInfo = h("span", { id: "selection" }, "none selected");
  const selButtons = Object.entries(ACTIONS).map(([a, label]) =>
    h("button", { type: "button", "data-action": a, disabled: true }, `${label} selected`));
  const bulkSel = h("select", { id: "bulk-action" }, Object.entries(ACTIONS).map(([a, label]) => h("option", { value: a }, label)));
  const bulkGo = h("button", { type: "button", id: "bulk-all" }, "Apply to every matching job");
  const result = h("p", { id: "action-result", role: "status" });
  const bulk = h("section", { id: "bulk", "aria-label": "action on every matching job", hidden: true });

  el.append(filterForm(params, fixed, (p) => go(p)),
    h("p", { id: "filter-desc" }, `Showing ${order === "desc" ? "newest" : "oldest"} first; ${describe(filter)}.`),
    h("div", { className: "toolbar", role: "toolbar", "aria-label": "selected jobs" }, selInfo, selButtons),
    h("div", { className: "toolbar" }, h("label", { for: "bulk-action" }, "Every job matching the filter:"), bulkSel, bulkGo),
    result, bulk, table,
    h("div", { className: "toolbar pager" }, info, firstLink, nextBtn));

  nextBtn.addEventListener("click", () => {
    const p = withoutCursor(params);
    p.set("after", next);
    p.set("page", String(pageNo + 1));
    go(p);
  });
  all.addEventListener("change", () => {
    for (const id of ids) all.checked ? selected.add(id) : selected.delete(id);
    showSelection();
  });
  tbody.addEventListener("change", (e) => {
    const id = e.target.closest("tr")?.dataset.key;
    if (!id || e.target.type !== "checkbox") return;
    e.target.checked ? selected.add(id) : selected.delete(id);
    showSelection();
  });
  for (const b of selButtons) b.addEventListener("click", () => onSelection(b.dataset.action));
  bulkGo.addEventListener("click", () => onFilter(bulkSel.value));

  function showSelection() {
    for (const tr of tbody.rows) { const c = tr.querySelector("input"); if (c) c.checked = selected.has(tr.dataset.key); }
    all.checked = ids.length > 0 && ids.every((id) => selected.has(id));
    setText(selInfo, selected.size ? `${selected.size} selected` : "none selected");
    for (const b of selButtons) b.disabled = selected.size === 0;
  }

  async function onSelection(action) {
    const list = [...selected];
    if (action === "delete" && !(await confirmAction(`Delete ${list.length} job(s)? This cannot be undone; waiting and queued ones are cancelled first.`, "Delete"))) return;
    try {
      const r = await actOnIds(action, list);
      setText(result, `${ACTIONS[action]}: ${r.changed} of ${r.matched} changed.${errorsText(r.errors)}`);
      selected.clear();
      await refresh();
    } catch (e) {
      setText(result, `${ACTIONS[action]} failed: ${e.message}`);
    }
  }

  async function onFilter(action) {
    if (!(await confirmAction(`${ACTIONS[action]} every job matching ${describe(filter)}? This goes through them in batches of 500.`, ACTIONS[action]))) return;
    let stop = false;
    const progress = h("p", { id: "bulk-progress", role: "status" });
    const stopBtn = h("button", { type: "button", id: "bulk-stop", onclick: () => { stop = true; stopBtn.disabled = true; } }, "Stop");
    const errs = h("ul", { id: "bulk-errors" });
    replace(bulk, h("h3", {}, `${ACTIONS[action]} every job matching ${describe(filter)}`), progress, stopBtn, errs);
    bulk.hidden = false;
    bulkGo.disabled = true;
    const show = (t, more) => {
      setText(progress, `${more ? "working" : "done"}: ${t.batches} batch(es), ${t.matched} matched, ${t.changed} changed, ${t.errors.length} error(s)`);
      for (const e of t.errors.slice(errs.children.length, 50)) errs.append(h("li", {}, `job ${e.id}: ${e.error}`));
    };
    setText(progress, "starting…");
    try {
      const t = await actOnFilter(action, filter, show, () => stop);
      if (t.stopped) setText(progress, `stopped after ${t.batches} batch(es): ${t.matched} matched, ${t.changed} changed, ${t.errors.length} error(s)`);
      else show(t, false);
    } catch (e) {
      setText(progress, `failed: ${e.message} (the batches before it were applied)`);
    }
    stopBtn.disabled = true;
    bulkGo.disabled = false;
    await refresh().catch(() => {});
  }

  async function refresh() {
    const page = await fetchPage(filter, { after, limit: PAGE, order });
    next = page.next;
    ids = page.jobs.map((j) => j.id);
    keyedRows(tbody, page.jobs, (j) => j.id, newRow, updateRow);
    emptyRow(tbody, COLS.length, "no jobs match");
    setText(info, `page ${pageNo}: ${page.jobs.length} job(s)${next ? "" : ", the last page"}`);
    nextBtn.disabled = !next;
    showSelection();
  }
  return { refresh };
}

function withoutCursor(params) {
  const p = new URLSearchParams(params);
  p.delete("after");
  p.delete("page");
  return p;
}

function errorsText(errors) {
  if (!errors?.length) return "";
  return ` Not changed: ${errors.slice(0, 5).map((e) => `job ${e.id}: ${e.error}`).join("; ")}${errors.length > 5 ? ` and ${errors.length - 5} more` : ""}.`;
}

function newRow(j) {
  return h("tr", {},
    h("td", {}, h("input", { type: "checkbox", "aria-label": `select job ${j.id}` })),
    h("td", {}, link(`/jobs/job/${encodeURIComponent(j.id)}`, j.id)),
    h("td", { className: "queue" }), h("td", { className: "st" }), h("td", { className: "attempt" }),
    h("td", { className: "tags" }), h("td", { className: "created" }), h("td", { className: "detail" }));
}

function updateRow(tr, j) {
  setText(tr.querySelector(".queue"), j.queue);
  const st = tr.querySelector(".st");
  if (st.textContent !== j.state) replace(st, stateBadge(j.state));
  setText(tr.querySelector(".attempt"), `${j.attempt} of ${j.maxAttempts}`);
  setText(tr.querySelector(".tags"), (j.tags || []).join(" "));
  setText(tr.querySelector(".created"), time(j.createdAt));
  setText(tr.querySelector(".detail"), detail(j));
}

// detail is the one line that says most about a job now.
function detail(j) {
  if (j.state === "running" && j.progress) return `${Math.round(j.progress.value * 100)}% ${j.progress.message || ""}`;
  if (j.error) return j.error.length > 120 ? j.error.slice(0, 120) + "…" : j.error;
  if (j.state === "scheduled" && j.runAt) return `runs at ${time(j.runAt)}`;
  return "";
}
