// The job browser at /jobs: a token login, a client-side router over
// /jobs/… addresses (shareable; the back button works), and a live loop
// that refreshes the current view about once a second while the tab is
// visible.
import { initTheme } from "../dashtheme.js";
import { api, clearToken, setToken, token } from "./api.js";
import { queuesView, queueView } from "./queues.js";
import { listView } from "./list.js";
import { jobView } from "./job.js";
import { workflowView } from "./workflow.js";
import { keysView } from "./keys.js";
import { setText } from "./dom.js";
import "./jobs.css";

const $ = (id) => document.getElementById(id);
const PERIOD_MS = 1000;
let ctx = null; // {who, admin, navigate}
let view = null; // the current view: {refresh, dispose?}
let timer = 0;

initTheme();

// routes maps the path below /jobs to a view.
function viewFor(path) {
  const parts = path.replace(/^\/jobs\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  switch (parts[0]) {
    case undefined: return [queuesView, {}];
    case "queues": return parts[1] ? [queueView, { name: parts[1] }] : [queuesView, {}];
    case "list": return [listView, {}];
    case "job": return [jobView, { id: parts[1] || "" }];
    case "workflows": return [workflowView, { id: parts[1] || "" }];
    case "keys": return [keysView, {}];
    default: return [null, {}];
  }
}

// navigate shows href (a /jobs address) and adds it to the history.
function navigate(href, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", href);
  else history.pushState(null, "", href);
  route();
}

function route() {
  if (!ctx) return;
  view?.dispose?.();
  const [make, args] = viewFor(location.pathname);
  const el = $("view");
  el.textContent = "";
  for (const a of document.querySelectorAll("#jobs-nav a")) {
    const on = make && a.dataset.nav === (make === listView ? "list" : make === keysView ? "keys" : make === queuesView || make === queueView ? "queues" : "");
    if (on) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (!make) {
    el.append(Object.assign(document.createElement("p"), { textContent: `No page at ${location.pathname}.` }));
    view = null;
    return;
  }
  view = make(el, { ...args, params: new URLSearchParams(location.search) }, ctx);
  schedule(0);
}

// schedule runs the next refresh after ms (the loop never overlaps itself:
// the next one is timed from the end of the last).
function schedule(ms) {
  clearTimeout(timer);
  timer = setTimeout(tick, ms);
}

async function tick() {
  const v = view;
  if (!v) return;
  if (document.visibilityState !== "visible") {
    setText($("live"), "paused while the tab is hidden");
    return; // visibilitychange restarts the loop
  }
  try {
    await v.refresh();
    if (v === view) setText($("live"), `live, updated ${new Date().toLocaleTimeString(undefined, { hour12: false })}`);
  } catch (e) {
    if (v !== view) return;
    if (e.status === 401) return logout(`The server no longer takes this token: ${e.message}`);
    setText($("live"), `update failed: ${e.message}`);
  }
  if (v === view) schedule(PERIOD_MS);
}

document.addEventListener("visibilitychange", () => { if (document.visibilityState === "visible") schedule(0); });
addEventListener("popstate", route);
// In-page links (a[data-route], including the SVG links of a workflow)
// route without a reload; a modified click opens a new tab as usual.
document.addEventListener("click", (e) => {
  const a = e.target.closest?.("a[data-route], #jobs-nav a");
  if (!a || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(a.getAttribute("href"));
});

// logIn checks t with GET /v1/whoami: an agent's token is refused (it may
// not read or act on jobs as a person does).
async function logIn(t) {
  let who;
  try {
    who = await api("GET", "/whoami", undefined, t);
  } catch (e) {
    throw new Error(e.status === 401 ? "The server does not know this token." : `Cannot log in: ${e.message}`);
  }
  if (who.role !== "admin" && who.role !== "client") {
    throw new Error(`This is an ${who.role} token ("${who.name}"): the job browser needs an admin or client token.`);
  }
  setToken(t);
  ctx = { who, admin: who.role === "admin", navigate };
  setText($("who"), `${who.name} (${who.role})`);
  $("who").title = who.role === "admin" ? "admin: every action" : "client: acts on jobs; queues are an admin's to pause";
  $("login-form").hidden = true;
  $("logout").hidden = false;
  $("jobs-nav").hidden = false;
  route();
}

function logout(message = "") {
  clearToken();
  clearTimeout(timer);
  view?.dispose?.();
  view = null;
  ctx = null;
  $("view").textContent = "";
  setText($("who"), "");
  setText($("live"), "");
  $("logout").hidden = true;
  $("jobs-nav").hidden = true;
  $("login-form").hidden = false;
  setText($("login-error"), message);
  $("token").value = "";
  $("token").focus();
}

$("login-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  setText($("login-error"), "");
  const t = $("token").value.trim();
  try {
    await logIn(t);
  } catch (err) {
    setText($("login-error"), err.message);
  }
});
$("logout").addEventListener("click", () => logout());

if (token()) logIn(token()).catch((e) => logout(e.message));
else logout();
