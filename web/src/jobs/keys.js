// Keys and limits: each key of /v1/stats (running against its limit,
// queued, rate tokens) with a link to the queued jobs it holds back, the
// groups, and the limits set (/v1/limits).
import { api } from "./api.js";
import { emptyRow, h, jobsHref, keyedRows, link, setText, time } from "./dom.js";
import { loadStats } from "./stats.js";

function table(id, cols) {
  const tbody = h("tbody");
  return [h("table", { id }, h("thead", {}, h("tr", {}, cols.map((c) => h("th", { scope: "col" }, c)))), tbody), tbody];
}

// keysView shows keys, groups and limits.
export function keysView(el) {
  document.title = "usher — keys and limits";
  const kc = ["key", "running / limit", "queued", "rate tokens", "held back"];
  const [keys, kb] = table("keys", kc);
  const gc = ["group", "running / limit", "queued"];
  const [groups, gb] = table("groups", gc);
  const lc = ["pattern", "limit", "rate", "burst"];
  const [limits, lb] = table("limits", lc);
  el.append(h("h2", {}, "Keys"), h("p", {}, "Keys that hold running or queued jobs now."), keys,
    h("h2", {}, "Groups"), groups, h("h2", {}, "Limits set"), limits);
  const cell = (cls) => h("td", { className: cls });
  async function refresh() {
    const [stats, lim] = await Promise.all([loadStats(), api("GET", "/limits")]);
    keyedRows(kb, stats.keys || [], (k) => k.key, (k) => h("tr", {}, h("td", {}, k.key), cell("run"), cell("queued"), cell("tokens"),
      h("td", {}, link(jobsHref({ key: k.key, state: "queued" }), "queued jobs", { "aria-label": `queued jobs holding ${k.key}` }))),
    (tr, k) => {
      setText(tr.querySelector(".run"), `${k.running} / ${k.limit || "no limit"}`);
      setText(tr.querySelector(".queued"), k.queued);
      setText(tr.querySelector(".tokens"), k.tokens === undefined ? "no rate" : `${Math.floor(k.tokens)}${k.nextToken ? `, next at ${time(k.nextToken)}` : ""}`);
    });
    emptyRow(kb, kc.length, "no key holds a job now");
    keyedRows(gb, stats.groups || [], (g) => g.key, (g) => h("tr", {}, h("td", {}, g.key), cell("run"), cell("queued")), (tr, g) => {
      setText(tr.querySelector(".run"), `${g.running} / ${g.limit}`);
      setText(tr.querySelector(".queued"), g.queued);
    });
    emptyRow(gb, gc.length, "no group holds a job now");
    keyedRows(lb, lim.limits || [], (l) => l.pattern, (l) => h("tr", {}, h("td", {}, l.pattern), cell("limit"), cell("rate"), cell("burst")), (tr, l) => {
      setText(tr.querySelector(".limit"), l.limit || "–");
      setText(tr.querySelector(".rate"), l.rate || "–");
      setText(tr.querySelector(".burst"), l.burst || "–");
    });
    emptyRow(lb, lc.length, "no limits set");
  }
  return { refresh };
}
