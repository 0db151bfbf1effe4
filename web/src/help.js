// The keyboard-shortcut overlay: a modal <dialog> listing the app's own
// shortcuts and CodeMirror's common ones. The header's "?" button opens it,
// and so do ? (outside the editor and form fields) and F1 anywhere; Esc
// closes it. While it is open the page behind is inert and Tab stays in
// the dialog; closing gives focus back to where it was.
const MAC = /Mac|iPhone|iPad/.test(navigator.platform);

// SHORTCUTS lists the shortcuts by group: [keys, what it does, keys on a
// Mac if they differ]. "Mod" is Ctrl, or Cmd on a Mac. An area that adds a
// shortcut adds its row here.
export const SHORTCUTS = [
  ["The app", [
    ["Mod-Enter", "compile"],
    ["? or F1", "this list (? outside the editor)"],
    ["Esc", "close this list, a search panel or a completion"],
    ["h", "back to the first view (with a 3D figure focused)"],
  ]],
  ["Search", [
    ["Mod-f", "find and replace"],
    ["Mod-g or F3", "find next (with Shift: previous)"],
    ["Mod-d", "select the next occurrence"],
    ["Mod-Shift-l", "select all occurrences"],
    ["Mod-Alt-g", "go to line"],
  ]],
  ["Editing", [
    ["Mod-z", "undo"],
    ["Mod-y", "redo", "Mod-Shift-z"],
    ["Mod-/", "comment or uncomment the lines"],
    ["Shift-Alt-a", "block comment"],
    ["Mod-]", "indent more"],
    ["Mod-[", "indent less"],
    ["Mod-Alt-\\", "indent the selection afresh"],
    ["Alt-↑ / Alt-↓", "move the line up or down"],
    ["Shift-Alt-↑ / ↓", "copy the line up or down"],
    ["Shift-Mod-k", "delete the line"],
    ["Ctrl-Space", "complete the word"],
  ]],
  ["Moving around", [
    ["Mod-Home / Mod-End", "start or end of the file"],
    ["Shift-Mod-\\", "go to the matching bracket"],
    ["Ctrl-Shift-[ / ]", "fold or unfold the block", "Cmd-Alt-[ / ]"],
    ["F8", "next error"],
    ["Mod-Shift-m", "list the errors"],
    ["Tab / Shift-Tab", "leave the editor for the next or previous control"],
  ]],
];

// keysText spells keys for this platform: Mod is Ctrl or ⌘, Alt ⌥ on a Mac.
function keysText(keys) {
  if (!MAC) return keys.replace(/\bMod\b/g, "Ctrl");
  return keys.replace(/\bMod\b|\bCmd\b/g, "⌘").replace(/\bAlt\b/g, "⌥").replace(/\bCtrl\b/g, "⌃");
}

function buildDialog() {
  const d = document.createElement("dialog");
  d.id = "help";
  d.setAttribute("aria-labelledby", "help-title");
  const head = document.createElement("div");
  head.className = "help-head";
  const h = document.createElement("h2");
  h.id = "help-title";
  h.textContent = "Keyboard shortcuts";
  const close = document.createElement("button");
  close.type = "button";
  close.className = "help-close";
  close.textContent = "close";
  close.autofocus = true;
  close.onclick = () => d.close();
  head.append(h, close);
  d.append(head);
  for (const [group, rows] of SHORTCUTS) d.append(tableOf(group, rows));
  return d;
}

function tableOf(group, rows) {
  const t = document.createElement("table");
  t.createCaption().textContent = group;
  const tb = t.createTBody();
  for (const [keys, what, mac] of rows) {
    const tr = tb.insertRow();
    const th = document.createElement("th");
    th.scope = "row";
    const kbd = document.createElement("kbd");
    kbd.textContent = keysText(MAC && mac ? mac : keys);
    th.append(kbd);
    tr.append(th);
    tr.insertCell().textContent = what;
  }
  return t;
}

// typing reports whether a key press goes into text: the editor or a field.
function typing(el) {
  return !!el?.closest?.(".cm-editor, input, select, textarea, [contenteditable]");
}

/**
 * setupHelp adds the header's help button and the dialog, and listens for
 * ? and F1. Returns {open, dialog}.
 */
export function setupHelp() {
  const d = buildDialog();
  document.body.append(d);
  const button = document.createElement("button");
  button.type = "button";
  button.id = "help-button";
  button.textContent = "?";
  button.title = "keyboard shortcuts (? or F1)";
  button.setAttribute("aria-label", "keyboard shortcuts");
  button.setAttribute("aria-haspopup", "dialog");
  button.setAttribute("aria-keyshortcuts", "F1");
  document.querySelector("header").append(button);
  let back = null;
  const open = () => {
    if (d.open) return;
    back = document.activeElement;
    d.showModal();
  };
  d.addEventListener("close", () => { back?.focus?.(); back = null; });
  d.addEventListener("keydown", (e) => trapTab(d, e));
  button.onclick = open;
  document.addEventListener("keydown", (e) => {
    if (e.key === "F1" || (e.key === "?" && !e.ctrlKey && !e.metaKey && !e.altKey && !typing(e.target))) {
      e.preventDefault();
      open();
    }
  });
  return { open, dialog: d };
}

// trapTab keeps Tab and Shift-Tab cycling through the dialog's controls
// (the page behind is inert, but Tab could otherwise reach the browser's).
function trapTab(d, e) {
  if (e.key !== "Tab") return;
  const all = [...d.querySelectorAll("button, a[href], input, select, textarea, [tabindex]:not([tabindex='-1'])")];
  const first = all[0], last = all[all.length - 1];
  if (e.shiftKey && document.activeElement === first) { e.preventDefault(); last.focus(); }
  else if (!e.shiftKey && document.activeElement === last) { e.preventDefault(); first.focus(); }
}
