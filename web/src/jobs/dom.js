// DOM helpers of the job browser. Everything a job carries is untrusted:
// these helpers only ever set text (textContent) and attributes, never
// HTML, so a job's payload, output, tags or names show as typed.

// h builds an element: attrs are properties (on…, className, hidden, …) or,
// for names with a dash or in attrNames, attributes; children are nodes or
// strings (as text); null, undefined and false are skipped.
export function h(tag, attrs, ...children) {
  const el = tag.startsWith("svg:") ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = String(v);
    else if (k === "className" && !(el instanceof SVGElement)) el.className = v;
    else if (k === "hidden" || k === "checked" || k === "disabled" || k === "value") el[k] = v;
    else el.setAttribute(k === "className" ? "class" : k, v === true ? "" : String(v));
  }
  append(el, ...children);
  return el;
}

// append adds children to el as h does (strings as text; null,
// undefined and false skipped).
export function append(el, ...children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// setText sets el's text when it differs (a live refresh then touches
// only what changed).
export function setText(el, s) {
  s = String(s ?? "");
  if (el.textContent !== s) el.textContent = s;
}

// replace empties el and appends children.
export function replace(el, ...children) {
  el.textContent = "";
  append(el, ...children);
}

// time formats an RFC 3339 time for people: local date and time, to the second.
export function time(t) {
  if (!t) return "–";
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toLocaleString(undefined, { hour12: false });
}

// duration formats milliseconds as "850 ms", "12.3 s", "4 min 5 s", "2 h 3 min".
export function duration(ms) {
  if (ms === null || ms === undefined || isNaN(ms)) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3600000) return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
  return `${Math.floor(ms / 3600000)} h ${Math.round((ms % 3600000) / 60000)} min`;
}

// json shows a JSON value indented, as text.
export function json(v) {
  return v === undefined ? "" : JSON.stringify(v, null, 2);
}

// link is an in-page link: a click is routed without a reload (main.js
// catches clicks on a[data-route]).
export function link(href, text, attrs = {}) {
  return h("a", { href, "data-route": "", ...attrs }, text);
}

// jobsHref is the job list's address for a filter.
export function jobsHref(filter) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(filter)) if (v) p.set(k, v);
  const s = p.toString();
  return "/jobs/list" + (s ? "?" + s : "");
}

// STATES are the job states, in the order a job goes through them.
export const STATES = ["waiting", "scheduled", "delayed", "queued", "running", "succeeded", "failed", "cancelled"];

// stateBadge shows a state as a coloured label.
export function stateBadge(state) {
  return h("span", { className: `state state-${STATES.includes(state) ? state : "unknown"}` }, state);
}

// confirmAction asks in the page's dialog; resolves true on OK.
export function confirmAction(text, ok) {
  const dlg = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = ok;
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
    dlg.returnValue = "";
    dlg.showModal();
  });
}

// keyedRows makes tbody show one row per item, in order, reusing the row
// of an item seen before (found by key(item)): create(item) builds a new
// row, update(tr, item) brings a row up to date. Rows of items gone are
// removed. A live refresh of a full page thus rewrites only changed text.
export function keyedRows(tbody, items, key, create, update) {
  const old = new Map();
  for (const tr of tbody.rows) if (tr.dataset.key !== undefined) old.set(tr.dataset.key, tr);
  let at = tbody.firstElementChild;
  for (const it of items) {
    const k = String(key(it));
    let tr = old.get(k);
    if (tr) old.delete(k);
    else { tr = create(it); tr.dataset.key = k; }
    update(tr, it);
    if (tr !== at) tbody.insertBefore(tr, at);
    else at = at.nextElementSibling;
  }
  for (const tr of old.values()) tr.remove();
  for (const tr of [...tbody.rows]) if (tr.dataset.key === undefined) tr.remove();
}

// emptyRow shows text in tbody when it has no rows.
export function emptyRow(tbody, cols, text) {
  if (tbody.rows.length) return;
  const td = tbody.insertRow().insertCell();
  td.colSpan = cols;
  td.className = "empty";
  td.textContent = text;
}
