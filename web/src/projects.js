// The project store: a user's projects in IndexedDB (docs/webapp.md,
// "Projects"). Each project is one record of the "projects" object store:
// {id, name, files: [{filename, main, content}], current, rev, created,
// updated, deleted?}; content is a string for a text file and a Uint8Array
// for a binary one. The store opens one project at a time (or a shared
// snapshot, read-only, never saved); the editor changes the open project's
// files in place and calls changed().
//
// Nothing is lost:
// - every change is written at once, synchronously, to a journal in
//   localStorage ("usher.journal.<id>", the text files), and to IndexedDB
//   after a short pause; a reload before that write finds the journal and
//   writes it;
// - two tabs: every write checks the record's revision. When another tab
//   wrote the project since this tab read it, this tab's version is kept as
//   a new project ("… (conflicting copy)") and a notice says so; a
//   BroadcastChannel tells the other tabs of each write, and a tab without
//   unsaved edits then shows the newer version;
// - a deleted project stays in the store, marked, for UNDO_MS: undo brings
//   it back; it is removed for good after that.
import { openDB, txn } from "./idb.js";
import { fromWire } from "./files.js";

/** DEFAULT_FILES are the files of a new project. */
export const DEFAULT_FILES = () => [{ filename: "main.asy", main: true, content: "size(4cm);\ndraw(unitcircle, blue);\nlabel(\"$O$\", (0,0));\n" }];
/** UNDO_MS is how long a deleted project can be brought back. */
export const UNDO_MS = 8000;
const SAVE_MS = 400;
const DB_NAME = "usher", DB_VERSION = 1;
const JOURNAL = "usher.journal.";
const OLD_PROJECT = "usher.project"; // where the app kept its one project before IndexedDB

class Conflict extends Error {}

function upgrade(db) {
  db.createObjectStore("projects", { keyPath: "id" });
  db.createObjectStore("meta");
}

const newID = () => crypto.randomUUID();
const mainOf = (files) => (files.find((f) => f.main) || files[0])?.filename;
function record(p, rev) {
  const now = Date.now();
  return { id: p.id, name: p.name, files: p.files.map(({ filename, main, content }) => ({ filename, main: !!main, content })), current: p.current, rev, created: p.created || now, updated: now };
}
function sameContent(a, b) {
  if (typeof a === "string" || typeof b === "string") return a === b;
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
function sameFiles(a, b) {
  return a.length === b.length && a.every((f, i) => f.filename === b[i].filename && !!f.main === !!b[i].main && sameContent(f.content, b[i].content));
}

/**
 * createStore returns the project store. on: {open(project, readOnly) when
 * a project or share is opened (or the open one changed in another tab),
 * list() when the list of projects changed, notice(text, undo?) for news
 * the user must see (undo: a function that takes the news back)}.
 */
export function createStore(on) {
  let db = null, project = null, readOnly = false, shared = null;
  let timer = null, seq = 0, chain = Promise.resolve();
  const tabID = newID();
  let channel = null;

  const call = (names, mode, body) => txn(db, names, mode, body);
  const get = (id) => call("projects", "readonly", ({ projects }, t) => t.on(projects.get(id), t.done));
  const all = () => call("projects", "readonly", ({ projects }, t) => t.on(projects.getAll(), t.done));
  const setMeta = (key, value) => call("meta", "readwrite", ({ meta }) => meta.put(value, key));
  const getMeta = (key) => call("meta", "readonly", ({ meta }, t) => t.on(meta.get(key), t.done));
  const announce = (id, rev) => channel?.postMessage({ tab: tabID, id, rev });

  async function live() { return (await all()).filter((r) => !r.deleted); }
  async function uniqueName(name, except) {
    const taken = new Set((await live()).filter((r) => r.id !== except).map((r) => r.name));
    if (!taken.has(name)) return name;
    for (let n = 2; ; n++) if (!taken.has(`${name} (${n})`)) return `${name} (${n})`;
  }

  // --- the journal in localStorage (synchronous: survives a reload at once)
  function journal(p) {
    const files = p.files.map((f) => typeof f.content === "string" ? { filename: f.filename, main: !!f.main, content: f.content } : { filename: f.filename, main: !!f.main, binary: true });
    try { localStorage.setItem(JOURNAL + p.id, JSON.stringify({ rev: p.rev, seq, name: p.name, current: p.current, files })); } catch { /* full: IndexedDB still gets it */ }
  }
  function dropJournal(id, upTo) {
    const j = readJournal(id);
    if (j && (upTo === undefined || j.seq <= upTo)) localStorage.removeItem(JOURNAL + id);
  }
  function readJournal(id) { try { return JSON.parse(localStorage.getItem(JOURNAL + id) || "null"); } catch { return null; } }
  // fromJournal rebuilds a project's files from its journal, binary files
  // from rec by name.
  function fromJournal(j, rec) {
    const files = j.files.map((f) => f.binary ? rec?.files.find((x) => x.filename === f.filename && typeof x.content !== "string") : f).filter(Boolean)
      .map((f) => ({ filename: f.filename, main: !!f.main, content: f.content }));
    return { files, current: j.current };
  }
  // recover writes a journal left by a tab that closed before saving.
  async function recover(rec) {
    const j = readJournal(rec.id);
    if (!j) return rec;
    const { files, current } = fromJournal(j, rec);
    if (sameFiles(files, rec.files)) { dropJournal(rec.id); return rec; }
    if (j.rev === rec.rev && !rec.deleted) {
      const p = { ...rec, files, current };
      p.rev = await put(p, rec.rev);
      dropJournal(rec.id);
      return { ...rec, ...record(p, p.rev) };
    }
    // The record changed after the journal's version: keep both.
    await insert(`${j.name} (recovered edits)`, files);
    dropJournal(rec.id);
    on.notice(`unsaved edits of "${j.name}" were found and kept as a new project`);
    return rec;
  }

  // put writes p over the record of revision base and returns the new
  // revision; Conflict when another tab wrote it (or deleted it) since.
  function put(p, base) {
    const rec = record(p, 0);
    return call("projects", "readwrite", ({ projects }, t) => t.on(projects.get(p.id), (cur) => {
      if (!cur || cur.deleted || (cur.rev !== base && !sameFiles(cur.files, rec.files))) { t.fail(new Conflict()); return; }
      rec.rev = cur.rev + 1; rec.created = cur.created; rec.name = cur.name;
      projects.put(rec); t.done(rec.rev);
    }));
  }
  async function insert(name, files, current) {
    const rec = record({ id: newID(), name: await uniqueName(name), files, current: current || mainOf(files) }, 1);
    await call("projects", "readwrite", ({ projects }) => projects.add(rec));
    announce(rec.id, rec.rev); on.list();
    return rec;
  }

  // write saves the open project now (when it changed); serialized, so
  // that a tab's own writes never conflict with each other.
  function write() {
    clearTimeout(timer); timer = null;
    const p = project, mine = seq;
    if (!db || readOnly || !p?.dirty) return chain;
    p.dirty = false;
    chain = chain.then(async () => {
      try {
        p.rev = await put(p, p.rev);
        dropJournal(p.id, mine);
        announce(p.id, p.rev);
      } catch (e) {
        if (!(e instanceof Conflict)) { p.dirty = true; on.notice("saving failed: " + (e?.message || e)); return; }
        const copy = await insert(`${p.name} (conflicting copy)`, p.files, p.current);
        dropJournal(p.id, mine);
        on.notice(`"${p.name}" was changed or deleted in another tab; your version is kept as "${copy.name}"`);
        if (project === p) await open(copy.id);
      }
    });
    return chain;
  }

  async function onMessage({ data: m }) {
    if (m.tab === tabID) return;
    on.list();
    if (!project || readOnly || m.id !== project.id || m.rev <= project.rev) return;
    if (project.dirty) { await write(); return; }
    const rec = await get(m.id);
    if (!rec || rec.deleted) { on.notice(`"${project.name}" was deleted in another tab`); return; }
    const current = rec.files.some((f) => f.filename === project.current) ? project.current : rec.current;
    project = { ...rec, current, dirty: false };
    on.open(project, false);
  }

  async function migrate() {
    let old = null;
    try { old = JSON.parse(localStorage.getItem(OLD_PROJECT) || "null"); } catch { /* not JSON: left where it is */ }
    const ok = Array.isArray(old?.files) && old.files.length > 0 && old.files.every((f) => typeof f?.filename === "string" && typeof f.content === "string");
    const rec = ok ? record({ id: newID(), name: "my project", files: old.files, current: old.current || mainOf(old.files) }, 1) : null;
    // One transaction: the project and the mark that it moved, or neither.
    await call(["projects", "meta"], "readwrite", ({ projects, meta }, t) => t.on(meta.get("migrated"), (done) => {
      if (done) return;
      if (rec) { projects.add(rec); meta.put(rec.id, "last"); }
      meta.put(true, "migrated");
    }));
  }

  async function purge() {
    const old = (await all()).filter((r) => r.deleted && Date.now() - r.deleted >= UNDO_MS);
    if (!old.length) return;
    await call("projects", "readwrite", ({ projects }) => { for (const r of old) projects.delete(r.id); });
  }

  function leaveShare() {
    if (location.pathname.startsWith("/s/")) history.replaceState(null, "", "/");
  }

  /** open opens the project id. */
  async function open(id) {
    await write();
    let rec = await get(id);
    if (!rec || rec.deleted) throw new Error("no such project");
    rec = await recover(rec);
    project = { ...rec, dirty: false }; readOnly = false;
    leaveShare();
    await setMeta("last", id).catch(() => {});
    on.open(project, false); on.list();
  }

  // openLatest opens the last opened project, or the latest changed, or a
  // new one when there is none.
  async function openLatest() {
    const last = await getMeta("last");
    const rec = await get(last ?? "").catch(() => null);
    if (rec && !rec.deleted) return open(rec.id);
    const recs = (await live()).sort((a, b) => b.updated - a.updated);
    if (recs.length) return open(recs[0].id);
    return open((await insert("untitled", DEFAULT_FILES())).id);
  }

  const store = {
    get project() { return project; },
    get readOnly() { return readOnly; },
    /** sharedSnapshot is the shared snapshot opened in this page ({id, files}), or null. */
    get sharedSnapshot() { return shared; },
    /** init opens the store: the shared snapshot share ({id, files}) when given, else the last project. */
    async init(share) {
      try {
        db = await openDB(DB_NAME, DB_VERSION, upgrade);
        await migrate();
        await purge();
        channel = new BroadcastChannel("usher.projects");
        channel.onmessage = onMessage;
      } catch (e) {
        db = null;
        on.notice("projects cannot be saved in this browser (IndexedDB: " + (e?.message || e) + "); this project lives until the page closes");
      }
      addEventListener("pagehide", () => { write(); });
      document.addEventListener("visibilitychange", () => { if (document.visibilityState === "hidden") write(); });
      if (share) { store.openShared(share); on.list(); return; }
      if (!db) { project = { id: "memory", name: "untitled", files: DEFAULT_FILES(), current: "main.asy", rev: 0 }; on.open(project, false); return; }
      await openLatest();
    },
    /** openShared opens a shared snapshot read-only; it is never saved. */
    openShared(share) {
      shared = share;
      project = { id: null, name: "shared " + share.id, shareID: share.id, files: share.files, current: mainOf(share.files) };
      readOnly = true;
      if (!location.pathname.startsWith("/s/")) history.replaceState(null, "", "/s/" + encodeURIComponent(share.id));
      on.open(project, true); on.list();
    },
    /** openLatest opens the last project (after a share could not be opened). */
    openLatest,
    open,
    /** changed records that the open project changed: it is saved shortly. */
    changed() {
      if (readOnly || !project) return;
      project.dirty = true; seq++;
      if (!db) { try { localStorage.setItem(OLD_PROJECT, JSON.stringify({ files: project.files, current: project.current })); } catch { /* full */ } return; }
      journal(project);
      clearTimeout(timer); timer = setTimeout(write, SAVE_MS);
    },
    /** flush writes pending changes now; resolves once they are stored. */
    flush: write,
    /** list returns the projects to show: [{id, name, open, shared?}], a shared snapshot first. */
    async list() {
      const out = shared ? [{ id: null, name: "shared " + shared.id, shared: true, open: readOnly }] : [];
      const recs = db ? (await live()).sort((a, b) => a.name.localeCompare(b.name) || a.created - b.created) : [project].filter(Boolean);
      for (const r of recs) out.push({ id: r.id, name: r.name, open: !readOnly && r.id === project?.id });
      return out;
    },
    /** create makes a new project of files and opens it. */
    async create(name, files) {
      await write();
      const rec = await insert(name || "untitled", files || DEFAULT_FILES());
      await open(rec.id);
      return rec;
    },
    /** rename gives project id a new name (made unique); returns it. */
    async rename(id, name) {
      await write();
      const unique = await uniqueName(name, id);
      const rev = await call("projects", "readwrite", ({ projects }, t) => t.on(projects.get(id), (cur) => {
        if (!cur || cur.deleted) { t.fail(new Error("no such project")); return; }
        projects.put({ ...cur, name: unique, rev: cur.rev + 1, updated: Date.now() }); t.done(cur.rev + 1);
      }));
      if (project?.id === id) { project.name = unique; project.rev = rev; }
      announce(id, rev); on.list();
      return unique;
    },
    /** duplicate copies project id as a new project and opens it. */
    async duplicate(id) {
      await write();
      const rec = await get(id);
      return store.create(`${rec.name} (copy)`, rec.files);
    },
    /** remove deletes project id; undo (in the notice) brings it back for UNDO_MS. */
    async remove(id) {
      await write();
      let name = "";
      const rev = await call("projects", "readwrite", ({ projects }, t) => t.on(projects.get(id), (cur) => {
        if (!cur || cur.deleted) { t.fail(new Error("no such project")); return; }
        name = cur.name;
        projects.put({ ...cur, deleted: Date.now(), rev: cur.rev + 1 }); t.done(cur.rev + 1);
      }));
      announce(id, rev);
      if (project?.id === id && !readOnly) { project = null; await openLatest(); } else on.list();
      setTimeout(() => purge().then(on.list).catch(() => {}), UNDO_MS + 100);
      on.notice(`deleted "${name}"`, () => store.restore(id));
    },
    /** restore brings back a deleted project and opens it. */
    async restore(id) {
      const rev = await call("projects", "readwrite", ({ projects }, t) => t.on(projects.get(id), (cur) => {
        if (!cur) { t.fail(new Error("the project is gone for good")); return; }
        const { deleted: _, ...rest } = cur;
        projects.put({ ...rest, rev: cur.rev + 1 }); t.done(cur.rev + 1);
      }));
      announce(id, rev);
      await open(id);
    },
    /** copyShared makes the open shared snapshot a new project of the user's and opens it. */
    async copyShared() {
      if (!readOnly || !project?.shareID) return null;
      const rec = await store.create(`copy of shared ${project.shareID.slice(0, 8)}`, project.files);
      shared = null; on.list();
      return rec;
    },
  };
  document.addEventListener("usher:new-project", (ev) => {
    const { name, files } = ev.detail || {};
    if (!Array.isArray(files) || !files.length) { on.notice("a new project needs files"); return; }
    store.create(name || "untitled", fromWire(files))
      .catch((e) => on.notice("the new project could not be made: " + (e?.message || e)));
  });
  return store;
}
