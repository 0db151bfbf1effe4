// Data files in a project: an upload button and drag-and-drop onto the
// file list for any extension /api/info allows; binary ones (png, jpeg,
// pdf: binaryExtensions) are kept as bytes and shown as a file (name,
// size, an image preview) instead of the editor.
import { limits, bytesText, fileFromBytes, checkProject, isBinary, sizeOf } from "./files.js";

const IMAGE = { ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg" };
const MIME = { ...IMAGE, ".pdf": "application/pdf" };
const extOf = (name) => name.slice(name.lastIndexOf(".")).toLowerCase();

/**
 * mountDataFiles adds the upload button after after, makes drop a drop
 * target and puts the file view before editor. app: {project (getter),
 * readOnly (getter), openFile(name), changed() (the project changed),
 * flush() (a promise: saved), notice(text)}. Returns {show(file)}, which
 * shows a binary file in the file view (and hides the editor) or hides the
 * view for a text file.
 */
export function mountDataFiles({ after, drop, editor }, app) {
  const input = Object.assign(document.createElement("input"), { type: "file", id: "upload-input", multiple: true, hidden: true });
  const btn = Object.assign(document.createElement("button"), { id: "upload-file", textContent: "upload" });
  btn.setAttribute("aria-label", "upload data files");
  btn.onclick = () => input.click();
  input.onchange = () => { const fs = [...input.files]; input.value = ""; add(fs); };
  after.after(btn, input);

  drop.addEventListener("dragover", (e) => { if (e.dataTransfer?.types.includes("Files")) { e.preventDefault(); drop.classList.add("dropping"); } });
  drop.addEventListener("dragleave", () => drop.classList.remove("dropping"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault(); drop.classList.remove("dropping");
    add([...(e.dataTransfer?.files || [])]);
  });

  const view = document.createElement("div");
  view.id = "file-view"; view.hidden = true;
  editor.before(view);
  let url = null;

  // add checks every file and the project they make, then adds them all
  // (or none), asking before it replaces a file of the same name.
  async function add(list) {
    if (!list.length) return;
    try {
      if (app.readOnly) throw new Error("this is a shared snapshot: make a copy to add files");
      const incoming = [];
      for (const file of list) {
        if (file.size > limits.maxUpload) throw new Error(`${file.name} is ${bytesText(file.size)}, more than the server's limit of ${bytesText(limits.maxUpload)} for one compile (maxUpload)`);
        incoming.push(fileFromBytes(file.name, new Uint8Array(await file.arrayBuffer())));
      }
      const p = app.project;
      const replaced = incoming.filter((f) => p.files.some((x) => x.filename === f.filename));
      if (replaced.length && !confirm(`Replace ${replaced.map((f) => f.filename).join(", ")} with the uploaded file?`)) return;
      const next = p.files.map((x) => { const f = incoming.find((y) => y.filename === x.filename); return f ? { ...f, main: x.main } : x; });
      next.push(...incoming.filter((f) => !p.files.some((x) => x.filename === f.filename)));
      checkProject(next, "with the uploaded files the project");
      p.files = next;
      app.changed();
      await app.flush();
      app.openFile(incoming[0].filename);
      app.notice(`uploaded ${incoming.map((f) => `${f.filename} (${bytesText(sizeOf(f))})`).join(", ")}`);
    } catch (e) {
      app.notice("upload refused: " + e.message);
    }
  }

  function show(f) {
    if (url) { URL.revokeObjectURL(url); url = null; }
    view.textContent = "";
    const binary = !!f && isBinary(f);
    view.hidden = !binary; editor.hidden = binary;
    if (!binary) return;
    url = URL.createObjectURL(new Blob([f.content], { type: MIME[extOf(f.filename)] || "application/octet-stream" }));
    const head = document.createElement("p");
    head.className = "file-info";
    head.textContent = `${f.filename} — ${bytesText(f.content.length)}, kept as a data file`;
    const save = Object.assign(document.createElement("a"), { href: url, download: f.filename, textContent: "download " + f.filename });
    view.append(head, save);
    if (IMAGE[extOf(f.filename)]) {
      const img = Object.assign(document.createElement("img"), { src: url, alt: "preview of " + f.filename });
      view.append(img);
    }
  }
  return { show };
}
