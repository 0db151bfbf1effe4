// A project as a .zip (docs/webapp.md, "Zip format"): its files at the top
// level and a manifest, usher-project.json, naming the main file. Export
// writes one with fflate; import reads the zip's central directory itself
// (fflate does not show an entry's file type, which tells a symlink) and
// refuses, before anything is saved: names the server would refuse (path
// tricks among them), symlinks and folders, encrypted or ZIP64 entries,
// more files than maxFiles, and more bytes than maxUpload — declared in
// the directory, and counted while inflating, which stops at the declared
// size, so a zip bomb inflates no further than the limit.
import { zipSync, Inflate, strToU8 } from "fflate";
import { limits, bytesText, fileFromBytes, checkProject, isBinary, nameError } from "./files.js";

/** MANIFEST is the name of the manifest inside a project zip. */
export const MANIFEST = "usher-project.json";
const MANIFEST_MAX = 64 << 10;
const CHUNK = 16 << 10; // bytes of compressed input inflated at a time

/** zipName is the file name a project exports as. */
export const zipName = (name) => (name.replace(/[\u0000-\u001f/\\:*?"<>|]+/g, "_").trim() || "project") + ".zip";

/** exportZip returns project's zip: its files and the manifest. */
export function exportZip(project) {
  const entries = {};
  for (const f of project.files) entries[f.filename] = isBinary(f) ? f.content : strToU8(f.content);
  const manifest = { format: "usher-project", version: 1, name: project.name, files: project.files.map((f) => ({ filename: f.filename, main: !!f.main })) };
  entries[MANIFEST] = strToU8(JSON.stringify(manifest, null, 1) + "\n");
  return zipSync(entries, { level: 6 });
}

/** ZipError is a zip refused, with the reason for the user. */
export class ZipError extends Error {}
const refuse = (text) => { throw new ZipError(text); };

// entries reads the central directory: [{name, method, flags, csize, size, offset, unixType}].
function entries(zip) {
  const dv = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
  let eocd = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 22 - 0xffff); i--) {
    if (dv.getUint32(i, true) === 0x06054b50) { eocd = i; break; }
  }
  if (eocd < 0) refuse("not a zip file");
  const count = dv.getUint16(eocd + 10, true), cdOffset = dv.getUint32(eocd + 16, true);
  if (count === 0xffff || cdOffset === 0xffffffff) refuse("ZIP64 archives are not supported");
  if (count > limits.maxFiles + 1) refuse(`the zip has ${count} entries, more than the server's limit of ${limits.maxFiles} files (maxFiles)`);
  const out = [], dec = new TextDecoder();
  for (let i = 0, p = cdOffset; i < count; i++) {
    if (p + 46 > zip.length || dv.getUint32(p, true) !== 0x02014b50) refuse("the zip's directory is damaged");
    const nameLen = dv.getUint16(p + 28, true), extraLen = dv.getUint16(p + 30, true), commentLen = dv.getUint16(p + 32, true);
    const e = {
      name: dec.decode(zip.subarray(p + 46, p + 46 + nameLen)),
      flags: dv.getUint16(p + 8, true), method: dv.getUint16(p + 10, true),
      csize: dv.getUint32(p + 20, true), size: dv.getUint32(p + 24, true), offset: dv.getUint32(p + 42, true),
      unixType: (dv.getUint16(p + 4, true) >> 8) === 3 ? (dv.getUint32(p + 38, true) >>> 16) & 0o170000 : 0,
    };
    if (e.csize === 0xffffffff || e.size === 0xffffffff || e.offset === 0xffffffff) refuse("ZIP64 archives are not supported");
    out.push(e);
    p += 46 + nameLen + extraLen + commentLen;
  }
  return out;
}

// inflate returns e's bytes, never more than e.size: a zip that declared
// less than it holds is refused as soon as the output passes the size.
function inflate(zip, e) {
  const dv = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
  if (e.offset + 30 > zip.length || dv.getUint32(e.offset, true) !== 0x04034b50) refuse(`${e.name}: the zip's entry is damaged`);
  const start = e.offset + 30 + dv.getUint16(e.offset + 26, true) + dv.getUint16(e.offset + 28, true);
  if (start + e.csize > zip.length) refuse(`${e.name}: the zip is cut short`);
  const data = zip.subarray(start, start + e.csize);
  const tooBig = () => refuse(`${e.name} inflates to more than the ${bytesText(e.size)} the zip declares (a zip bomb?)`);
  if (e.method === 0) { if (data.length !== e.size) tooBig(); return data.slice(); }
  if (e.method !== 8) refuse(`${e.name}: compression method ${e.method} is not supported (only stored and deflate)`);
  const out = new Uint8Array(e.size);
  let got = 0;
  const inf = new Inflate((chunk) => {
    if (got + chunk.length > e.size) tooBig();
    out.set(chunk, got); got += chunk.length;
  });
  try {
    for (let i = 0; i === 0 || i < data.length; i += CHUNK) inf.push(data.subarray(i, i + CHUNK), i + CHUNK >= data.length);
  } catch (err) {
    if (err instanceof ZipError) throw err;
    refuse(`${e.name}: the zip's data is damaged (${err.message})`);
  }
  if (got !== e.size) refuse(`${e.name} inflates to ${got} bytes, not the ${e.size} the zip declares`);
  return out;
}

/**
 * importZip reads a project zip and returns {name, files}, or throws a
 * ZipError naming what is wrong. It checks everything before it returns:
 * the caller saves all or nothing.
 */
export function importZip(zip, fallbackName) {
  const list = entries(zip);
  let declared = 0;
  for (const e of list) {
    if (e.unixType === 0o120000) refuse(`${e.name} is a symbolic link; a project zip holds plain files only`);
    if (e.unixType === 0o040000 || e.name.endsWith("/")) refuse(`${e.name} is a folder; a project zip holds its files at the top level`);
    if (e.flags & 1) refuse(`${e.name} is encrypted`);
    if (e.name === MANIFEST) { if (e.size > MANIFEST_MAX) refuse(`${MANIFEST} is larger than ${bytesText(MANIFEST_MAX)}`); continue; }
    const bad = nameError(e.name);
    if (bad) refuse(bad);
    declared += e.size;
  }
  const files = list.filter((e) => e.name !== MANIFEST);
  if (files.length > limits.maxFiles) refuse(`the zip has ${files.length} files, more than the server's limit of ${limits.maxFiles} (maxFiles)`);
  if (declared > limits.maxUpload) refuse(`the zip's files declare ${bytesText(declared)}, more than the server's limit of ${bytesText(limits.maxUpload)} for one compile (maxUpload)`);
  const seen = new Set();
  for (const e of list) {
    if (seen.has(e.name)) refuse(`the zip has two entries named ${e.name}`);
    seen.add(e.name);
  }
  let manifest = null;
  const me = list.find((e) => e.name === MANIFEST);
  if (me) {
    try { manifest = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(inflate(zip, me))); } catch (err) {
      if (err instanceof ZipError) throw err;
      refuse(`${MANIFEST} is not valid JSON`);
    }
  }
  const out = [];
  for (const e of files) {
    try { out.push(fileFromBytes(e.name, inflate(zip, e))); } catch (err) { refuse(err.message); }
  }
  const main = manifest?.files?.find?.((f) => f?.main)?.filename;
  const mainFile = out.find((f) => f.filename === main) || out.find((f) => f.filename === "main.asy") || out.find((f) => f.filename.endsWith(".asy"));
  if (!mainFile) refuse("the zip has no .asy file to compile");
  mainFile.main = true;
  try { checkProject(out, "the zip"); } catch (err) { refuse(err.message); }
  const name = typeof manifest?.name === "string" && manifest.name.trim() ? manifest.name.trim().slice(0, 200) : fallbackName;
  return { name, files: out };
}
