// The editor page: CodeMirror 6, projects in IndexedDB (projects.js), compile over /asy.
import { EditorView, basicSetup } from "codemirror";
import { keymap } from "@codemirror/view";
import { EditorState, Compartment } from "@codemirror/state";
import { setDiagnostics, lintGutter } from "@codemirror/lint";
import { oneDarkish, lightish } from "./theme.js";
import { asymptote } from "./asy.js";
import { compile } from "./protocol.js";
import { is3D, frameOf } from "./view3d.js";
import { mountShell } from "./shell.js";
import { asyHelp, loadSymbols } from "./complete.js";
import { openGallery } from "./gallery.js";
import { isDark, markDocument, onThemeChange, toggleTheme } from "./themepref.js";
import { setupLayout } from "./layout.js";
import { setupHelp } from "./help.js";
import { createStore } from "./projects.js";
import { mountProjects } from "./projectsui.js";
import { mountDataFiles } from "./datafiles.js";
import { limits, setLimits, toWire, fromWire, isBinary, isBinaryName, nameError, checkProject, totalSize, bytesText } from "./files.js";

const $ = (id) => document.getElementById(id);
const sharedId = (location.pathname.match(/^\/s\/([^/]+)$/) || [])[1];
// project is the open project (the store's): {files, current, name, …}.
let project = { files: [], current: null }, readOnly = !!sharedId;
const store = createStore({
  open(p, ro) { project = p; readOnly = ro; openFile(p.current); },
  list: () => projectsUI.render(),
  notice: (text, undo) => projectsUI.notice(text, undo),
});
const projectsUI = mountProjects($("projects-pane"), store);
const themeC = new Compartment(), roC = new Compartment();
let task = null, liveTimer = null, elapsedTimer = null;
// resultURL is what the output pane shows (shownHTML its text when html);
// fileResult {url, name} is what download saves.
let resultURL = null, shownHTML = null, fileResult = null;

function save() { if (!readOnly) store.changed(); }
function currentFile() { return project.files.find((f) => f.filename === project.current) || project.files[0]; }
// projectFiles is what a compile sends: the files without editor state.
function projectFiles() { return project.files.map(({ filename, main, content }) => ({ filename, main, content })); }

mountShell($("shell"), () => (project ? project.files.map(({ filename, content, encoding }) => ({ filename, content, encoding })) : []));

const view = new EditorView({
  parent: $("editor"),
  state: EditorState.create({ doc: "", extensions: [themeC.of(themeExt())] }),
});
// Until the store opens a project (init, asynchronous) there is nothing to
// edit: the editor is hidden and the file buttons are off.
$("editor").hidden = true;
for (const id of ["add-file", "rename-file", "delete-file", "main-file"]) $(id).disabled = true;
const dataFiles = mountDataFiles({ after: $("main-file"), drop: $("files").parentElement, editor: $("editor") }, {
  get project() { return project; }, get readOnly() { return readOnly; },
  openFile, changed: save, flush: () => store.flush(), notice: (t) => { setStatus(t); projectsUI.notice(t); },
});
function editorState(doc) {
  return EditorState.create({
    doc,
    extensions: [
      keymap.of([{ key: "Mod-Enter", run: () => { run(false); return true; } }]),
      basicSetup, asymptote, asyHelp(() => project.files), lintGutter(), themeC.of(themeExt()), roC.of(EditorState.readOnly.of(readOnly)),
      // tabindex: the text is in the tab order anyway (contenteditable); said
      // outright, checkers see that the scrolling editor is reachable.
      EditorView.contentAttributes.of({ "aria-label": "Asymptote source", tabindex: "0" }),
      EditorView.updateListener.of((u) => {
        if (!u.docChanged || readOnly || isBinary(currentFile())) return;
        currentFile().content = u.state.doc.toString();
        save();
        if ($("live").checked) { clearTimeout(liveTimer); liveTimer = setTimeout(() => { if ($("live").checked) run(true); }, 600); }
      }),
    ],
  });
}
function openFile(name) {
  if (project.current !== name) { project.current = name; save(); }
  const f = currentFile();
  dataFiles.show(f);
  view.setState(editorState(f && !isBinary(f) ? f.content : ""));
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
  $("delete-file").disabled = readOnly || project.files.length < 2;
  $("banner").hidden = !readOnly;
  $("main-file").disabled = readOnly || !currentFile()?.filename.endsWith(".asy");
}

// askName prompts for a file name; null when cancelled, empty or taken.
function askName(question, suggestion) {
  const name = prompt(question, suggestion)?.trim();
  if (!name) return null;
  if (project.files.some((x) => x.filename === name)) { setStatus(`a file named ${name} exists already`); return null; }
  const err = nameError(name) || (isBinaryName(name) ? `${name} is a binary file: upload it` : null);
  if (err) { setStatus(err); return null; }
  return name;
}
function fileOp(kind) {
  const f = currentFile();
  if (kind === "add") {
    let n = project.files.length;
    while (project.files.some((x) => x.filename === `file${n}.asy`)) n++;
    const name = askName("New file name", `file${n}.asy`);
    if (!name) return;
    project.files.push({ filename: name, main: false, content: "" }); openFile(name);
  } else if (kind === "rename") {
    const name = askName("Rename " + f.filename + " to", f.filename);
    if (!name) return;
    if (isBinary(f) !== isBinaryName(name)) { setStatus(`${f.filename} cannot become ${name}: a binary file keeps a binary extension, a text file a text one`); return; }
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
// Output arrives in chunks that may end mid-line: each stream keeps its
// unfinished line until the rest comes (or the task ends).
let partial = {};
function consoleChunk(text, stream) {
  const lines = ((partial[stream] || "") + text).split("\n");
  partial[stream] = lines.pop();
  consoleAppend(lines.join("\n"));
}
function consoleFlush() {
  for (const rest of Object.values(partial)) consoleAppend(rest);
  partial = {};
}
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
    // Only lines about the project's own files link to them.
    let m = DIAG.exec(line);
    if (m && !project.files.some((f) => f.filename === m[1])) m = null;
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

// The status is a live region: it changes when the task's state does. The
// running time ticks beside it, hidden from screen readers, which would
// otherwise announce it ten times a second.
function setStatus(text) { $("status").textContent = text; $("elapsed").textContent = ""; }
function startElapsed() {
  const t0 = performance.now();
  clearInterval(elapsedTimer);
  elapsedTimer = setInterval(() => { $("elapsed").textContent = ((performance.now() - t0) / 1000).toFixed(1) + " s"; }, 100);
}
// settle ends the current task's display: no timer, Stop off, a final status.
function settle(text) {
  clearInterval(elapsedTimer); elapsedTimer = null;
  task = null; $("stop").disabled = true;
  consoleFlush(); setStatus(text);
}
function stop() {
  if (!task) return;
  task.cancel();
  settle("stopped");
}
function queuedText(m) {
  const pos = m.position !== undefined ? ` #${m.position + 1} in line,` : "";
  return `queued:${pos} ETA ${m.estimate !== undefined ? (m.estimate / 1000).toFixed(1) + " s" : "unknown"}`;
}
// run compiles the project. A 3D project (view3d.js) is shown as asy's
// WebGL page (format html, interactive); the format chosen is compiled
// alongside for download, as a separate task (its output is kept apart:
// it repeats the view's). A live preview compiles only what is shown
// (svg, or html for 3D). The status reaches done or failed when every
// task of the run has ended.
function run(live) {
  // A compile asked for before the store has opened a project (init is
  // asynchronous) runs once it has.
  if (!project.current) { started.then(() => { if (project.current) run(live); }); return; }
  if (task) task.cancel();
  clearInterval(elapsedTimer);
  document.dispatchEvent(new CustomEvent("usher:run", { detail: { live } }));
  if (live === false) clearTimeout(liveTimer);
  const chosen = live ? "svg" : $("format").value;
  const timeout = live ? limits.timeouts[0] : ($("timeout").value ? +$("timeout").value : undefined);
  try { checkProject(project.files); } catch (e) { setStatus(e.message); return; }
  const viewFmt = is3D(project.files) ? "html" : chosen;
  const fileFmt = live ? viewFmt : chosen;
  diagnostics = []; partial = {}; $("console").textContent = ""; markErrors();
  setStatus("connecting…"); $("stop").disabled = false;
  clearFile();
  const me = { parts: [], ends: {}, fileFmt, fileOutput: "", cancel() { for (const p of this.parts) p.cancel(); } };
  const mine = (f) => (...a) => { if (task === me) f(...a); };
  const files = projectFiles(), opts = (format) => ({ timeout, format });
  me.parts.push(compile(files, opts(viewFmt), {
    queue: mine((m) => {
      if (!m.passed) { setStatus(queuedText(m)); return; }
      setStatus("running"); startElapsed();
    }),
    output: mine(consoleChunk),
    result: mine((bytes, fmt) => { showResult(bytes, fmt); if (fileFmt === viewFmt) keepFile(bytes, fmt); }),
    ...ending(me, "view", mine, (m) => m.success ? `done in ${m.time ?? "?"} ms` : `failed: ${m.error || "error"}`),
  }));
  if (fileFmt !== viewFmt) {
    me.parts.push(compile(files, opts(fileFmt), {
      output: mine((text) => { me.fileOutput += text; }),
      result: mine(keepFile),
      ...ending(me, "file", mine, (m) => m.success ? "" : m.error || "error"),
    }));
  }
  task = me;
}
// ending is the handlers that end one task of a run: complete (its text
// from done(m)), denied, closed. The run settles once each of its tasks
// has ended.
function ending(me, part, mine, done) {
  const end = (text) => {
    me.ends[part] = text;
    if (Object.keys(me.ends).length === me.parts.length) finish(me);
    else if (part === "view" && /^done/.test(text)) setStatus(`rendering ${me.fileFmt} for download…`);
  };
  return {
    complete: mine((m) => end(done(m))),
    denied: mine((m) => end("denied: " + m.error)),
    closed: mine(() => end("connection closed")),
  };
}
// finish settles a run. A failure of the download's task is news only
// when the view succeeded (else it is the same error twice): then its
// output goes to the console and the status says which format failed.
function finish(me) {
  const { view, file } = me.ends;
  if (!file || !/^done/.test(view)) { settle(view); return; }
  consoleAppend(`--- ${me.fileFmt} for download:\n` + me.fileOutput);
  settle(`failed: ${me.fileFmt}: ${file} (view ${view})`);
}

// The format menu's names where the format alone says too little.
const FORMAT_LABELS = { html: "html (interactive 3D)", v3d: "v3d (asy's 3D scene)" };
const MIME = { svg: "image/svg+xml", png: "image/png", pdf: "application/pdf", eps: "application/postscript", html: "text/html", v3d: "application/octet-stream" };
function resultName(fmt) { return (project.files.find((f) => f.main)?.filename || "figure").replace(/\.asy$/, "") + "." + fmt; }
function blobURL(bytes, fmt) { return URL.createObjectURL(new Blob([bytes], { type: MIME[fmt] || "application/octet-stream" })); }
// showResult shows a result in the output pane: svg and png in an <img>,
// pdf in the browser's viewer, html (asy's WebGL page) in a sandboxed
// frame, eps and v3d as a link.
function showResult(bytes, fmt) {
  if (resultURL) URL.revokeObjectURL(resultURL);
  resultURL = blobURL(bytes, fmt);
  shownHTML = fmt === "html" ? new TextDecoder().decode(bytes) : null;
  const box = $("result"); box.textContent = "";
  if (fmt === "svg" || fmt === "png") box.append(imageOf(fmt));
  else if (fmt === "pdf") box.append(objectOf(fmt, MIME.pdf));
  else if (fmt === "html") box.append(frameOf(shownHTML, FRAME_TITLE));
  else box.append(linkOf(fmt));
  $("reset-view").hidden = fmt !== "html";
}
const FRAME_TITLE = "3D figure: drag to rotate, wheel or shift-drag to zoom, reset view (or the h key) to go back";
// resetView reloads the 3D frame: the figure returns to its first view.
function resetView() {
  const old = $("result").querySelector("iframe");
  if (old && shownHTML !== null) old.replaceWith(frameOf(shownHTML, FRAME_TITLE));
}
// clearFile forgets the last download until the next result arrives.
function clearFile() {
  if (fileResult) URL.revokeObjectURL(fileResult.url);
  fileResult = null;
  const b = $("download");
  b.disabled = true;
  b.setAttribute("aria-label", "download the result");
}
function keepFile(bytes, fmt) {
  if (fileResult) URL.revokeObjectURL(fileResult.url);
  fileResult = { url: blobURL(bytes, fmt), name: resultName(fmt) };
  $("download").disabled = false;
  $("download").setAttribute("aria-label", "download " + fileResult.name);
}
// An SVG in an <img> cannot run scripts: a hostile figure cannot touch the page.
function imageOf(fmt) {
  const img = document.createElement("img");
  img.alt = "compiled figure (" + fmt + ")"; img.src = resultURL; img.dataset.format = fmt;
  return img;
}
// A PDF goes to the browser's viewer (Chromium refuses to show a PDF in a
// sandboxed frame), with a link to open the file where there is none.
function objectOf(fmt, type) {
  const obj = document.createElement("object");
  obj.type = type; obj.data = resultURL; obj.dataset.format = fmt;
  obj.setAttribute("aria-label", "compiled figure (" + fmt + ")");
  const a = document.createElement("a");
  a.href = resultURL; a.target = "_blank"; a.rel = "noopener"; a.textContent = "open " + resultName(fmt);
  obj.append(a);
  return obj;
}
// linkOf is a link that saves a result the browser cannot show (eps, v3d).
function linkOf(fmt) {
  const a = document.createElement("a");
  a.href = resultURL; a.download = resultName(fmt); a.textContent = "save " + resultName(fmt);
  a.dataset.format = fmt;
  return a;
}
function download() {
  if (!fileResult) return;
  const a = document.createElement("a");
  a.href = fileResult.url; a.download = fileResult.name;
  a.click();
}

async function share() {
  const out = $("share-url");
  out.hidden = false;
  const size = totalSize(project.files);
  if (size > limits.maxShare) { out.value = `share refused: the project has ${bytesText(size)}, more than the server's limit of ${bytesText(limits.maxShare)} for a share (maxShare)`; return; }
  if (project.files.length > limits.maxFiles) { out.value = `share refused: ${project.files.length} files, more than the server's limit of ${limits.maxFiles} (maxFiles)`; return; }
  try {
    const r = await fetch("/api/shares", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ files: toWire(project.files) }) });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) { out.value = "share failed: " + (body.error || r.status); return; }
    out.value = new URL(body.url, location.href).href;
    navigator.clipboard?.writeText(out.value).catch(() => {});
  } catch {
    out.value = "share failed: the server cannot be reached";
  }
}
function makeCopy() {
  store.copyShared().catch((e) => setStatus("the copy could not be made: " + e.message));
}

// Themes: the system's by default, a toggle that overrides it (themepref.js).
function themeExt() { return isDark() ? oneDarkish : lightish; }
function applyTheme() {
  markDocument();
  $("theme").setAttribute("aria-pressed", String(isDark()));
  view.dispatch({ effects: themeC.reconfigure(themeExt()) });
}
onThemeChange(applyTheme);

// openShare fetches the shared project sharedId: {share} or {error}. A
// share that cannot be opened never touches the user's projects.
async function openShare() {
  try {
    const r = await fetch("/api/shares/" + encodeURIComponent(sharedId));
    if (r.ok) { const s = await r.json(); return { share: { id: sharedId, files: fromWire(s.files) } }; }
    // The server says why: never made, expired, or deleted by the operator.
    const body = await r.json().catch(() => ({}));
    return { error: (body.error || `shared project not found (${r.status})`) + "; your own projects are unchanged" };
  } catch {
    return { error: "the shared project cannot be reached (network error); your own projects are unchanged" };
  }
}
// timeoutMenu fills the time-limit menu with the server's tiers and
// "default" (no timeout sent: a default task), keeping the choice.
function timeoutMenu() {
  const sel = $("timeout"), was = sel.value;
  sel.textContent = "";
  sel.append(new Option("default", ""));
  for (const ms of limits.timeouts) sel.append(new Option(ms / 1000 + " s", String(ms)));
  sel.value = [...sel.options].some((o) => o.value === was) ? was : "";
}

async function init() {
  setupLayout();
  setupHelp();
  applyTheme();
  $("compile").onclick = () => run(false);
  $("stop").onclick = stop;
  $("add-file").onclick = () => fileOp("add");
  $("rename-file").onclick = () => fileOp("rename");
  $("delete-file").onclick = () => fileOp("delete");
  $("main-file").onclick = () => fileOp("main");
  $("download").onclick = download;
  $("reset-view").onclick = resetView;
  $("share").onclick = share;
  $("copy").onclick = makeCopy;
  $("theme").onclick = () => { toggleTheme(); applyTheme(); };
  $("examples").onclick = openGallery;
  loadSymbols();
  fetch("/api/info").then((r) => r.json()).then((info) => {
    setLimits(info); timeoutMenu();
    $("version").textContent = "asy " + (info.asyVersion || "?");
    if (info.formats?.length) { const f = $("format"); f.textContent = ""; for (const x of info.formats) f.append(new Option(FORMAT_LABELS[x] || x, x)); }
  }).catch(() => { $("version").textContent = "asy version unknown"; });
  const { share: snapshot, error } = sharedId ? await openShare() : {};
  if (!snapshot) readOnly = false;
  await store.init(snapshot);
  if (error) { setStatus(error); projectsUI.notice(error); }
}
const started = init().catch((e) => { console.error(e); setStatus("the app could not start: " + (e?.message || e)); });
