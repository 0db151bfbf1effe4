// The shell pane: an interactive Asymptote session over /asy
// (docs/protocol.md, interactive tasks). One input line with history,
// output as it arrives, the server's denials and ends shown apart, a
// restart. With "project files" ticked, the session carries the project's
// files (every main flag dropped: a shell has no main file), so that
// `import lib;` of a project file works; unticked it is a bare shell.
import { compile } from "./protocol.js";

const HISTORY_KEY = "usher.shell.history";
const HISTORY_MAX = 200;

/**
 * mountShell builds the pane inside root. getFiles() returns the project's
 * files ([{filename, main, content, encoding?}]) when a session starts.
 */
export function mountShell(root, getFiles) {
  root.innerHTML = `
<details id="shell-pane">
  <summary>shell</summary>
  <div class="shell-bar" role="toolbar" aria-label="shell">
    <label><input type="checkbox" id="shell-files" checked> project files</label>
    <label>time limit <select id="shell-timeout" aria-label="shell time limit">
      <option value="">none (ends when idle)</option><option value="30000">30 s</option>
      <option value="10000">10 s</option><option value="3000">3 s</option></select></label>
    <button id="shell-restart" type="button" aria-label="restart the shell">restart</button>
    <span id="shell-state" role="status" aria-live="polite">not started</span>
  </div>
  <pre id="shell-log" role="log" aria-label="shell output" aria-live="polite" tabindex="0"></pre>
  <form id="shell-form" autocomplete="off">
    <label for="shell-input" class="shell-prompt">&gt;</label>
    <input id="shell-input" aria-label="Asymptote command" placeholder="write(1+2);" spellcheck="false">
  </form>
</details>`;
  const $ = (id) => root.querySelector("#" + id);
  const log = $("shell-log"), input = $("shell-input"), state = $("shell-state");
  const history = JSON.parse(localStorage.getItem(HISTORY_KEY) || "[]");
  let at = history.length; // the history entry shown; history.length: the line being typed
  let draft = "";
  let session = null; // {task, ended}

  function line(text, kind) {
    const span = document.createElement("span");
    span.className = "shell-" + kind;
    span.textContent = text;
    log.append(span);
    log.scrollTop = log.scrollHeight;
  }
  // output splits off the server's own notices ("usher: …" lines).
  function output(text) {
    for (const part of text.split(/(?<=\n)/)) line(part, part.startsWith("usher: ") ? "notice" : "out");
  }
  function end(text, kind) {
    if (!session || session.ended) return;
    session.ended = true;
    line(text + "\n", kind);
    state.textContent = "ended — press Enter or restart for a new session";
  }

  function start() {
    session?.task.cancel();
    const files = $("shell-files").checked ? getFiles().map((f) => ({ ...f, main: false })) : [];
    const timeout = Number($("shell-timeout").value) || undefined;
    const me = { ended: false };
    session = me;
    state.textContent = "starting…";
    const mine = (fn) => (...a) => { if (session === me) fn(...a); };
    me.task = compile(files, { interactive: true, timeout }, {
      queue: mine((m) => { if (m.passed) state.textContent = "running"; }),
      output: mine(output),
      result: mine(() => line("(the picture changed)\n", "info")),
      complete: mine((m) => end(m.success ? "session ended" : "session ended: " + (m.error || "failed"), m.success ? "info" : "halt")),
      denied: mine((m) => end("denied: " + m.error, "denied")),
      closed: mine(() => end("connection closed", "halt")),
      error: mine((t) => end(t, "halt")),
    });
  }

  function submit(text) {
    if (!session || session.ended) { log.textContent = ""; start(); }
    line("> " + text + "\n", "echo");
    if (text.trim() && history[history.length - 1] !== text) {
      history.push(text);
      if (history.length > HISTORY_MAX) history.splice(0, history.length - HISTORY_MAX);
      localStorage.setItem(HISTORY_KEY, JSON.stringify(history));
    }
    at = history.length; draft = "";
    session.task.input(text + "\n");
  }

  $("shell-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = input.value;
    input.value = "";
    submit(text);
  });
  input.addEventListener("keydown", (e) => {
    if (e.key !== "ArrowUp" && e.key !== "ArrowDown") return;
    e.preventDefault();
    if (at === history.length) draft = input.value;
    at = Math.max(0, Math.min(history.length, at + (e.key === "ArrowUp" ? -1 : 1)));
    input.value = at === history.length ? draft : history[at];
  });
  $("shell-restart").addEventListener("click", () => { log.textContent = ""; start(); input.focus(); });
  $("shell-pane").addEventListener("toggle", (e) => {
    if (e.target.open && !session) start();
    if (!e.target.open && session && !session.ended) { session.task.cancel(); session = null; state.textContent = "closed"; }
    if (e.target.open) input.focus();
  });
}
