// A project's files: the server's limits and file-name rules (from
// /api/info), text or binary, the wire form of shares and examples, and
// the checks every file from outside (an upload, a zip) passes.

/** limits are the server's, from GET /api/info; the defaults until it answers. */
export const limits = {
  timeouts: [3000, 10000, 30000],
  extensions: [".asy"],
  binaryExtensions: [".png", ".jpg", ".jpeg", ".pdf"],
  maxFiles: 32,
  maxUpload: 1 << 20,
  maxShare: 256 << 10,
};

/** setLimits takes what /api/info says (missing fields keep their defaults). */
export function setLimits(info) {
  for (const k of Object.keys(limits)) {
    if (Array.isArray(limits[k]) ? Array.isArray(info?.[k]) : Number.isFinite(info?.[k])) limits[k] = info[k];
  }
}

// The extension as the server reads it (path.Ext): case counts, so
// "photo.PNG" is not a ".png".
const extOf = (name) => { const i = name.lastIndexOf("."); return i < 0 ? "" : name.slice(i); };
/** isBinaryName says whether a file of that name is kept as bytes. */
export const isBinaryName = (name) => limits.binaryExtensions.includes(extOf(name));
/** isBinary says whether a project file's content is bytes. */
export const isBinary = (f) => f.content instanceof Uint8Array;
/** sizeOf is a file's size in bytes (UTF-8 for text). */
export const sizeOf = (f) => isBinary(f) ? f.content.length : new TextEncoder().encode(f.content).length;
/** totalSize is the bytes of all files. */
export const totalSize = (files) => files.reduce((n, f) => n + sizeOf(f), 0);

/** bytesText says n bytes for people: 256 KiB, 1 MiB, 1.2 KiB, or exactly when that would round (1048577 bytes). */
export function bytesText(n) {
  if (n < 1024) return n + " B";
  if (n % (1 << 20) === 0) return n / (1 << 20) + " MiB";
  if (n % 1024 === 0) return n / 1024 + " KiB";
  return n < 100 << 10 ? (n / 1024).toFixed(1) + " KiB" : n + " bytes";
}

/**
 * nameError says why name cannot be a project file's name, or null: the
 * server's rules (internal/sandbox.CheckFileName) with its list of
 * extensions: at most 255 bytes, no NUL or control character, no "/",
 * "\", "..", an allowed extension, and no data file named like asy's
 * own output ("out.*", "out_*").
 */
export function nameError(name) {
  const shown = JSON.stringify(name.length > 64 ? name.slice(0, 64) + "…" : name);
  if (!name) return "a file needs a name";
  if (new TextEncoder().encode(name).length > 255) return `file name ${shown} is longer than 255 bytes`;
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) return `file name ${shown} contains a control character`;
  if (name.includes("/")) return `file name ${shown} contains "/"`;
  if (name.includes("\\")) return `file name ${shown} contains "\\"`;
  if (name.includes("..")) return `file name ${shown} contains ".."`;
  if (!limits.extensions.includes(extOf(name))) return `file name ${shown} does not end in ${limits.extensions.join(", ")} (the server's extensions)`;
  if (extOf(name) !== ".asy" && /^out[._]/.test(name)) return `file name ${shown} is reserved for asy's output`;
  return null;
}

// What the first bytes of a binary file must be, by extension.
const MAGIC = { ".png": [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], ".jpg": [0xff, 0xd8, 0xff], ".jpeg": [0xff, 0xd8, 0xff], ".pdf": [0x25, 0x50, 0x44, 0x46, 0x2d] };
/**
 * fileFromBytes makes a project file of name from bytes, or throws with
 * the reason: a text file must be UTF-8 without NUL bytes, a png, jpeg or
 * pdf must start as one does.
 */
export function fileFromBytes(name, bytes, main = false) {
  const err = nameError(name);
  if (err) throw new Error(err);
  if (isBinaryName(name)) {
    const magic = MAGIC[extOf(name)];
    if (magic && !magic.every((b, i) => bytes[i] === b)) throw new Error(`${name} is not a ${extOf(name).slice(1)} file (its first bytes say otherwise)`);
    return { filename: name, main, content: bytes };
  }
  let text;
  try { text = new TextDecoder("utf-8", { fatal: true }).decode(bytes); } catch { throw new Error(`${name} is not a text file (not UTF-8)`); }
  if (text.includes("\u0000")) throw new Error(`${name} is not a text file (it has NUL bytes)`);
  return { filename: name, main, content: text };
}

/**
 * checkProject throws the first reason files cannot be a project the
 * server compiles: names, duplicates, the number of files (maxFiles) and
 * their bytes (maxUpload).
 */
export function checkProject(files, what = "the project") {
  if (!files.length) throw new Error(`${what} has no files`);
  if (files.length > limits.maxFiles) throw new Error(`${what} has ${files.length} files, more than the server's limit of ${limits.maxFiles} (maxFiles)`);
  const seen = new Set();
  for (const f of files) {
    const err = nameError(f.filename);
    if (err) throw new Error(err);
    if (seen.has(f.filename)) throw new Error(`${what} has two files named ${f.filename}`);
    seen.add(f.filename);
  }
  const total = totalSize(files);
  if (total > limits.maxUpload) throw new Error(`${what} has ${bytesText(total)} of files, more than the server's limit of ${bytesText(limits.maxUpload)} for one compile (maxUpload)`);
}

function base64(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}
function unbase64(text) { return Uint8Array.from(atob(text), (c) => c.charCodeAt(0)); }

/** toWire is files as shares and examples send them: binary content in base64. */
export const toWire = (files) => files.map((f) => isBinary(f)
  ? { filename: f.filename, main: !!f.main, content: base64(f.content), encoding: "base64" }
  : { filename: f.filename, main: !!f.main, content: f.content });
/** fromWire is the project files of files in the wire form. */
export const fromWire = (files) => files.map((f) => ({ filename: f.filename, main: !!f.main, content: f.encoding === "base64" ? unbase64(f.content) : f.content }));
