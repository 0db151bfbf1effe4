// The project list and its buttons (new, rename, duplicate, delete with
// undo, export and import a .zip), and the notice toast, built into
// #projects-pane. The store (projects.js) does the work.
import { UNDO_MS } from "./projects.js";
import { exportZip, importZip, zipName, ZipError } from "./zip.js";
import { limits, bytesText } from "./files.js";

const el = (tag, props = {}, ...kids) => { const e = Object.assign(document.createElement(tag), props); e.append(...kids); return e; };
const button = (id, text, label) => { const b = el("button", { id, textContent: text }); b.setAttribute("aria-label", label); return b; };

/**
 * mountProjects builds the project pane into pane and returns {render(),
 * notice(text, undo?)}. store is the project store.
 */
export function mountProjects(pane, store) {
  const list = el("ul", { id: "projects" });
  list.setAttribute("aria-label", "projects");
  const input = el("input", { id: "import-input", type: "file", accept: ".zip,application/zip", hidden: true });
  const buttons = {
    new: button("new-project", "+ project", "new project"),
    rename: button("rename-project", "rename", "rename the open project"),
    duplicate: button("duplicate-project", "duplicate", "duplicate the open project"),
    delete: button("delete-project", "delete", "delete the open project"),
    export: button("export-project", "export .zip", "export .zip of the open project"),
    import: button("import-project", "import .zip", "import .zip as a new project"),
  };
  const text = el("span", { id: "toast-text" });
  const undo = el("button", { id: "undo", textContent: "undo" });
  const toast = el("div", { id: "toast", hidden: true }, text, " ", undo);
  toast.setAttribute("role", "status");
  const heading = el("h2", { textContent: "projects" });
  pane.append(heading, list, el("div", { className: "project-actions" }, ...Object.values(buttons), input));
  document.body.append(toast);

  let toastTimer = null;
  function notice(msg, undoFn) {
    text.textContent = msg;
    undo.hidden = !undoFn;
    undo.onclick = async () => { toast.hidden = true; try { await undoFn(); } catch (e) { notice("undo failed: " + e.message); } };
    toast.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { toast.hidden = true; }, UNDO_MS);
  }
  const guard = (f) => async () => { try { await f(); } catch (e) { notice(e.message || String(e)); } };

  async function render() {
    const items = await store.list();
    list.textContent = "";
    for (const p of items) {
      const b = el("button", { textContent: p.name + (p.shared ? " (read-only)" : "") });
      b.dataset.name = p.name;
      b.setAttribute("aria-label", "open project " + p.name + (p.shared ? " (shared snapshot, read-only)" : ""));
      if (p.open) b.setAttribute("aria-current", "true");
      b.onclick = guard(() => p.shared ? store.openShared({ id: store.sharedSnapshot.id, files: store.sharedSnapshot.files }) : store.open(p.id));
      list.append(el("li", {}, b));
    }
    const ro = store.readOnly;
    buttons.rename.disabled = buttons.delete.disabled = ro;
  }

  buttons.new.onclick = guard(async () => {
    const name = prompt("New project name", "untitled")?.trim();
    if (name) await store.create(name);
  });
  buttons.rename.onclick = guard(async () => {
    const p = store.project;
    const name = prompt(`Rename project "${p.name}" to`, p.name)?.trim();
    if (name && name !== p.name) await store.rename(p.id, name);
  });
  buttons.duplicate.onclick = guard(() => store.readOnly ? store.copyShared() : store.duplicate(store.project.id));
  buttons.delete.onclick = guard(() => store.remove(store.project.id));
  buttons.export.onclick = guard(async () => {
    await store.flush();
    const p = store.project;
    const url = URL.createObjectURL(new Blob([exportZip(p)], { type: "application/zip" }));
    const a = el("a", { href: url, download: zipName(p.name) });
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  });
  buttons.import.onclick = () => input.click();
  input.onchange = guard(async () => {
    const file = input.files[0];
    input.value = "";
    if (!file) return;
    // The zip itself: no larger than its files may be (compressed data
    // plus its directory never needs much more).
    const cap = limits.maxUpload + (limits.maxFiles + 1) * 1024 + (64 << 10);
    if (file.size > cap) throw new Error(`${file.name} is ${bytesText(file.size)}, more than a project zip may be (the server's limit of ${bytesText(limits.maxUpload)} for one compile, maxUpload)`);
    let got;
    try { got = importZip(new Uint8Array(await file.arrayBuffer()), file.name.replace(/\.zip$/i, "")); } catch (e) {
      throw new Error(`${file.name} was not imported: ${e instanceof ZipError ? e.message : "it cannot be read (" + e.message + ")"}`);
    }
    await store.create(got.name, got.files);
    notice(`imported "${store.project.name}" (${got.files.length} files)`);
  });
  return { render: () => render().catch((e) => notice(e.message)), notice };
}
