// The editor page: CodeMirror 6, projects in localStorage, compile over /asy.
import { EditorView, basicSetup } from "codemirror";
import { keymap } from "@codemirror/view";
import { EditorState, Compartment } from "@codemirror/state";
import { setDiagnostics, lintGutter } from "@codemirror/lint";
import { oneDarkish, lightish } from "./theme.js";
import { asymptote } from "./asy.js";
import { compile } from "./protocol.js";

const $ = (id) => document.getElementById(id);
const DEFAULT = { files: [{ filename: "main.asy", main: true, content: "size(4cm);\ndraw(unitcircle, blue);\nlabel(\"$O$\", (0,0));\n" }], current: "main.asy" };

const sharedId = (location.pathname.match(/^\/s\/([^/]+)$/) || [])[1];
let project = sharedId ? null : JSON.parse(localStorage.getItem("usher.project") || "null") || structuredClone(DEFAULT);
let readOnly = !!sharedId;
const themeC = new Compartment(), roC = new Compartment();
let task = null, liveTimer = null, resultURL = null, lastResult = null;

function save() { if (!readOnly) localStorage.setItem("usher.project", JSON.stringify(project)); }
function currentFile() { return project.files.find((f) => f.filename === project.current) || project.files[0]; }

const view = new EditorView({
  parent: $("editor"),
  state: EditorState.create({ doc: "", extensions: [] }),
});
function editorState(doc) {
  return EditorState.create({
    doc,
    extensions: [
      keymap.of([{ key: "Mod-Enter", run: () => { run(false); return true; } }]),
      basicSetup, asymptote, lintGutter(), themeC.of(themeExt()), roC.of(EditorState.readOnly.of(readOnly)),
      EditorView.contentAttributes.of({ "aria-label": "Asymptote source" }),
      EditorView.updateListener.of((u) => {
        if (!u.docChanged || readOnly) return;
        currentFile().content = u.state.doc.toString();
        save();
        if ($("live").checked) { clearTimeout(liveTimer); liveTimer = setTimeout(() => run(true), 600); }
      }),
    ],
  });
}
function openFile(name) {
  project.current = name; save();
  view.setState(editorState(currentFile().content));
  renderFiles(); markErrors();
}

function renderFiles() {
  const ul = $("files"); ul.textContent = "";
  for (const f of project.files) {
    const li = document.createElement("li");
    const b = document.createElement("button");
    b.textContent = f.filename + (f.main ? " ★" : "");
    b.setAttribute("aria-label", "open " + f.filename + (f.main ? " (main)" : ""));
    if (f.filename === project.current) b.setAttribute("aria-current", "true");
    b.onclick = () => openFile(f.filename);
    li.append(b); ul.append(li);
  }
  for (const id of ["add-file", "rename-file", "delete-file", "main-file"]) $(id).disabled = readOnly;
  $("banner").hidden = !readOnly;
}

function fileOp(kind) {
  const f = currentFile();
  if (kind === "add") {
    const name = prompt("New file name", "file" + project.files.length + ".asy");
    if (!name || project.files.some((x) => x.filename === name)) return;
    project.files.push({ filename: name, main: false, content: "" }); openFile(name);
  } else if (kind === "rename") {
    const name = prompt("Rename " + f.filename + " to", f.filename);
    if (!name || project.files.some((x) => x.filename === name)) return;
    f.filename = name; openFile(name);
  } else if (kind === "delete") {
    if (project.files.length < 2 || !confirm("Delete " + f.filename + "?")) return;
    project.files = project.files.filter((x) => x !== f);
    if (f.main) project.files[0].main = true;
    openFile(project.files[0].filename);
  } else if (kind === "main") {
    for (const x of project.files) x.main = x === f;
    save(); renderFiles();
  }
}

// Diagnostics from asy's "file: line.col: message" lines.
let diagnostics = [];
const DIAG = /^([^\s:]+\.asy): (\d+)\.(\d+): (.*)$/;
function markErrors() {
  const doc = view.state.doc;
  const ds = diagnostics.filter((d) => d.file === project.current && d.line <= doc.lines).map((d) => {
    const line = doc.line(d.line);
    const from = Math.min(line.from + Math.max(d.col - 1, 0), line.to);
    return { from, to: Math.min(Math.max(from + 1, line.to), doc.length), severity: "error", message: d.message };
  });
  view.dispatch(setDiagnostics(view.state, ds));
}
function consoleAppend(text) {
  const out = $("console");
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const m = DIAG.exec(line);
    const el = document.createElement(m ? "button" : "div");
    el.textContent = line;
    if (m) {
      const d = { file: m[1], line: +m[2], col: +m[3], message: m[4] };
      diagnostics.push(d);
      el.className = "diag";
      el.onclick = () => jumpTo(d);
    }
    out.append(el);
  }
  markErrors();
}
function jumpTo(d) {
  if (project.files.some((f) => f.filename === d.file) && d.file !== project.current) openFile(d.file);
  const line = view.state.doc.line(Math.min(d.line, view.state.doc.lines));
  const pos = Math.min(line.from + Math.max(d.col - 1, 0), line.to);
  view.dispatch({ selection: { anchor: pos }, scrollIntoView: true });
  view.focus();
}

function setStatus(text) { $("status").textContent = text; }
function run(live) {
  if (task) task.cancel();
  if (live === false) clearTimeout(liveTimer);
  const format = live ? "svg" : $("format").value;
  const timeout = live ? 3000 : +$("timeout").value;
  diagnostics = []; $("console").textContent = ""; markErrors();
  const started = performance.now();
  let timer = null;
  setStatus("connecting…"); $("stop").disabled = false;
  const done = (msg) => { clearInterval(timer); task = null; $("stop").disabled = true; setStatus(msg); };
  const me = compile(project.files.map(({ filename, main, content }) => ({ filename, main, content })), { timeout, format }, {
    queue(m) {
      if (m.passed) {
        const t0 = performance.now();
        clearInterval(timer);
        timer = setInterval(() => setStatus(`running ${((performance.now() - t0) / 1000).toFixed(1)} s`), 100);
        setStatus("running 0.0 s");
      } else {
        const pos = m.position !== undefined ? ` position ${m.position},` : "";
        setStatus(`queued:${pos} ETA ${m.estimate !== undefined ? (m.estimate / 1000).toFixed(1) + " s" : "unknown"}`);
      }
    },
    output(text) { consoleAppend(text); },
    result(bytes, fmt) { showResult(bytes, fmt); },
    complete(m) { if (task === me) done(m.success ? `done in ${m.time ?? "?"} ms` : `failed: ${m.error || "error"}`); },
    denied(m) { if (task === me) done("denied: " + m.error); },
    closed() { if (task === me) done("connection closed"); },
  });
  task = me;
}

const MIME = { svg: "image/svg+xml", png: "image/png", pdf: "application/pdf", eps: "application/postscript" };
function showResult(bytes, fmt) {
  if (resultURL) URL.revokeObjectURL(resultURL);
  lastResult = { bytes, fmt };
  resultURL = URL.createObjectURL(new Blob([bytes], { type: MIME[fmt] || "application/octet-stream" }));
  const box = $("result"); box.textContent = "";
  let el;
  // An SVG in an <img> cannot run scripts: a hostile figure cannot touch the page.
  if (fmt === "svg" || fmt === "png") { el = document.createElement("img"); el.alt = "compiled figure"; }
  else { el = document.createElement("iframe"); el.title = "compiled figure"; el.setAttribute("sandbox", ""); }
  el.src = resultURL; el.dataset.format = fmt;
  box.append(el);
  $("download").disabled = false;
}
function download() {
  if (!lastResult) return;
  const a = document.createElement("a");
  a.href = resultURL; a.download = (project.files.find((f) => f.main)?.filename || "figure").replace(/\.asy$/, "") + "." + lastResult.fmt;
  a.click();
}

async function share() {
  const r = await fetch("/api/shares", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ files: project.files.map(({ filename, main, content }) => ({ filename, main, content })) }) });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) { $("share-url").value = "share failed: " + (body.error || r.status); return; }
  const url = new URL(body.url, location.href).href;
  $("share-url").value = url; $("share-url").hidden = false;
  navigator.clipboard?.writeText(url).catch(() => {});
}
function makeCopy() {
  readOnly = false; save();
  history.replaceState(null, "", "/");
  openFile(project.current);
}

// Themes: the system's by default, a toggle that overrides it.
const mq = matchMedia("(prefers-color-scheme: dark)");
function isDark() { const t = localStorage.getItem("usher.theme"); return t ? t === "dark" : mq.matches; }
function themeExt() { return isDark() ? oneDarkish : lightish; }
function applyTheme() {
  document.documentElement.dataset.theme = isDark() ? "dark" : "light";
  view.dispatch({ effects: themeC.reconfigure(themeExt()) });
}
mq.addEventListener("change", applyTheme);

async function init() {
  if (sharedId) {
    const r = await fetch("/api/shares/" + encodeURIComponent(sharedId));
    if (r.ok) { const s = await r.json(); project = { files: s.files, current: (s.files.find((f) => f.main) || s.files[0]).filename }; }
    else { project = structuredClone(DEFAULT); readOnly = false; setStatus("shared project not found"); }
  }
  openFile(currentFile().filename);
  applyTheme();
  $("compile").onclick = () => run(false);
  $("stop").onclick = () => { if (task) { task.cancel(); task = null; $("stop").disabled = true; setStatus("stopped"); } };
  $("add-file").onclick = () => fileOp("add");
  $("rename-file").onclick = () => fileOp("rename");
  $("delete-file").onclick = () => fileOp("delete");
  $("main-file").onclick = () => fileOp("main");
  $("download").onclick = download;
  $("share").onclick = share;
  $("copy").onclick = makeCopy;
  $("theme").onclick = () => { localStorage.setItem("usher.theme", isDark() ? "light" : "dark"); applyTheme(); };
  fetch("/api/info").then((r) => r.json()).then((info) => {
    $("version").textContent = "asy " + (info.asyVersion || "?");
    if (info.formats?.length) { const f = $("format"); f.textContent = ""; for (const x of info.formats) f.append(new Option(x, x)); }
  }).catch(() => { $("version").textContent = "asy version unknown"; });
}
init();
