// Completion and hover for the Asymptote editor, from what the server's asy
// knows (GET /api/symbols): keywords, types, functions with their
// signatures, variables, and after import/include/input the modules of
// asy's system directory and the project's own .asy files. Without the
// server's list (asy could not be asked) it falls back to the keywords and
// types of the syntax mode.
import { autocompletion } from "@codemirror/autocomplete";
import { EditorState } from "@codemirror/state";
import { hoverTooltip } from "@codemirror/view";
import { keywords as fallbackKeywords, types as fallbackTypes } from "./asy.js";

// MAX_SIGNATURES bounds the signatures shown for one name (draw has 30).
const MAX_SIGNATURES = 8;
const IMPORT_RE = /\b(import|include|input|access|from)\s+("?)([\w.\/-]*)$/;

// catalog is the prepared /api/symbols: options for the completion list,
// and signatures by name for hover and the completion info.
let catalog = prepare(null);

// prepare turns a /api/symbols body (null: none) into the lookup tables.
function prepare(body) {
  const byName = new Map(); // name → {kind, signatures[]}
  const add = (name, kind, sig) => {
    let e = byName.get(name);
    if (!e) byName.set(name, (e = { kind, signatures: [] }));
    if (sig && e.signatures.length < 200) e.signatures.push(sig);
  };
  const kws = body?.keywords?.length ? body.keywords : [...fallbackKeywords];
  for (const s of body?.symbols || []) add(s.name, s.kind, s.kind === "type" ? "" : s.signature);
  if (!body) for (const t of fallbackTypes) add(t, "type", "");
  // A user's calls first: signatures on a frame (asy's low-level layer)
  // after those on a picture, shorter before longer.
  const low = (sig) => (/^\S+ \w+\(frame /.test(sig) ? 1 : 0);
  for (const e of byName.values()) e.signatures.sort((a, b) => low(a) - low(b) || a.length - b.length);
  const options = kws.map((k) => ({ label: k, type: "keyword", boost: -1 }));
  for (const [name, e] of byName) {
    if (fallbackKeywords.has(name)) continue;
    const n = e.signatures.length;
    options.push({
      label: name,
      type: e.kind === "function" ? "function" : e.kind === "type" ? "type" : "variable",
      detail: e.kind === "function" ? (n > 1 ? `${n} signatures` : "") : e.kind === "variable" ? e.signatures[0]?.split(" ")[0] : "type",
      info: n ? () => signaturesDOM(name) : undefined,
    });
  }
  return { byName, options, modules: body?.modules || [], available: !!body };
}

// loadSymbols asks the server once; a 503 (asy not available) leaves the
// fallback in place and says so in the console of the page.
export function loadSymbols() {
  return fetch("/api/symbols").then(async (r) => {
    if (!r.ok) throw new Error((await r.json().catch(() => ({}))).error || r.statusText);
    catalog = prepare(await r.json());
  }).catch((e) => console.warn("completion uses keywords only:", e.message));
}

function signaturesDOM(name) {
  const e = catalog.byName.get(name);
  const box = document.createElement("div");
  box.className = "cm-asy-signatures";
  const sigs = e?.signatures || [];
  for (const s of sigs.slice(0, MAX_SIGNATURES)) {
    const code = document.createElement("code");
    code.textContent = s;
    box.append(code);
  }
  if (sigs.length > MAX_SIGNATURES) {
    const more = document.createElement("div");
    more.textContent = `… and ${sigs.length - MAX_SIGNATURES} more`;
    box.append(more);
  }
  return box;
}

// fileOptions are what import/include/input can name: asy's modules and
// the project's .asy files (without ".asy" after import, as asy takes
// them; with it inside quotes).
function fileOptions(projectFiles, quoted) {
  const own = projectFiles().filter((f) => /\.asy$/.test(f.filename)).map((f) => ({
    label: quoted ? f.filename : f.filename.replace(/\.asy$/, ""), type: "namespace", detail: "project file", boost: 1,
  }));
  return own.concat(catalog.modules.map((m) => ({ label: m, type: "namespace", detail: "asy module" })));
}

// source is the completion source; projectFiles() returns the open
// project's files ({filename, …}).
function source(projectFiles) {
  return (ctx) => {
    const line = ctx.state.doc.lineAt(ctx.pos);
    const before = line.text.slice(0, ctx.pos - line.from);
    const imp = IMPORT_RE.exec(before);
    if (imp) {
      return { from: ctx.pos - imp[3].length, options: fileOptions(projectFiles, imp[2] === '"'), validFor: /^[\w.\/-]*$/ };
    }
    const word = ctx.matchBefore(/[A-Za-z_]\w*/);
    if (!word && !ctx.explicit) return null;
    if (inStringOrComment(before)) return null;
    return { from: word ? word.from : ctx.pos, options: catalog.options, validFor: /^\w*$/ };
  };
}

// inStringOrComment is a cheap look at the line before the cursor: after
// "//" or inside an odd number of double quotes.
function inStringOrComment(before) {
  const quotes = (before.match(/(^|[^\\])"/g) || []).length;
  return quotes % 2 === 1 || /\/\/.*$/.test(before.replace(/"[^"]*"/g, ""));
}

// hover shows the signatures of the identifier under the pointer.
const hover = hoverTooltip((view, pos, side) => {
  const { from, text } = view.state.doc.lineAt(pos);
  let start = pos - from, end = start;
  while (start > 0 && /\w/.test(text[start - 1])) start--;
  while (end < text.length && /\w/.test(text[end])) end++;
  if ((start === pos - from && side < 0) || (end === pos - from && side > 0) || start === end) return null;
  const name = text.slice(start, end);
  const e = catalog.byName.get(name);
  if (!e || (!e.signatures.length && e.kind !== "type")) return null;
  return {
    pos: from + start, end: from + end, above: true,
    create() {
      const dom = e.signatures.length ? signaturesDOM(name) : Object.assign(document.createElement("div"), { textContent: "type " + name });
      dom.classList.add("cm-asy-hover");
      return { dom };
    },
  };
});

// asyHelp is the editor extension: completion (opening as soon as a word
// is typed: the default waits 100 ms) and hover.
export function asyHelp(projectFiles) {
  const data = [{ autocomplete: source(projectFiles) }];
  return [
    autocompletion({ activateOnTypingDelay: 0 }),
    // One data object: completion tells sources apart by identity.
    EditorState.languageData.of(() => data),
    hover,
  ];
}
