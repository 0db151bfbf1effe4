// Browser scenarios in real Chromium (Debian's /usr/bin/chromium) driven by
// playwright-core, against a running `usher serve` at $USHER_URL.
// Each scenario saves a screenshot under web/test/artifacts/.
import { chromium } from "playwright-core";
import { zipSync, unzipSync, strToU8, strFromU8 } from "fflate";
import { mkdirSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { enqueue, gate, logInJobs, newQueue, newToken, rowIds, startAgent, v1, waitJob, waitRows, waitText } from "./jobsui.mjs";

const base = process.env.USHER_URL || "http://127.0.0.1:8080";
const artifacts = join(dirname(fileURLToPath(import.meta.url)), "artifacts");
mkdirSync(artifacts, { recursive: true });
const only = process.argv[2];

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  // WebGL (the 3D view) through ANGLE on SwiftShader, Chromium's software
  // renderer: no GPU needed, and chosen explicitly (Chromium no longer
  // falls back to it on its own).
  args: ["--headless", "--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  // playwright-core gives the browser a fresh temporary --user-data-dir itself
  // (it refuses one passed in args).
});

async function freshPage() {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await ctx.newPage();
  page.on("pageerror", (e) => console.error("page error:", e.message));
  return page;
}
async function setSource(page, text) {
  await page.click(".cm-content");
  await page.keyboard.press("Control+A");
  await page.keyboard.press("Delete");
  await page.keyboard.insertText(text);
}
const svgShown = (page) => page.waitForSelector('#result img[data-format="svg"]', { timeout: 20000 });
async function waitDone(page) { await page.waitForFunction(() => /^done|^failed|^denied/.test(document.getElementById("status").textContent), null, { timeout: 30000 }); }
// waitStatus waits until the status line matches re.
async function waitStatus(page, re, timeout = 10000) {
  await page.waitForFunction((src) => new RegExp(src).test(document.getElementById("status").textContent), re.source, { timeout })
    .catch(async (e) => { throw new Error(`status ${JSON.stringify(await page.textContent("#status"))} never matched ${re}: ${e.message}`); });
}
// startSpinner starts a figure that runs until its time limit, in a page of its own.
async function startSpinner(label, timeout) {
  const p = await freshPage();
  await p.goto(base + "/");
  await setSource(p, `while(true){} // ${label} ${Date.now()}\n`);
  await p.selectOption("#timeout", String(timeout));
  await p.click("#compile");
  await waitStatus(p, /^running/);
  return p;
}
// logIn goes to path on server (base by default), which sends a browser
// without a login to /login; it logs in there with token and waits to be
// back at path. The cookie stays in the page's context.
async function logIn(page, path, token = process.env.USHER_TOKEN, server = base) {
  await page.goto(server + path);
  if (!new URL(page.url()).pathname.startsWith("/login")) throw new Error(`${path} without a login opened ${page.url()}, not the login page`);
  await page.fill("#token", token);
  await Promise.all([page.waitForURL(server + path, { timeout: 10000 }), page.click("#login")]);
}
// openDashboard opens /dashboard of server as the admin, in page.
const openDashboard = (page, server = base) => logIn(page, "/dashboard", process.env.USHER_TOKEN, server);
// expectDownload clicks download and checks the file's name and first bytes.
async function expectDownload(page, name, magic) {
  const [dl] = await Promise.all([page.waitForEvent("download", { timeout: 10000 }), page.click("#download")]);
  if (dl.suggestedFilename() !== name) throw new Error(`download named ${dl.suggestedFilename()}, want ${name}`);
  const head = readFileSync(await dl.path()).subarray(0, magic.length);
  if (!head.equals(Buffer.from(magic, "latin1"))) throw new Error(`${name} starts ${JSON.stringify(head.toString("latin1"))}, want ${JSON.stringify(magic)}`);
}
// frameWhere returns the page's first frame that satisfies pred, waiting
// for it (no await between the look and the listener: none slips through).
async function frameWhere(page, pred, what) {
  const f = page.frames().find(pred);
  if (f) return f;
  return page.waitForEvent("framenavigated", { predicate: pred, timeout: 10000 })
    .catch(() => { throw new Error(`no frame shows ${what}: ${page.frames().map((x) => x.url()).join(" ")}`); });
}
// until polls cond every 50 ms (for frames whose policy forbids
// waitForFunction's eval) and reports whether it held within timeout ms.
async function until(cond, timeout) {
  for (const end = Date.now() + timeout; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) {
    if (await cond().catch(() => false)) return true;
  }
  return false;
}
// picture reads a PNG screenshot's pixels in page (the app's page, which
// has no policy against data: images) and returns how many distinct colours
// it has and, given another screenshot of the same size, the share of
// pixels that differ.
const picture = (page, png, other) => page.evaluate(async ([a, b]) => {
  const read = async (b64) => {
    const img = new Image();
    img.src = "data:image/png;base64," + b64;
    await img.decode();
    const c = new OffscreenCanvas(img.width, img.height), x = c.getContext("2d");
    x.drawImage(img, 0, 0);
    return new Uint32Array(x.getImageData(0, 0, img.width, img.height).data.buffer);
  };
  const p = await read(a), q = b ? await read(b) : null;
  let diff = 0;
  if (q) for (let i = 0; i < p.length; i++) if (p[i] !== q[i]) diff++;
  return { colours: new Set(p).size, differs: q ? diff / p.length : null };
}, [png.toString("base64"), other?.toString("base64")]);
// shotUntil screenshots el until ok(info of picture against other) holds,
// for up to 10 s, and returns that screenshot.
async function shotUntil(page, el, other, ok, what) {
  let shot, info;
  if (await until(async () => { shot = await el.screenshot(); info = await picture(page, shot, other); return ok(info); }, 10000)) return shot;
  throw new Error(`${what}: last screenshot ${JSON.stringify(info)}`);
}
// look reads the page's theme as a user sees it.
const look = (page) => page.evaluate(() => ({
  theme: document.documentElement.dataset.theme,
  pressed: document.getElementById("theme").getAttribute("aria-pressed"),
  page: getComputedStyle(document.body).backgroundColor,
  editor: getComputedStyle(document.querySelector(".cm-editor")).backgroundColor,
}));
const fileButtons = (page) => page.$$eval("#files button", (bs) => bs.map((b) => b.textContent));
// expectAccessible runs axe-core (web/node_modules/axe-core, pinned in
// web/package.json) on page as it is now and fails on any serious or
// critical violation, printing each with the elements it found; what names
// the page's state in the message. The moderate and minor ones are listed
// in one line, for information.
const axeSource = join(dirname(fileURLToPath(import.meta.url)), "..", "node_modules", "axe-core", "axe.min.js");
async function expectAccessible(page, what) {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.addScriptTag({ path: axeSource });
  const { violations } = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  const bad = violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  const minor = violations.filter((v) => !bad.includes(v));
  if (minor.length) console.log(`     axe on ${what}, not failing: ${minor.map((v) => `${v.id} (${v.impact}, ${v.nodes.length})`).join(", ")}`);
  if (!bad.length) return;
  for (const v of bad) {
    console.log(`     axe on ${what}: [${v.impact}] ${v.id}: ${v.help}\n       ${v.helpUrl}`);
    for (const n of v.nodes.slice(0, 8)) console.log(`       - ${n.target.join(" ")}\n         ${n.failureSummary.replace(/\n\s*/g, " | ")}`);
    if (v.nodes.length > 8) console.log(`       … and ${v.nodes.length - 8} more`);
  }
  throw new Error(`${what}: ${bad.length} serious or critical accessibility violations (${bad.map((v) => v.id).join(", ")}), listed above`);
}
// devicePage opens a page in a context of the given size; a phone or a
// tablet is a touch screen with a mobile viewport.
async function devicePage(width, height, touch) {
  const ctx = await browser.newContext({ viewport: { width, height }, isMobile: touch, hasTouch: touch, deviceScaleFactor: touch ? 2 : 1 });
  const page = await ctx.newPage();
  page.on("pageerror", (e) => console.error("page error:", e.message));
  return page;
}
// onScreen says whether the element of sel is displayed and lies within
// the viewport (or, with partly, at least overlaps it by 20 px each way).
const onScreen = (page, sel, partly = false) => page.$eval(sel, (el, partly) => {
  const r = el.getBoundingClientRect(), w = innerWidth, h = innerHeight;
  if (!el.checkVisibility() || r.width === 0 || r.height === 0) return false;
  if (partly) return r.left < w - 20 && r.right > 20 && r.top < h - 20 && r.bottom > 20;
  return r.left >= 0 && r.top >= 0 && r.right <= w + 0.5 && r.bottom <= h + 0.5;
}, partly);
// expectOnScreen fails unless each selector's element is on screen.
async function expectOnScreen(page, where, sels, partly = false) {
  for (const sel of sels) if (!(await onScreen(page, sel, partly))) throw new Error(`${where}: ${sel} is not on screen`);
}
// expectNoSideScroll fails when the page is wider than the viewport.
async function expectNoSideScroll(page, where) {
  const m = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, body: document.body.scrollWidth, view: innerWidth }));
  if (m.scroll > m.view || m.body > m.view) throw new Error(`${where}: the page scrolls sideways: ${JSON.stringify(m)}`);
}
// smallTargets lists the controls on screen (outside the editor's text)
// smaller than 40 × 40 px: a checkbox counts with its label.
const smallTargets = (page) => page.evaluate(() => {
  const els = [...document.querySelectorAll("button, select, input, a[href], [role=tab]")].filter((el) => !el.closest(".cm-editor, dialog:not([open])"));
  return els.map((el) => (el.type === "checkbox" && el.closest("label")) || el).filter((el) => el.checkVisibility())
    .map((el) => ({ el, r: el.getBoundingClientRect() })).filter(({ r }) => r.width > 0 && (r.width < 40 || r.height < 40))
    .map(({ el, r }) => `${el.id || el.textContent.trim().slice(0, 20)} ${Math.round(r.width)}×${Math.round(r.height)}`);
});
// themeIs waits for the page's theme (<html data-theme>) to be want.
const themeIs = (page, want, what) => page.waitForFunction((t) => document.documentElement.dataset.theme === t, want, { timeout: 5000 })
  .catch(() => { throw new Error(what); });
const helpOpen = (page) => page.evaluate(() => !!document.getElementById("help")?.open);
const focusInHelp = (page) => page.evaluate(() => !!document.activeElement?.closest("#help"));
// phoneTabs checks the phone layout in p (390 × 844): one pane at a time
// under a tab bar, controls big enough to touch, compiling shows the
// result, and the tabs work from the keyboard.
async function phoneTabs(p) {
  const selected = () => p.$eval('.tabs [aria-selected="true"]', (t) => t.textContent);
  if ((await selected()) !== "Editor") throw new Error("the phone opens on tab " + (await selected()));
  await expectOnScreen(p, "phone", [".tabs", "#tab-files", "#tab-view", "#stop", "#share"]);
  if (await p.isVisible("#view") || await p.isVisible("#files")) throw new Error("the phone shows other panes beside the editor");
  const small = await smallTargets(p);
  if (small.length) throw new Error("controls smaller than 40 px on a phone: " + small.join(", "));
  await p.tap(".cm-content");
  await p.keyboard.press("Control+A");
  await p.keyboard.insertText(`size(3cm); draw(unitcircle, red); // phone ${Date.now()}\n`);
  await p.tap("#compile");
  await svgShown(p);
  await waitDone(p);
  if ((await selected()) !== "Result") throw new Error("compiling left the phone on tab " + (await selected()));
  await expectOnScreen(p, "phone result", ["#status", "#download", "#result"]);
  await expectOnScreen(p, "phone result", ['#result img[data-format="svg"]'], true);
  await expectNoSideScroll(p, "phone result");
  await p.screenshot({ path: join(artifacts, "layout-phone-result.png") });
  await p.tap("#tab-files");
  await expectOnScreen(p, "phone files", ["#files button", "#add-file"]);
  await p.screenshot({ path: join(artifacts, "layout-phone-files.png") });
  await p.tap('#files button:text-is("main.asy ★")');
  if ((await selected()) !== "Editor") throw new Error("opening a file left the phone on tab " + (await selected()));
  await p.tap("#tab-files");
  await p.focus("#tab-files"); // the arrow keys move between tabs
  await p.keyboard.press("ArrowRight");
  if ((await selected()) !== "Editor" || !(await p.evaluate(() => document.activeElement.id === "tab-edit"))) throw new Error("ArrowRight did not move to the editor tab");
  await expectOnScreen(p, "phone editor", ["#editor", "#compile"]);
  await expectNoSideScroll(p, "phone editor");
}
// timeToFigure loads the editor in page, clicks Compile the moment the page
// is ready (DOMContentLoaded, after app.js ran), and returns when, in ms
// after navigation start (performance.timeOrigin), the page was ready and
// the default project's SVG was decoded in #result, and the final status.
async function timeToFigure(page) {
  if (!page.__timed) {
    page.__timed = true;
    await page.addInitScript(() => addEventListener("DOMContentLoaded", () => {
      const t = (window.__figure = { ready: performance.now() });
      new MutationObserver((_, obs) => {
        const img = document.querySelector('#result img[data-format="svg"]');
        if (!img) return;
        obs.disconnect();
        img.decode().then(() => requestAnimationFrame(() => { t.shown = performance.now(); }));
      }).observe(document.getElementById("result"), { childList: true, subtree: true });
      document.getElementById("compile").click();
    }));
  }
  await page.goto(base + "/");
  await page.waitForFunction(() => window.__figure?.shown !== undefined, null, { timeout: 30000 });
  await waitDone(page);
  return { ...(await page.evaluate(() => window.__figure)), status: await page.textContent("#status") };
}
// seedOldProject makes page's browser hold a project as the app before
// IndexedDB kept it: localStorage "usher.project", set before the app's
// first load in this page only.
async function seedOldProject(page, content) {
  const project = { files: [{ filename: "main.asy", main: true, content }], current: "main.asy" };
  await page.addInitScript((p) => {
    if (sessionStorage.getItem("seeded")) return;
    sessionStorage.setItem("seeded", "1");
    localStorage.setItem("usher.project", p);
  }, JSON.stringify(project));
}
// editorText is the editor's whole text (CodeMirror's document), or null.
const editorText = (page) => page.evaluate(() => document.querySelector(".cm-content")?.cmTile?.root?.view?.state.doc.toString() ?? null);
// editorShows waits until the editor holds exactly text.
async function editorShows(page, text) {
  await page.waitForFunction((t) => document.querySelector(".cm-content")?.cmTile?.root?.view?.state.doc.toString() === t, text, { timeout: 10000 })
    .catch(async () => { throw new Error(`the editor shows ${JSON.stringify(await editorText(page))}, want ${JSON.stringify(text)}`); });
}
// lieAboutSize sets the uncompressed size that zip declares for name (in
// its local header and its directory) to size: a zip bomb that lies.
function lieAboutSize(zip, name, size) {
  const dv = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
  for (let i = 0; i + 4 <= zip.length; i++) {
    const sig = dv.getUint32(i, true);
    const [at, nameAt] = sig === 0x04034b50 ? [22, 30] : sig === 0x02014b50 ? [24, 46] : [0, 0];
    if (!at) continue;
    const len = dv.getUint16(i + (sig === 0x04034b50 ? 26 : 28), true);
    if (strFromU8(zip.subarray(i + nameAt, i + nameAt + len)) === name) dv.setUint32(i + at, size, true);
  }
  return zip;
}
// postShare shares files through the API and returns {id, url}.
async function postShare(files) {
  const r = await fetch(base + "/api/shares", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ files }) });
  if (r.status >= 300) throw new Error(`POST /api/shares: ${r.status} ${await r.text()}`);
  return r.json();
}
// projectNames lists the project list's names (the open one too).
const projectNames = async (page) => {
  await page.waitForSelector("#projects button", { timeout: 10000 }).catch(() => { throw new Error("no project list"); });
  return page.$$eval("#projects button", (bs) => bs.map((b) => b.dataset.name));
};
// openProject opens the project named name from the list.
async function openProject(page, name) {
  await page.click(`#projects button[data-name="${name}"]`);
  await page.waitForSelector(`#projects button[data-name="${name}"][aria-current]`, { timeout: 5000 });
}

const scenarios = {
  async "compile with Ctrl-Enter shows the SVG"(page) {
    await page.goto(base + "/");
    await setSource(page, "size(3cm);\ndraw((0,0)--(1,1)--(2,0)--cycle, red);\n");
    await page.keyboard.press("Control+Enter");
    await svgShown(page);
    await waitDone(page);
    const ok = await page.$eval("#result img", (img) => img.complete && img.naturalWidth > 0);
    if (!ok) throw new Error("the SVG image did not load");
  },
  async "a syntax error marks its line"(page) {
    await page.goto(base + "/");
    await setSource(page, "size(3cm);\ndraw((0,0)--(1,1));\npair p = (1,2;\n");
    await page.keyboard.press("Control+Enter");
    await page.waitForSelector("#console .diag", { timeout: 20000 });
    const text = await page.textContent("#console .diag");
    if (!/main\.asy: 3\.\d+:/.test(text)) throw new Error("console diagnostic is not on line 3: " + text);
    await page.waitForSelector(".cm-lintRange-error", { timeout: 5000 });
    const line = await page.evaluate(() => {
      const el = document.querySelector(".cm-lintRange-error");
      const lines = [...document.querySelectorAll(".cm-content .cm-line")];
      return lines.findIndex((l) => l.contains(el)) + 1;
    });
    if (line !== 3) throw new Error("underline is on line " + line + ", want 3");
    if (!(await page.$(".cm-gutter-lint .cm-lint-marker-error"))) throw new Error("no gutter marker");
  },
  async "second compile of an unchanged project sends no file bytes"(page) {
    await page.goto(base + "/");
    await setSource(page, `size(2cm);\ndraw(unitcircle);\nlabel("${Date.now()}", (0,0));\n`);
    let binary = 0, adds = [];
    page.on("websocket", (ws) => ws.on("framesent", (f) => {
      if (typeof f.payload !== "string") binary++;
      else if (f.payload.startsWith("add ")) adds.push(JSON.parse(f.payload.slice(4)));
    }));
    await page.keyboard.press("Control+Enter");
    await waitDone(page);
    if (binary !== 1) throw new Error(`first compile sent ${binary} binary frames, want 1`);
    binary = 0; adds = [];
    await page.click("#compile"); // the status leaves "done" at once: run() sets it in the click
    await waitDone(page);
    if (!/^done/.test(await page.textContent("#status"))) throw new Error("second compile: " + (await page.textContent("#status")));
    if (binary !== 0) throw new Error(`second compile sent ${binary} binary frames, want 0`);
    if (!adds.length || !adds.every((a) => a.restore === true)) throw new Error("second compile did not restore: " + JSON.stringify(adds));
  },
  async "share link reopens the same files in a fresh context"(page) {
    await page.goto(base + "/");
    const src = `size(2cm);\ndraw(unitsquare); // shared ${Date.now()}\n`;
    await setSource(page, src);
    await page.click("#share");
    await page.waitForFunction(() => /\/s\//.test(document.getElementById("share-url").value), null, { timeout: 10000 });
    const url = await page.inputValue("#share-url");
    const other = await freshPage();
    await other.goto(url);
    await other.waitForFunction((s) => document.querySelector(".cm-content")?.innerText.includes(s), src.split("\n")[1], { timeout: 10000 });
    if (await other.isHidden("#banner")) throw new Error("read-only banner not shown");
    await other.screenshot({ path: join(artifacts, "share-reopened.png") });
    await other.context().close();
    // The operator deletes the share: the link then says so.
    const id = url.split("/s/")[1];
    const del = await fetch(`${base}/api/shares/${id}`, { method: "DELETE", headers: { authorization: "Bearer " + process.env.USHER_TOKEN } });
    if (del.status !== 204) throw new Error("operator delete: " + del.status);
    const gone = await freshPage();
    await gone.goto(url);
    await waitStatus(gone, /deleted by the operator/);
    await gone.context().close();
  },
  async "live preview updates after an edit"(page) {
    await page.goto(base + "/");
    await setSource(page, "size(2cm);\ndraw(unitcircle, blue);\n");
    await page.check("#live");
    await page.click(".cm-content");
    await page.keyboard.press("Control+End");
    await page.keyboard.type("draw((0,0)--(1,0), red);\n");
    await svgShown(page);
    const first = await page.$eval("#result img", (i) => i.src);
    await page.keyboard.type("draw((0,0)--(0,1), green);\n");
    await page.waitForFunction((s) => { const i = document.querySelector("#result img"); return i && i.src !== s; }, first, { timeout: 20000 });
  },
  async "queue position shows when the backends are busy"(page) {
    // 30 s blockers (the test server allows two slow tasks): a shorter one
    // could end before the queued tasks are even sent on a loaded machine.
    const blockers = [await startSpinner("blocker 0", 30000), await startSpinner("blocker 1", 30000)];
    const ahead = await freshPage();
    await ahead.goto(base + "/");
    await setSource(ahead, `size(1cm); draw(unitsquare); // ${Date.now()}\n`);
    await ahead.click("#compile");
    await waitStatus(ahead, /^queued: #1 in line, ETA \d+\.\d s$/);
    await page.goto(base + "/");
    await setSource(page, `size(1cm); draw(unitcircle); // ${Date.now()}\n`);
    await page.click("#compile");
    await waitStatus(page, /^queued: #2 in line, ETA \d+\.\d s$/);
    await page.screenshot({ path: join(artifacts, "queue-position-shows-while-queued.png") });
    await ahead.context().close(); // the task ahead leaves the queue
    await waitStatus(page, /^queued: #1 in line/);
    for (const p of blockers) await p.context().close(); // frees both backends
    await waitDone(page);
    if (!/^done/.test(await page.textContent("#status"))) throw new Error("the queued task did not succeed: " + (await page.textContent("#status")));
  },
  async "the dashboard shows a running task"(page) {
    const runner = await freshPage();
    await runner.goto(base + "/");
    await setSource(runner, `while(true){} // dash ${Date.now()}\n`);
    await runner.selectOption("#timeout", "30000"); // outlasts a slow page load; closing the runner stops it
    await runner.click("#compile");
    await openDashboard(page);
    await page.waitForFunction(() => { const r = document.querySelector("#running tbody td"); return r && !r.classList.contains("empty"); }, null, { timeout: 10000 });
    if (await page.textContent("#leader")) throw new Error("single-node mode names a leader: " + (await page.textContent("#leader")));
    await runner.context().close();
  },
  async "a multi-node dashboard names the leading scheduler, and says when none leads"(page) {
    const multi = process.env.USHER_MULTINODE_URL, pid = Number(process.env.USHER_SCHEDULER_PID);
    if (!multi || !pid) throw new Error("set USHER_MULTINODE_URL and USHER_SCHEDULER_PID to a queue server of multi-node mode and its only scheduler (scripts/webtest.sh does)");
    const leader = (re) => page.waitForFunction((src) => new RegExp(src).test(document.getElementById("leader").textContent), re.source, { timeout: 15000 })
      .catch(async () => { throw new Error(`#leader ${JSON.stringify(await page.textContent("#leader"))} never matched ${re}`); });
    await openDashboard(page, multi); // the queue server checks the admin token in Redis
    await leader(/^leader: webtest-sched$/);
    if ((await page.getAttribute("#leader", "class")) === "warn") throw new Error("the leading node is shown as a warning");
    await page.screenshot({ path: join(artifacts, "dashboard-multi-node.png"), fullPage: true });
    process.kill(pid, "SIGTERM"); // the scheduler gives its lease up and exits
    await leader(/^no scheduler leads/);
    if ((await page.getAttribute("#leader", "class")) !== "warn") throw new Error("'no scheduler leads' is not shown as a warning");
  },
  async "the dashboard shows generic job queues, keys and agents"(page) {
    const v1 = async (method, path, body, type = "application/json") => {
      const r = await fetch(base + path, { method, body: typeof body === "string" ? body : JSON.stringify(body),
        headers: { Authorization: "Bearer " + process.env.USHER_TOKEN, "Content-Type": type } });
      if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
      return r.status === 204 ? null : r.json();
    };
    await v1("POST", "/v1/queues", { name: "scan" });
    await v1("PUT", "/v1/limits", { pattern: "net:*", limit: 1 });
    await v1("POST", "/v1/queues/scan/targets", "10.0.0.1\n10.0.0.2\n", "text/plain");
    await v1("POST", "/v1/agent/lease", { agent: "scanner-1", slots: 4 }); // takes one; the limit holds the other
    await openDashboard(page);
    const row = (table, first) => page.waitForFunction(([t, f]) => [...document.querySelectorAll(`#${t} tbody tr`)]
      .map((tr) => [...tr.cells].map((c) => c.textContent)).find((cells) => cells[0] === f), [table, first], { timeout: 10000 })
      .then((h) => h.jsonValue());
    const q = await row("jobqueues", "scan");
    if (q[1] !== "1" || q[2] !== "1" || q[5] !== "1" || q[6] !== "net:10.0.0.0/24 (1)") throw new Error("scan row: " + q.join(" | "));
    const k = await row("jobkeys", "net:10.0.0.0/24");
    if (k[1] !== "1 / 1" || k[2] !== "1") throw new Error("key row: " + k.join(" | "));
    const a = await row("agents", "scanner-1");
    if (a[1] !== "1 / 4") throw new Error("agent row: " + a.join(" | "));
    await page.screenshot({ path: join(artifacts, "dashboard-generic-jobs.png"), fullPage: true });
    await v1("POST", "/v1/agent/leave", { agent: "scanner-1" });
  },
  async "the dashboard is behind the admin login, and logging out closes it"(page) {
    await page.goto(base + "/dashboard");
    if (new URL(page.url()).pathname !== "/login") throw new Error("/dashboard without a login opened " + page.url());
    await page.fill("#token", "usher_not-a-token-of-this-server");
    await page.click("#login");
    await page.waitForSelector("#error");
    if (!/not known/.test(await page.textContent("#error"))) throw new Error("wrong token: " + (await page.textContent("#error")));
    await page.screenshot({ path: join(artifacts, "login-refused.png") });
    await page.fill("#token", process.env.USHER_TOKEN);
    await Promise.all([page.waitForURL(base + "/dashboard", { timeout: 10000 }), page.click("#login")]);
    await page.waitForFunction(() => document.getElementById("conn").textContent === "live", null, { timeout: 10000 })
      .catch(async () => { throw new Error("the dashboard's feed is not live: " + (await page.textContent("#conn"))); });
    const cookie = (await page.context().cookies()).find((c) => c.name === "usher_token");
    if (!cookie || !cookie.httpOnly || cookie.sameSite !== "Lax") throw new Error("login cookie: " + JSON.stringify(cookie));
    if (await page.evaluate(() => document.cookie.includes("usher_token"))) throw new Error("page script can read the login cookie");
    await page.goto(base + "/login");
    if (!/admin/.test(await page.textContent("#who"))) throw new Error("login page does not say who is logged in");
    await Promise.all([page.waitForURL(base + "/login", { timeout: 10000 }), page.click("#logout")]);
    await page.goto(base + "/dashboard");
    if (new URL(page.url()).pathname !== "/login") throw new Error("/dashboard after logging out opened " + page.url());
  },
  async "with --auth the editor needs a login and compiles with its cookie"(page) {
    const auth = process.env.USHER_AUTH_URL;
    if (!auth) throw new Error("set USHER_AUTH_URL to a server started with --auth and --admin-token $USHER_TOKEN (scripts/webtest.sh does)");
    const r = await fetch(auth + "/v1/tokens", { method: "POST", body: JSON.stringify({ name: "webtest-client", role: "client" }),
      headers: { Authorization: "Bearer " + process.env.USHER_TOKEN, "Content-Type": "application/json" } });
    if (r.status !== 201) throw new Error(`POST /v1/tokens: ${r.status} ${await r.text()}`);
    const { token } = await r.json();
    await logIn(page, "/", token, auth);
    await page.screenshot({ path: join(artifacts, "auth-editor.png") });
    await setSource(page, `size(2cm); draw(unitcircle); // auth ${Date.now()}\n`);
    await page.click("#compile"); // the WebSocket carries the login cookie
    await svgShown(page);
    await waitDone(page);
    if (!/^done/.test(await page.textContent("#status"))) throw new Error("compile with a login: " + (await page.textContent("#status")));
    await page.goto(auth + "/dashboard"); // a client is no operator
    if (new URL(page.url()).pathname !== "/login" || !/client/.test(await page.textContent("#who"))) throw new Error("a client's /dashboard opened " + page.url());
  },
  async "Stop ends a long-running figure and frees its backend"(page) {
    await page.goto(base + "/");
    await setSource(page, `while(true){} // stopped ${Date.now()}\n`);
    await page.selectOption("#timeout", "30000"); // it would run 30 s if not stopped
    await page.click("#compile");
    await waitStatus(page, /^running$/);
    await page.click("#stop");
    await waitStatus(page, /^stopped$/);
    if (!(await page.isDisabled("#stop"))) throw new Error("Stop still enabled after stopping");
    // The server lets the slow task go at once, not at its 30 s limit.
    const dash = await freshPage();
    await openDashboard(dash);
    await dash.waitForFunction(() => document.getElementById("conn").textContent === "live" &&
      ![...document.querySelectorAll("#running tbody tr")].some((tr) => tr.cells[1]?.textContent === "slow"), null, { timeout: 5000 })
      .catch(() => { throw new Error("the stopped task still runs on the server"); });
    await dash.context().close();
    const after = [await page.textContent("#status"), await page.textContent("#elapsed")];
    if (after[0] !== "stopped" || after[1] !== "") throw new Error("the stopped run's timer still writes the status: " + after.join(" "));
    await setSource(page, `size(2cm); draw(unitcircle); // after stop ${Date.now()}\n`);
    await page.click("#compile");
    await waitDone(page);
    if (!/^done/.test(await page.textContent("#status"))) throw new Error("compile after Stop: " + (await page.textContent("#status")));
  },
  async "files are added, renamed and deleted, and survive a reload"(page) {
    const answers = [];
    page.on("dialog", (d) => d.accept(d.type() === "prompt" ? answers.shift() : undefined));
    const current = () => page.textContent("#files button[aria-current]");
    await page.goto(base + "/");
    answers.push("lib.asy");
    await page.click("#add-file");
    if ((await current()) !== "lib.asy") throw new Error("the new file is not open: " + (await current()));
    await setSource(page, "real r = 0.5;\n");
    answers.push("radius.asy");
    await page.click("#rename-file");
    answers.push("scratch.asy");
    await page.click("#add-file");
    await page.click("#delete-file");
    await page.click('#files button:text-is("main.asy ★")');
    await setSource(page, "import radius;\nsize(2cm);\ndraw(scale(r)*unitcircle);\n");
    await page.reload();
    await page.waitForSelector("#files button");
    const names = await fileButtons(page);
    if (names.join(",") !== "main.asy ★,radius.asy") throw new Error("files after reload: " + names.join(","));
    await page.click('#files button:text-is("radius.asy")');
    await page.waitForFunction(() => document.querySelector(".cm-content").innerText.includes("real r = 0.5;"), null, { timeout: 5000 });
    await page.click("#compile"); // main.asy imports the renamed file
    await svgShown(page);
    await waitDone(page);
    if (!/^done/.test(await page.textContent("#status"))) throw new Error("compile: " + (await page.textContent("#status")));
  },
  async "the theme toggle switches dark and light and survives a reload"(page) {
    await page.emulateMedia({ colorScheme: "light" });
    await page.goto(base + "/");
    const light = await look(page);
    if (light.theme !== "light" || light.pressed !== "false") throw new Error("not light at first: " + JSON.stringify(light));
    await page.click("#theme");
    const dark = await look(page);
    if (dark.theme !== "dark" || dark.pressed !== "true" || dark.page === light.page || dark.editor === light.editor) throw new Error(`toggle: ${JSON.stringify(light)} → ${JSON.stringify(dark)}`);
    await page.screenshot({ path: join(artifacts, "theme-dark.png") });
    await page.reload();
    await page.waitForSelector(".cm-editor");
    if (JSON.stringify(await look(page)) !== JSON.stringify(dark)) throw new Error("dark lost on reload: " + JSON.stringify(await look(page)));
    await page.focus("#theme"); // and by keyboard back to light
    await page.keyboard.press("Enter");
    await page.reload();
    await page.waitForSelector(".cm-editor");
    if (JSON.stringify(await look(page)) !== JSON.stringify(light)) throw new Error("light lost on reload: " + JSON.stringify(await look(page)));
  },
  async "a 3D figure turns under the mouse in a sandboxed frame, and downloads as PNG"(page) {
    await page.goto(base + "/");
    await setSource(page, `import three;\nsize(6cm);\ncurrentprojection=orthographic(4,2,3);\n` +
      `draw(unitcube, yellow);\ndraw(O--1.5X, red+linewidth(2)); draw(O--1.5Y, green+linewidth(2)); draw(O--1.5Z, blue+linewidth(2)); // ${Date.now()}\n`);
    await page.selectOption("#format", "png"); // a user's format choice: the view is 3D anyway, the download png
    await page.click("#compile");
    const frame = await page.waitForSelector('#result iframe[data-format="html"]', { timeout: 30000 });
    await waitDone(page);
    if (!/^done/.test(await page.textContent("#status"))) throw new Error("3D compile: " + (await page.textContent("#status")));
    if ((await frame.getAttribute("sandbox")) !== "allow-scripts") throw new Error("frame sandbox: " + (await frame.getAttribute("sandbox")));
    // Inside: asy's viewer, no script from anywhere, an opaque origin that
    // reaches neither the app's page nor its storage.
    const inner = await frame.contentFrame();
    const seen = await inner.evaluate(() => {
      const blocked = (f) => { try { f(); return false; } catch { return true; } };
      return { canvas: !!document.querySelector("canvas#Asymptote"), src: document.querySelectorAll("script[src]").length,
        origin: self.origin, parent: blocked(() => parent.document.title), storage: blocked(() => localStorage.length) };
    });
    if (JSON.stringify(seen) !== JSON.stringify({ canvas: true, src: 0, origin: "null", parent: true, storage: true })) throw new Error("inside the frame: " + JSON.stringify(seen));
    const first = await shotUntil(page, frame, null, (i) => i.colours > 10, "the WebGL canvas stays blank");
    const box = await frame.boundingBox();
    const [x, y] = [box.x + box.width / 2, box.y + box.height / 2];
    await page.mouse.move(x, y);
    await page.mouse.down();
    await page.mouse.move(x + 120, y + 60, { steps: 12 });
    await page.mouse.up();
    const turned = await shotUntil(page, frame, first, (i) => i.differs > 0.01, "dragging did not turn the figure");
    await page.screenshot({ path: join(artifacts, "3d-turned.png") });
    await page.click("#reset-view");
    await shotUntil(page, await page.waitForSelector("#result iframe"), first, (i) => i.colours > 10 && i.differs < 0.01, "reset view did not bring back the first view");
    if ((await picture(page, turned, first)).differs <= 0.01) throw new Error("the turned view equals the first");
    await expectDownload(page, "main.png", "\x89PNG");
  },
  async "PNG and PDF results are shown and downloaded with the right type"(page) {
    await page.goto(base + "/");
    await setSource(page, `size(2cm); fill(unitcircle, red); // formats ${Date.now()}\n`);
    await page.selectOption("#format", "png");
    await page.click("#compile");
    await page.waitForSelector('#result img[data-format="png"]', { timeout: 20000 });
    await waitDone(page);
    if (!(await page.$eval("#result img", (img) => img.complete && img.naturalWidth > 0))) throw new Error("the PNG did not load");
    await page.screenshot({ path: join(artifacts, "result-png.png") });
    await expectDownload(page, "main.png", "\x89PNG");
    await page.selectOption("#format", "pdf");
    await page.click("#compile");
    await page.waitForSelector('#result object[data-format="pdf"]', { timeout: 20000 });
    await waitDone(page);
    const pdf = await page.$eval("#result object", async (o) => {
      const r = await fetch(o.data);
      const head = new Uint8Array(await r.arrayBuffer()).slice(0, 5);
      return { url: o.data, type: o.type, served: r.headers.get("content-type"), head: String.fromCharCode(...head) };
    });
    if (pdf.type !== "application/pdf" || pdf.served !== "application/pdf" || pdf.head !== "%PDF-") throw new Error("PDF result: " + JSON.stringify(pdf));
    // Chromium's PDF viewer opens in the <object>'s frame and counts the pages.
    const viewer = await frameWhere(page, (f) => f.parentFrame()?.url() === pdf.url, "the PDF viewer");
    const pages = () => viewer.evaluate(() => document.querySelector("pdf-viewer")?.shadowRoot?.querySelector("viewer-toolbar")?.docLength);
    if (!(await until(async () => (await pages()) === 1, 10000))) throw new Error(`the PDF viewer shows ${await pages()} pages, want 1`);
    await page.screenshot({ path: join(artifacts, "result-pdf.png") });
    await expectDownload(page, "main.pdf", "%PDF-");
  },
  async "a script in an SVG result opened directly cannot reach usher's origin"(page) {
    // The figure's svg carries a raw <script> that copies the page's cookie
    // and storage into an attribute of the document.
    const probe = "document.documentElement.setAttribute('data-leak', document.cookie + ' ' + localStorage.getItem('secret'))";
    const figure = `label("\\special{dvisvgm:raw <script>${probe}</script>}"); // ${Date.now()}\n`;
    await page.goto(base + "/");
    await page.evaluate(() => { document.cookie = "secret=usher-cookie; path=/"; localStorage.setItem("secret", "usher-storage"); });
    const res = await page.evaluate(async (src) => {
      const r = await fetch("/api/render?format=svg", { method: "POST", headers: { "Content-Type": "text/plain" }, body: src });
      return { status: r.status, loc: r.headers.get("Content-Location"), body: await r.text() };
    }, figure);
    if (res.status !== 200 || !res.body.includes("<script>") || !res.loc) throw new Error(`render: ${res.status} ${res.loc} ${res.body.slice(0, 200)}`);
    // Control: the same bytes as a blob: URL of usher's page run the script
    // in usher's origin, and it reads the storage (a blob: document has no
    // cookies of its own).
    await page.evaluate((svg) => { location.href = URL.createObjectURL(new Blob([svg], { type: "image/svg+xml" })); }, res.body);
    await page.waitForURL(/^blob:/);
    const control = await page.evaluate(() => document.documentElement.getAttribute("data-leak"));
    if (!control?.endsWith(" usher-storage")) throw new Error("control: the probe read " + JSON.stringify(control));
    // The result's own URL, opened directly: the script does not run, and
    // the document has an opaque origin with neither cookie nor storage.
    const resp = await page.goto(base + res.loc);
    const csp = resp.headers()["content-security-policy"] || "";
    const seen = await page.evaluate(() => {
      const blocked = (f) => { try { f(); return false; } catch { return true; } };
      return { leak: document.documentElement.getAttribute("data-leak"), origin: self.origin,
        cookie: blocked(() => document.cookie), storage: blocked(() => localStorage.length) };
    });
    if (JSON.stringify(seen) !== JSON.stringify({ leak: null, origin: "null", cookie: true, storage: true })) {
      throw new Error(`opened directly (CSP ${csp}): ${JSON.stringify(seen)}`);
    }
    await page.screenshot({ path: join(artifacts, "render-svg-script-sandboxed.png") });
  },
  async "an html result opened directly draws its WebGL figure in an opaque origin"(page) {
    await page.goto(base + "/");
    const res = await page.evaluate(async (src) => {
      const r = await fetch("/api/render?format=html", { method: "POST", headers: { "Content-Type": "text/plain" }, body: src });
      return { status: r.status, loc: r.headers.get("Content-Location") };
    }, `import three; size(3cm); draw(unitsphere, red); // ${Date.now()}\n`);
    if (res.status !== 200 || !res.loc) throw new Error("render: " + JSON.stringify(res));
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    await page.goto(base + res.loc);
    const seen = await page.evaluate(() => {
      const blocked = (f) => { try { f(); return false; } catch { return true; } };
      return { canvas: !!document.querySelector("canvas"), origin: self.origin, cookie: blocked(() => document.cookie), storage: blocked(() => localStorage.length) };
    });
    if (JSON.stringify(seen) !== JSON.stringify({ canvas: true, origin: "null", cookie: true, storage: true })) throw new Error("html result: " + JSON.stringify(seen));
    const shot = await page.screenshot({ path: join(artifacts, "render-html-direct.png") });
    await page.goto(base + "/");
    const info = await picture(page, shot);
    if (info.colours <= 10) throw new Error("the WebGL figure stays blank: " + JSON.stringify(info));
    if (errors.length) throw new Error("errors in the html result: " + errors.join(" | "));
  },
  async "embed.js on another origin's page turns asy blocks into figures and errors"(page) {
    // A forum page served from its own origin (another port, which the
    // server allows with --allowed-origins) loads usher's embed script
    // with an extra selector and a 10 s time limit (a default task's 3 s
    // may run out on a loaded machine).
    const forum = createServer((req, resp) => {
      resp.setHeader("Content-Type", "text/html; charset=utf-8");
      resp.end(`<!doctype html><title>forum</title>
<p>A circle:</p><pre class="asy" id="good">size(2cm); draw(unitcircle, blue); // ${Date.now()}</pre>
<p>A typo:</p><pre class="asy" id="bad">draw((0,0)--(1,1)</pre>
<p>Wiki markup:</p><div class="figure" id="wiki">size(2cm); fill(unitsquare, red); // ${Date.now()}</div>
<script src="${base}/embed.js" data-selector="pre.asy, div.figure" data-timeout="10000" defer></script>`);
    });
    await new Promise((r) => forum.listen(Number(process.env.USHER_FORUM_PORT), "127.0.0.1", r));
    try {
      const forumURL = `http://localhost:${forum.address().port}/`;
      const renders = [];
      page.on("request", (r) => { if (r.url().includes("/api/render?")) renders.push(r.url()); });
      await page.goto(forumURL);
      const figures = await page.waitForFunction(() => {
        const imgs = [...document.querySelectorAll("img.asy-figure")];
        return imgs.length === 2 && imgs.every((i) => i.complete && i.naturalWidth > 0) ? imgs.map((i) => i.src) : null;
      }, null, { timeout: 30000 }).then((h) => h.jsonValue());
      if (!figures.every((src) => src.startsWith(base + "/api/render/"))) throw new Error("figures from " + figures.join(" "));
      if (renders.length !== 3 || !renders.every((u) => new URL(u).searchParams.get("timeout") === "10000")) throw new Error("data-timeout not sent: " + renders.join(" "));
      const err = await page.waitForSelector("#bad + pre.asy-error", { timeout: 30000 });
      const text = await err.textContent();
      if (!/figure\.asy: \d+\.\d+: unexpected end of input/.test(text)) throw new Error("error shown: " + JSON.stringify(text));
      if (await page.$("#good, #wiki")) throw new Error("a block that rendered is still there");
      await page.screenshot({ path: join(artifacts, "embed-forum.png") });
    } finally {
      forum.close();
    }
  },
  // --- the shell pane (shell.js) ---
  async "shell: write(1+2) answers 3, history recalls it, a time limit and a denial are shown apart"(page) {
    await page.goto(base + "/");
    await page.click("#shell-pane summary");
    await page.uncheck("#shell-files"); // a bare shell: no file at all
    await page.click("#shell-restart");
    const log = () => page.textContent("#shell-log");
    const until = (re, timeout = 30000) => page.waitForFunction((src) => new RegExp(src).test(document.getElementById("shell-log").textContent), re.source, { timeout })
      .catch(async (e) => { throw new Error(`shell log ${JSON.stringify(await log())} never matched ${re}: ${e.message}`); });
    await page.fill("#shell-input", "write(1+2);");
    await page.press("#shell-input", "Enter");
    await until(/> write\(1\+2\);\n3\n/);
    // History: up recalls the last line, down goes back to the draft.
    await page.fill("#shell-input", "draft");
    await page.press("#shell-input", "ArrowUp");
    if (await page.inputValue("#shell-input") !== "write(1+2);") throw new Error("ArrowUp did not recall write(1+2);");
    await page.press("#shell-input", "ArrowDown");
    if (await page.inputValue("#shell-input") !== "draft") throw new Error("ArrowDown did not return to the draft");
    // A time limit: a new session limited to 3 s that loops.
    await page.selectOption("#shell-timeout", "3000");
    await page.click("#shell-restart");
    await page.fill("#shell-input", "while(true) {}");
    await page.press("#shell-input", "Enter");
    const halt = await page.waitForSelector("#shell-log .shell-halt", { timeout: 30000 });
    const text = await halt.textContent();
    if (!text.includes("Execution aborted due to the time limit (3000ms)")) throw new Error("time limit shown as " + JSON.stringify(text));
    const styled = await halt.evaluate((el) => getComputedStyle(el).fontWeight !== getComputedStyle(el.parentElement).fontWeight);
    if (!styled) throw new Error("the time limit is not styled apart from output");
    // A denial: both backends busy, so an interactive task is refused.
    const spinners = [await startSpinner("shell-a", 10000), await startSpinner("shell-b", 10000)];
    try {
      await page.selectOption("#shell-timeout", "");
      await page.click("#shell-restart");
      const denied = await page.waitForSelector("#shell-log .shell-denied", { timeout: 20000 });
      if (!(await denied.textContent()).includes("no free backend for an interactive task")) throw new Error("denial shown as " + JSON.stringify(await denied.textContent()));
    } finally {
      for (const p of spinners) await p.context().close();
    }
    const role = await page.getAttribute("#shell-log", "role");
    const label = await page.getAttribute("#shell-input", "aria-label");
    if (role !== "log" || !label) throw new Error(`shell log role ${role}, input label ${label}`);
    await page.screenshot({ path: join(artifacts, "shell.png") });
  },

  // --- What the editor knows about asy (complete.js, gallery.js, the TeX page).
  async "symbols: dra completes to draw with its signatures, hover shows them, import gr offers graph"(page) {
    await page.goto(base + "/");
    await page.waitForFunction(() => performance.getEntriesByName(location.origin + "/api/symbols").length > 0, null, { timeout: 10000 });
    await setSource(page, "size(4cm);\n");
    await page.keyboard.press("Control+End");
    // Keystroke to completion list: from the keydown of "d" (capture
    // phase, before CodeMirror) to the list in the DOM, nine times.
    const times = [];
    for (let i = 0; i < 9; i++) {
      await page.evaluate(() => {
        window.__t = {};
        window.addEventListener("keydown", (e) => { if (e.key === "d") window.__t.key = performance.now(); }, { capture: true, once: true });
        const mo = new MutationObserver(() => {
          if (document.querySelector(".cm-tooltip-autocomplete")) { window.__t.list = performance.now(); mo.disconnect(); }
        });
        mo.observe(document.body, { childList: true, subtree: true });
      });
      await page.keyboard.press("d");
      await page.waitForSelector(".cm-tooltip-autocomplete", { timeout: 5000 });
      times.push(await page.evaluate(() => window.__t.list - window.__t.key));
      await page.keyboard.press("Escape");
      await page.keyboard.press("Backspace");
      await until(async () => !(await page.$(".cm-tooltip-autocomplete")), 2000);
    }
    times.sort((a, b) => a - b);
    console.log(`     keystroke to completion list: median ${times[4].toFixed(1)} ms, min ${times[0].toFixed(1)}, max ${times[8].toFixed(1)} (9 tries)`);
    await page.keyboard.type("dra");
    const opt = await page.waitForSelector('.cm-tooltip-autocomplete li[aria-selected="true"]', { timeout: 5000 });
    const label = await opt.$eval(".cm-completionLabel", (e) => e.textContent);
    if (label !== "draw") throw new Error(`first completion of dra is ${label}`);
    const info = await page.waitForSelector(".cm-completionInfo .cm-asy-signatures", { timeout: 5000 }).then((e) => e.textContent());
    if (!/void draw\(picture pic=<default>, /.test(info)) throw new Error("draw's info: " + info.slice(0, 200));
    await page.keyboard.press("Enter");
    await page.keyboard.type("(unitcircle);\nimport gr");
    await page.waitForFunction(() => [...document.querySelectorAll(".cm-tooltip-autocomplete .cm-completionLabel")].some((e) => e.textContent === "graph"), null, { timeout: 5000 })
      .catch(() => { throw new Error("import gr does not offer graph"); });
    await page.screenshot({ path: join(artifacts, "symbols-import.png") });
    await page.keyboard.press("Escape");
    // Hover over draw on line 2.
    const word = await page.evaluateHandle(() => [...document.querySelectorAll(".cm-line")].find((l) => l.textContent.startsWith("draw(")));
    const box = await word.boundingBox();
    await page.mouse.move(box.x + 12, box.y + box.height / 2);
    const hover = await page.waitForSelector(".cm-tooltip-hover .cm-asy-signatures", { timeout: 5000 }).then((e) => e.textContent());
    if (!/void draw\(/.test(hover)) throw new Error("hover over draw: " + hover.slice(0, 200));
    // The queue server of multi-node mode asks its own asy too.
    const multi = await (await fetch(process.env.USHER_MULTINODE_URL + "/api/symbols")).json();
    if (!multi.symbols?.some((s) => s.name === "draw") || !multi.modules?.includes("graph")) throw new Error("multi-node /api/symbols: " + JSON.stringify(multi).slice(0, 200));
  },
  async "gallery: choose an example from the keyboard, compile it, see the figure"(page) {
    await page.goto(base + "/");
    await page.click("#examples");
    await page.waitForSelector("#gallery[open] button.gallery-card", { timeout: 10000 });
    const cards = await page.$$eval("#gallery button.gallery-card", (bs) => bs.length);
    if (cards < 20) throw new Error(`${cards} examples in the gallery`);
    if (!(await page.evaluate(() => document.activeElement?.classList.contains("gallery-card")))) throw new Error("the gallery does not focus its first card");
    await page.addScriptTag({ path: join(dirname(fileURLToPath(import.meta.url)), "..", "node_modules", "axe-core", "axe.min.js") });
    const axe = await page.evaluate(async () => (await window.axe.run("#gallery")).violations.map((v) => `${v.id}: ${v.nodes.length}`));
    if (axe.length) throw new Error("accessibility of the gallery: " + axe.join(", "));
    // Escape closes it; open again and choose "Sine and cosine" by keyboard.
    await page.keyboard.press("Escape");
    if (await page.$("#gallery[open]")) throw new Error("Escape leaves the gallery open");
    await page.click("#examples");
    await page.focus('#gallery button.gallery-card[data-id="function-plot"]');
    await page.keyboard.press("Enter");
    if (await page.$("#gallery[open]")) throw new Error("choosing leaves the gallery open");
    await page.waitForFunction(() => document.querySelector(".cm-content")?.textContent.includes("import graph;"), null, { timeout: 5000 })
      .catch(async () => { throw new Error("editor after choosing: " + (await page.textContent(".cm-content")).slice(0, 100)); });
    await page.click("#compile");
    await svgShown(page);
    await waitDone(page);
    if (!/^done/.test(await page.textContent("#status"))) throw new Error("status " + (await page.textContent("#status")));
    const ok = await page.$eval('#result img[data-format="svg"]', (img) => img.complete && img.naturalWidth > 100);
    if (!ok) throw new Error("no figure shown");
    // A project of two files opens both.
    await page.click("#examples");
    await page.click('#gallery button.gallery-card[data-id="own-module"]');
    await page.waitForFunction(() => document.querySelectorAll("#files button").length === 2, null, { timeout: 5000 }).catch(() => {});
    const files = await fileButtons(page);
    if (files.length !== 2 || !files.some((f) => f.startsWith("shapes.asy"))) throw new Error("files " + files.join(", "));
  },
  async "tex page lists packages and fonts, filtered"(page) {
    await page.goto(base + "/");
    await page.click('a[href="/tex"]');
    await page.waitForSelector("#tex-packages li", { timeout: 10000 });
    await page.fill("#tex-filter", "mathptmx");
    await page.waitForFunction(() => { const l = [...document.querySelectorAll("#tex-packages li")].map((li) => li.textContent); return l.includes("mathptmx") && l.every((p) => p.includes("mathptmx")); }, null, { timeout: 5000 });
    await page.fill("#tex-filter", "times");
    await page.waitForFunction(() => [...document.querySelectorAll("#tex-fonts tbody td")].some((td) => td.textContent === "ptm (Times)"), null, { timeout: 5000 });
  },
  // ---- Operator dashboard: charts of the last hour, dark mode ----
  async "the dashboard charts the last hour, in light and dark"(page) {
    await openDashboard(page);
    await page.waitForFunction(() => document.querySelectorAll("#charts .chart canvas").length === 7, null, { timeout: 10000 })
      .catch(async () => { throw new Error(`charts drawn: ${await page.$$eval("#charts .chart canvas", (c) => c.length)}, want 7`); });
    const editor = await freshPage();
    await editor.goto(base + "/");
    const stamp = Date.now();
    for (const src of [`draw((0,0)--(1,1)); // chart A ${stamp}\n`, `draw((0,0)--(2,1)); // chart B ${stamp}\n`, `draw((0,0)--(1,1)); // chart A ${stamp}\n`]) {
      await setSource(editor, src);
      await editor.click("#compile");
      await waitDone(editor);
      if (!/^done/.test(await editor.textContent("#status"))) throw new Error("compile: " + (await editor.textContent("#status")));
    }
    await editor.context().close();
    // The interval of the compiles closes within 10 s; the next snapshot carries it.
    const drawn = () => page.waitForFunction(() => {
      const c = window.usherCharts, sum = (u, i) => (u?.data[i] || []).reduce((a, v) => a + (v || 0), 0);
      return c && sum(c.throughput, 1) >= 3 && c.compile.data[1].some((v) => v > 0) && c.cache.data[1].some((v) => v > 0)
        && [...document.querySelectorAll("#charts .chart")].every((el) => Number(el.dataset.points) > 0);
    }, null, { timeout: 30000 }).catch(async () => {
      throw new Error("the charts never showed the compiles: " + JSON.stringify(await page.evaluate(() => Object.fromEntries(Object.entries(window.usherCharts).map(([k, u]) => [k, u.data])))));
    });
    await drawn();
    const span = await page.evaluate(() => { const x = window.usherCharts.throughput.scales.x; return x.max - x.min; });
    if (span !== 3600) throw new Error(`the charts span ${span} s, not the last hour`);
    const bg = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    await page.emulateMedia({ colorScheme: "light" });
    if ((await page.evaluate(() => document.documentElement.dataset.theme)) !== "light") throw new Error("light system theme not followed");
    const light = await bg();
    await page.screenshot({ path: join(artifacts, "dashboard-charts-light.png"), fullPage: true });
    await page.click("#theme");
    if ((await page.evaluate(() => document.documentElement.dataset.theme)) !== "dark") throw new Error("the toggle did not switch to dark");
    if ((await page.getAttribute("#theme", "aria-pressed")) !== "true") throw new Error("the toggle is not pressed in dark mode");
    if ((await bg()) === light) throw new Error("the page background stayed " + light + " in dark mode");
    await drawn(); // the charts, drawn again in the dark colours, keep their points
    const axis = await page.evaluate(() => window.usherCharts.compile.axes[0].stroke());
    if (!/^#d7dae0$/i.test(axis)) throw new Error("dark charts' axis colour " + axis);
    await page.screenshot({ path: join(artifacts, "dashboard-charts-dark.png"), fullPage: true });
    await page.setViewportSize({ width: 700, height: 800 });
    await page.waitForFunction(() => window.usherCharts.waiting.width <= 700, null, { timeout: 5000 })
      .catch(async () => { throw new Error("chart width after resizing to 700: " + (await page.evaluate(() => window.usherCharts.waiting.width))); });
    await page.reload();
    if ((await page.evaluate(() => document.documentElement.dataset.theme)) !== "dark") throw new Error("the dark choice did not outlive a reload");
    await drawn(); // a new stream's first snapshot carries the whole history
  },
  async "a multi-node dashboard charts the history the leading scheduler keeps"(page) {
    const multi = process.env.USHER_MULTINODE_URL;
    if (!multi) throw new Error("set USHER_MULTINODE_URL (scripts/webtest.sh does)");
    await page.emulateMedia({ colorScheme: "dark" });
    await openDashboard(page, multi);
    await page.waitForFunction(() => document.querySelectorAll("#charts .chart canvas").length === 7, null, { timeout: 10000 });
    if ((await page.evaluate(() => document.documentElement.dataset.theme)) !== "dark") throw new Error("the dark system theme not followed");
    await page.waitForFunction(() => /^leader:|no scheduler leads/.test(document.getElementById("leader").textContent), null, { timeout: 10000 });
    let editor = null;
    if (/^leader:/.test(await page.textContent("#leader"))) {
      // No backend in this deployment: the task waits, which the history shows.
      editor = await freshPage();
      await editor.goto(multi + "/");
      await setSource(editor, `draw((0,0)--(1,1)); // multi chart ${Date.now()}\n`);
      await editor.click("#compile");
      await waitStatus(editor, /^queued/, 15000);
      await page.waitForFunction(() => window.usherCharts.waiting.data.slice(1).some((ys) => ys.some((v) => v > 0)), null, { timeout: 30000 })
        .catch(() => { throw new Error("the waiting task never showed on the chart"); });
    } else {
      // The scheduler was stopped by an earlier scenario: its history stays in Redis.
      await page.waitForFunction(() => Number(document.getElementById("chart-waiting").dataset.points) > 0, null, { timeout: 10000 })
        .catch(() => { throw new Error("no history without a leader"); });
    }
    await page.screenshot({ path: join(artifacts, "dashboard-charts-multi-node.png"), fullPage: true });
    if (editor) await editor.context().close();
  },
  // --- Layout, shortcuts and accessibility: the editor on every screen
  // size, the help overlay, axe-core checks, the shared theme, and the time
  // to a first figure.
  async "time from page load to the default figure, cold and warm (printed, not asserted)"(page) {
    // Cold: a fresh browser (no cached assets, no uploads) and the server's
    // first compile of the default project. Warm: a reload of the same
    // context (assets from the HTTP cache, the result from the server's cache).
    const cold = await timeToFigure(page);
    const warm = await timeToFigure(page);
    const line = (what, t) => `${what}: page ready ${t.ready.toFixed(0)} ms, figure shown ${t.shown.toFixed(0)} ms after navigation start (${t.status})`;
    console.log("     " + line("cold", cold));
    console.log("     " + line("warm", warm));
    for (const t of [cold, warm]) if (!/^done/.test(t.status)) throw new Error("the default project did not compile: " + t.status);
  },
  async "the editor fits a phone, a tablet and a desktop; on a phone its panes are tabs"(page) {
    await page.context().close();
    for (const [name, w, h, touch] of [["desktop", 1280, 800, false], ["tablet", 820, 1180, true], ["phone", 390, 844, true]]) {
      const p = await devicePage(w, h, touch);
      await p.goto(base + "/");
      await p.waitForSelector(".cm-editor");
      await expectNoSideScroll(p, name);
      await expectOnScreen(p, name, ["#editor", "#compile", "#format", "#theme", "#help-button"]);
      await p.screenshot({ path: join(artifacts, `layout-${name}.png`) });
      if (name !== "phone") {
        if (await p.isVisible(".tabs")) throw new Error(`${name}: the phone's tab bar shows`);
        await expectOnScreen(p, name, ["#files", "#view"]);
        await p.context().close();
        continue;
      }
      await phoneTabs(p);
      await p.context().close();
    }
  },
  async "the shortcut list opens with its button, ? and F1, keeps the focus, and Esc gives it back"(page) {
    await page.goto(base + "/");
    await page.waitForSelector(".cm-editor");
    await page.focus("#help-button");
    await page.keyboard.press("Enter");
    if (!(await helpOpen(page)) || !(await focusInHelp(page))) throw new Error("the help button did not open the list with the focus in it");
    const rows = await page.$$eval("#help tr", (trs) => Object.fromEntries(trs.map((tr) => [tr.cells[1].textContent, tr.cells[0].textContent])));
    const want = { compile: "Ctrl-Enter", "find and replace": "Ctrl-f", undo: "Ctrl-z", "comment or uncomment the lines": "Ctrl-/", "indent more": "Ctrl-]" };
    for (const [what, keys] of Object.entries(want)) if (rows[what] !== keys) throw new Error(`the list gives ${JSON.stringify(rows[what])} for ${what}, want ${keys}`);
    await page.screenshot({ path: join(artifacts, "help-open.png") });
    await page.keyboard.press("Escape");
    if (await helpOpen(page)) throw new Error("Esc did not close the list");
    if (!(await page.evaluate(() => document.activeElement.id === "help-button"))) throw new Error("closing did not give the focus back to the help button");
    // ? outside the editor opens it; Tab and Shift-Tab stay inside.
    await page.focus("#compile");
    await page.keyboard.press("?");
    if (!(await helpOpen(page))) throw new Error("? on the compile button did not open the list");
    for (const key of ["Tab", "Tab", "Tab", "Shift+Tab", "Shift+Tab", "Shift+Tab", "Shift+Tab"]) {
      await page.keyboard.press(key);
      if (!(await focusInHelp(page))) throw new Error(`${key} took the focus out of the open list to ${await page.evaluate(() => document.activeElement.outerHTML.slice(0, 80))}`);
    }
    await page.click("#help .help-close");
    if (await helpOpen(page) || !(await page.evaluate(() => document.activeElement.id === "compile"))) throw new Error("close did not close the list and give the focus back to compile");
    // In the editor ? is text; F1 opens the list and Esc returns to the text.
    await setSource(page, "// why");
    await page.keyboard.press("?");
    if (await helpOpen(page)) throw new Error("? typed in the editor opened the list");
    if (!(await page.textContent(".cm-content")).includes("// why?")) throw new Error("? typed in the editor is not in the text");
    await page.keyboard.press("F1");
    if (!(await helpOpen(page))) throw new Error("F1 in the editor did not open the list");
    await page.keyboard.press("Escape");
    if (await helpOpen(page) || !(await page.evaluate(() => !!document.activeElement.closest(".cm-editor")))) throw new Error("Esc did not give the focus back to the editor");
  },
  async "no serious accessibility violations in the editor, light and dark, wide and narrow"(page) {
    await page.emulateMedia({ colorScheme: "light" });
    await page.goto(base + "/");
    await page.waitForSelector(".cm-editor");
    await expectAccessible(page, "the editor (light)");
    await setSource(page, "size(3cm);\ndraw(unitcircle);\npair p = (1,2;\n"); // an error in the console
    await page.click("#compile");
    await page.waitForSelector("#console .diag", { timeout: 20000 });
    await waitDone(page);
    await expectAccessible(page, "the editor with an error (light)");
    await page.click("#help-button");
    await expectAccessible(page, "the shortcut list (light)");
    await page.keyboard.press("Escape");
    await page.emulateMedia({ colorScheme: "dark" });
    await themeIs(page, "dark", "the editor does not follow the system's dark scheme");
    await expectAccessible(page, "the editor with an error (dark)");
    await setSource(page, `size(2cm); draw(unitcircle); // a11y ${Date.now()}\n`);
    await page.click("#compile");
    await svgShown(page);
    await waitDone(page);
    await expectAccessible(page, "the editor with a figure (dark)");
    await page.click("#help-button");
    await expectAccessible(page, "the shortcut list (dark)");
    await page.keyboard.press("Escape");
    await page.setViewportSize({ width: 390, height: 844 });
    await expectAccessible(page, "the editor on a phone (dark)");
    await page.emulateMedia({ colorScheme: "light" });
    await themeIs(page, "light", "the editor does not follow the system's light scheme");
    await expectAccessible(page, "the editor on a phone (light)");
  },
  async "no serious accessibility violations in a shared snapshot"(page) {
    await page.emulateMedia({ colorScheme: "light" });
    await page.goto(base + "/");
    await setSource(page, `size(2cm);\ndraw(unitsquare); // shared a11y ${Date.now()}\n`);
    await page.click("#share");
    await page.waitForFunction(() => /\/s\//.test(document.getElementById("share-url").value), null, { timeout: 10000 });
    await expectAccessible(page, "the editor with a share link");
    await page.goto(await page.inputValue("#share-url"));
    await page.waitForFunction(() => document.querySelector(".cm-content")?.innerText.includes("shared a11y"), null, { timeout: 10000 });
    await expectAccessible(page, "a shared snapshot (light)");
    await page.emulateMedia({ colorScheme: "dark" });
    await themeIs(page, "dark", "the shared snapshot does not follow the system's dark scheme");
    await expectAccessible(page, "a shared snapshot (dark)");
  },
  async "no serious accessibility violations on the dashboard, light and dark"(page) {
    await page.emulateMedia({ colorScheme: "light" });
    await openDashboard(page);
    await page.waitForFunction(() => document.getElementById("conn").textContent === "live", null, { timeout: 10000 });
    await expectAccessible(page, "the dashboard (light)");
    await page.emulateMedia({ colorScheme: "dark" });
    await themeIs(page, "dark", "the dashboard does not follow the system's dark scheme");
    await expectAccessible(page, "the dashboard (dark)");
  },
  async "the dashboard follows the editor's theme choice"(page) {
    const theme = (p) => p.evaluate(() => ({ theme: document.documentElement.dataset.theme, page: getComputedStyle(document.body).backgroundColor }));
    await page.emulateMedia({ colorScheme: "light" });
    await page.goto(base + "/");
    await page.click("#theme"); // dark, stored
    const editor = await theme(page);
    const dash = await page.context().newPage();
    await openDashboard(dash);
    if (JSON.stringify(await theme(dash)) !== JSON.stringify(editor)) throw new Error(`the dashboard ${JSON.stringify(await theme(dash))}, the editor ${JSON.stringify(editor)}`);
    await dash.screenshot({ path: join(artifacts, "dashboard-dark.png"), fullPage: true });
    await page.click("#theme"); // back to light in the editor: the open dashboard follows
    await dash.waitForFunction(() => document.documentElement.dataset.theme === "light", null, { timeout: 5000 })
      .catch(() => { throw new Error("the open dashboard did not follow the editor back to light"); });
    await page.evaluate(() => localStorage.removeItem("usher.theme")); // no choice: the system's scheme
    await dash.emulateMedia({ colorScheme: "dark" });
    await dash.reload();
    if ((await theme(dash)).theme !== "dark") throw new Error("without a choice the dashboard does not follow the system's dark scheme");
  },

  // --- Projects: IndexedDB projects, shares opened safely, zip import/export, data files, limits (web/src/projects.js and friends)
  async "an unknown share link leaves the saved project alone"(page) {
    const mine = `size(2cm); draw(unitcircle); // my own work ${Date.now()}\n`;
    await seedOldProject(page, mine);
    await page.goto(base + "/s/AAAAAAAAAAAAAAAAAAAAAA");
    await waitStatus(page, /no share/);
    await page.goto(base + "/");
    await editorShows(page, mine);
  },
  async "make a copy of a shared snapshot keeps the user's own project"(page) {
    const mine = `size(2cm); draw(unitcircle); // kept ${Date.now()}\n`;
    await seedOldProject(page, mine);
    const theirs = `size(2cm); draw(unitsquare); // shared for a copy ${Date.now()}\n`;
    const { url } = await postShare([{ filename: "main.asy", main: true, content: theirs }]);
    await page.goto(base + url);
    await editorShows(page, theirs);
    if (await page.isHidden("#banner")) throw new Error("read-only banner not shown");
    await page.click("#copy");
    await editorShows(page, theirs);
    await setSource(page, theirs + "// edited copy\n");
    await page.goto(base + "/");
    const names = await projectNames(page);
    if (names.length !== 2) throw new Error("projects after make a copy: " + names.join(", "));
    await openProject(page, names.find((n) => !/copy/.test(n)));
    await editorShows(page, mine);
    await openProject(page, names.find((n) => /copy/.test(n)));
    await editorShows(page, theirs + "// edited copy\n");
  },
  async "a share that cannot be fetched leaves a working app"(page) {
    const mine = `size(2cm); draw(unitcircle, red); // offline share ${Date.now()}\n`;
    await seedOldProject(page, mine);
    // The network failure is a route that aborts the request: the real
    // server cannot fail one request on demand.
    await page.route("**/api/shares/**", (r) => r.abort("internetdisconnected"));
    await page.goto(base + "/s/BBBBBBBBBBBBBBBBBBBBBB");
    await waitStatus(page, /cannot be reached/);
    await editorShows(page, mine);
    await page.click("#compile");
    await svgShown(page);
    await waitDone(page);
    if (!/^done/.test(await page.textContent("#status"))) throw new Error("compile: " + (await page.textContent("#status")));
  },
  async "projects are made, renamed, duplicated and deleted with undo; the last one opened comes back"(page) {
    const answers = [];
    page.on("dialog", (d) => d.accept(d.type() === "prompt" ? answers.shift() : undefined));
    await page.goto(base + "/");
    const first = await projectNames(page);
    if (first.length !== 1) throw new Error("a fresh browser's projects: " + first.join(", "));
    answers.push("circles");
    await page.click("#new-project");
    await page.waitForSelector('#projects button[data-name="circles"][aria-current]');
    const circles = `size(2cm); draw(unitcircle); // circles ${Date.now()}\n`;
    await setSource(page, circles);
    answers.push("round things");
    await page.click("#rename-project");
    await page.waitForSelector('#projects button[data-name="round things"][aria-current]');
    await page.click("#duplicate-project");
    await page.waitForSelector('#projects button[data-name="round things (copy)"][aria-current]');
    await editorShows(page, circles);
    await page.click("#delete-project");
    await page.waitForFunction(() => /deleted "round things \(copy\)"/.test(document.getElementById("toast-text").textContent));
    if ((await projectNames(page)).includes("round things (copy)")) throw new Error("the deleted project is still listed");
    await page.click("#undo");
    await page.waitForSelector('#projects button[data-name="round things (copy)"][aria-current]');
    await editorShows(page, circles);
    await openProject(page, "round things");
    await page.reload();
    await page.waitForSelector('#projects button[data-name="round things"][aria-current]');
    await editorShows(page, circles);
    const names = (await projectNames(page)).sort();
    if (names.join(",") !== [first[0], "round things", "round things (copy)"].sort().join(",")) throw new Error("projects after reload: " + names.join(", "));
  },
  async "a localStorage project moves into IndexedDB and stays in localStorage"(page) {
    const mine = `size(2cm); draw(unitcircle); // from localStorage ${Date.now()}\n`;
    await seedOldProject(page, mine);
    await page.goto(base + "/");
    await editorShows(page, mine);
    if ((await projectNames(page)).join() !== "my project") throw new Error("migrated projects: " + (await projectNames(page)).join(", "));
    await setSource(page, mine + "// edited\n");
    await page.reload();
    await editorShows(page, mine + "// edited\n");
    if ((await projectNames(page)).length !== 1) throw new Error("a second load migrated again: " + (await projectNames(page)).join(", "));
    if (!(await page.evaluate(() => localStorage.getItem("usher.project"))).includes("from localStorage")) throw new Error("the old project left localStorage");
  },
  async "two tabs editing one project never overwrite each other"(page) {
    await page.goto(base + "/");
    await projectNames(page);
    const other = await page.context().newPage();
    await other.goto(base + "/");
    await projectNames(other);
    // A save in one tab shows in the other, which has no edits of its own.
    const one = `size(2cm); draw(unitcircle); // tab one ${Date.now()}\n`;
    await setSource(page, one);
    await editorShows(other, one);
    // Both edit before either saves: the context's clock (both tabs')
    // holds the saves until both edits are in.
    await page.clock.install();
    const a = one + "// edit in tab A\n", b = one + "// edit in tab B\n";
    // The edits go straight to the editor's state: typing would wait on
    // the held timers.
    const edit = (p, text) => p.evaluate((t) => { const v = document.querySelector(".cm-content").cmTile.root.view; v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: t } }); }, text);
    await edit(page, a);
    await edit(other, b);
    await page.clock.runFor(1000); // both save; the one that comes second finds the other's revision
    await page.clock.resume();
    await page.waitForFunction(() => document.querySelectorAll("#projects button").length === 2, null, { timeout: 10000 })
      .catch(async () => { throw new Error("projects after two tabs' edits: " + (await projectNames(page)).join(", ")); });
    const names = await projectNames(page);
    if (!names.some((n) => /conflicting copy/.test(n))) throw new Error("no conflicting copy: " + names.join(", "));
    const seen = [];
    for (const n of names) { await openProject(page, n); seen.push(await editorText(page)); }
    if (seen.sort().join("|") !== [a, b].sort().join("|")) throw new Error("the two projects hold " + JSON.stringify(seen));
    await other.close();
  },
  async "usher:new-project makes and opens a new project"(page) {
    await page.goto(base + "/");
    await projectNames(page);
    const src = `size(2cm); fill(unitcircle, green); // example ${Date.now()}\n`;
    await page.evaluate((content) => document.dispatchEvent(new CustomEvent("usher:new-project", {
      detail: { name: "an example", files: [{ filename: "main.asy", main: true, content }, { filename: "lib.asy", main: false, content: "real r = 1;\n" }] } })), src);
    await page.waitForSelector('#projects button[data-name="an example"][aria-current]');
    await editorShows(page, src);
    if ((await fileButtons(page)).join(",") !== "main.asy ★,lib.asy") throw new Error("files: " + (await fileButtons(page)).join(","));
    if ((await projectNames(page)).length !== 2) throw new Error("projects: " + (await projectNames(page)).join(", "));
  },
  async "a project exports as a zip and imports as a new project"(page) {
    await page.goto(base + "/");
    await projectNames(page);
    const src = `import lib;\nsize(2cm); draw(scale(r)*unitcircle); // zipped ${Date.now()}\n`;
    await page.evaluate((content) => document.dispatchEvent(new CustomEvent("usher:new-project", {
      detail: { name: "zipped", files: [{ filename: "main.asy", main: true, content }, { filename: "lib.asy", main: false, content: "real r = 0.5;\n" }] } })), src);
    await page.waitForSelector('#projects button[data-name="zipped"][aria-current]');
    const [dl] = await Promise.all([page.waitForEvent("download", { timeout: 10000 }), page.click("#export-project")]);
    if (dl.suggestedFilename() !== "zipped.zip") throw new Error("export named " + dl.suggestedFilename());
    const zip = readFileSync(await dl.path());
    const got = unzipSync(new Uint8Array(zip));
    const manifest = JSON.parse(strFromU8(got["usher-project.json"]));
    if (strFromU8(got["main.asy"]) !== src || strFromU8(got["lib.asy"]) !== "real r = 0.5;\n") throw new Error("zip holds " + Object.keys(got).join(","));
    if (JSON.stringify(manifest.files) !== JSON.stringify([{ filename: "main.asy", main: true }, { filename: "lib.asy", main: false }])) throw new Error("manifest: " + JSON.stringify(manifest));
    await page.setInputFiles("#import-input", { name: "zipped.zip", mimeType: "application/zip", buffer: zip });
    await page.waitForSelector('#projects button[data-name="zipped (2)"][aria-current]');
    await editorShows(page, src);
    await page.click("#compile");
    await svgShown(page);
    await waitDone(page);
    if (!/^done/.test(await page.textContent("#status"))) throw new Error("compile of the imported project: " + (await page.textContent("#status")));
  },
  async "a bad zip is refused with its reason and nothing is saved"(page) {
    const info = await (await fetch(base + "/api/info")).json();
    const main = (extra = {}) => ({ "main.asy": strToU8("size(2cm); draw(unitcircle);\n"), ...extra });
    const cases = [
      ["a parent path", zipSync(main({ "../evil.asy": strToU8("x") })), /"\.\.\/evil\.asy" contains "\/"/],
      ["an absolute name", zipSync(main({ "/etc/evil.asy": strToU8("x") })), /contains "\/"/],
      ["a folder", zipSync(main({ "dir/x.asy": strToU8("x") })), /contains "\/"/],
      ["a backslash", zipSync(main({ "dir\\x.asy": strToU8("x") })), /contains "\\"/],
      ["a symbolic link", zipSync(main({ "link.asy": [strToU8("/etc/passwd"), { os: 3, attrs: 0o120777 * 65536 }] })), /link\.asy is a symbolic link/],
      ["a bomb that says so", zipSync(main({ "big.asy": new Uint8Array(info.maxUpload + 1).fill(32) })), /declare .* more than the server's limit .*maxUpload/],
      ["a bomb that lies", lieAboutSize(zipSync(main({ "big.asy": new Uint8Array(info.maxUpload * 4).fill(32) })), "big.asy", 100), /big\.asy inflates to more than the 100 B the zip declares/],
      ["too many files", zipSync(main(Object.fromEntries(Array.from({ length: info.maxFiles }, (_, i) => [`f${i}.asy`, strToU8("")])))), /more than the server's limit of \d+ .*maxFiles/],
      ["a name the server refuses", zipSync(main({ "tool.exe": strToU8("MZ") })), /"tool\.exe" does not end in/],
      ["an extension in capitals (the server's match is exact)", zipSync(main({ "photo.PNG": strToU8("x") })), /"photo\.PNG" does not end in/],
      ["a data file named like asy's output", zipSync(main({ "out.csv": strToU8("1,2\n") })), /"out\.csv" is reserved for asy's output/],
      ["content that is not its extension's", zipSync(main({ "lib.asy": new Uint8Array([0xff, 0xfe, 0x00, 0x41]) })), /lib\.asy is not a text file/],
      ["no zip at all", strToU8("just text"), /not a zip file/],
    ];
    await page.goto(base + "/");
    const before = await projectNames(page);
    const failures = [];
    for (const [what, zip, want] of cases) {
      await page.evaluate(() => { document.getElementById("toast-text").textContent = ""; });
      await page.setInputFiles("#import-input", { name: "bad.zip", mimeType: "application/zip", buffer: Buffer.from(zip) });
      const text = await page.waitForFunction(() => document.getElementById("toast-text").textContent, null, { timeout: 10000 }).then((h) => h.jsonValue());
      if (!/^bad\.zip was not imported: /.test(text) || !want.test(text)) failures.push(`${what}: ${text}`);
    }
    const after = await projectNames(page);
    if (after.join() !== before.join()) failures.push("projects changed: " + after.join(", "));
    const stored = await page.evaluate(() => new Promise((resolve) => { const r = indexedDB.open("usher"); r.onsuccess = () => { const q = r.result.transaction("projects").objectStore("projects").count(); q.onsuccess = () => resolve(q.result); }; }));
    if (stored !== before.length) failures.push(`${stored} projects stored, want ${before.length}`);
    if (failures.length) throw new Error(failures.join(" | "));
  },
  async "the time-limit menu is the server's tiers and default, which sends no timeout"(page) {
    const info = await (await fetch(base + "/api/info")).json();
    await page.goto(base + "/");
    const want = ["default", ...info.timeouts.map((ms) => ms / 1000 + " s")];
    await page.waitForFunction((w) => [...document.querySelectorAll("#timeout option")].map((o) => o.textContent).join() === w.join(), want, { timeout: 10000 })
      .catch(async () => { throw new Error("time limits: " + (await page.$$eval("#timeout option", (os) => os.map((o) => o.textContent).join()))); });
    await setSource(page, `size(2cm); draw(unitcircle); // default ${Date.now()}\n`);
    const sent = [];
    page.on("websocket", (ws) => ws.on("framesent", (f) => { if (typeof f.payload === "string" && f.payload.startsWith("options ")) sent.push(JSON.parse(f.payload.slice(8))); }));
    await page.selectOption("#timeout", "");
    await page.click("#compile");
    await waitDone(page);
    await page.selectOption("#timeout", String(info.timeouts[0]));
    await page.click("#compile");
    await waitDone(page);
    if (sent.length !== 2 || "timeout" in sent[0] || sent[1].timeout !== info.timeouts[0]) throw new Error("options sent: " + JSON.stringify(sent));
  },
  async "uploads and shares past the server's limits are refused, naming the limit"(page) {
    const info = await (await fetch(base + "/api/info")).json();
    await page.goto(base + "/");
    await projectNames(page);
    const many = Array.from({ length: info.maxFiles }, (_, i) => ({ name: `f${i}.asy`, mimeType: "text/plain", buffer: Buffer.from("") }));
    await page.setInputFiles("#upload-input", many);
    await page.waitForFunction(() => /upload refused: .*maxFiles/.test(document.getElementById("toast-text").textContent), null, { timeout: 10000 });
    await page.setInputFiles("#upload-input", { name: "big.asy", mimeType: "text/plain", buffer: Buffer.alloc(info.maxUpload + 1, 32) });
    await page.waitForFunction(() => /upload refused: big\.asy .*maxUpload/.test(document.getElementById("toast-text").textContent), null, { timeout: 10000 });
    if ((await fileButtons(page)).join() !== "main.asy ★") throw new Error("files after refused uploads: " + (await fileButtons(page)).join());
    await page.setInputFiles("#upload-input", { name: "lib.asy", mimeType: "text/plain", buffer: Buffer.from("real r = 1;\n") });
    await page.waitForFunction(() => [...document.querySelectorAll("#files button")].some((b) => b.textContent === "lib.asy"), null, { timeout: 10000 });
    await page.click('#files button:text-is("main.asy ★")');
    await setSource(page, "// " + "x".repeat(info.maxShare) + "\n");
    await page.click("#share");
    await page.waitForFunction(() => /share refused: .*maxShare/.test(document.getElementById("share-url").value), null, { timeout: 10000 });
  },
  async "an uploaded CSV and PNG are kept as data files, shown, compiled and shared (needs the server's data files)"(page) {
    const info = await (await fetch(base + "/api/info")).json();
    if (!info.extensions?.includes(".csv") || !info.binaryExtensions?.includes(".png")) throw new Error("the server allows no .csv or .png files: /api/info says " + JSON.stringify({ extensions: info.extensions, binaryExtensions: info.binaryExtensions }));
    await page.goto(base + "/");
    await projectNames(page);
    const png = Buffer.from(await page.evaluate(async () => { // a real 2×2 PNG, from the browser's canvas
      const c = new OffscreenCanvas(2, 2); c.getContext("2d").fillRect(0, 0, 1, 1);
      const b = new Uint8Array(await (await c.convertToBlob({ type: "image/png" })).arrayBuffer());
      return btoa(String.fromCharCode(...b));
    }), "base64");
    await page.setInputFiles("#upload-input", { name: "points.csv", mimeType: "text/csv", buffer: Buffer.from("0,0\n1,1\n2,0\n") });
    await page.waitForFunction(() => [...document.querySelectorAll("#files button")].some((b) => b.textContent === "points.csv"), null, { timeout: 10000 });
    // Dropped onto the file list.
    const dt = await page.evaluateHandle((b64) => { const d = new DataTransfer(); d.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], "dot.png", { type: "image/png" })); return d; }, png.toString("base64"));
    await page.dispatchEvent("#files", "drop", { dataTransfer: dt });
    await page.waitForSelector('#file-view img[alt="preview of dot.png"]', { timeout: 10000 });
    if (!(await page.$eval("#file-view img", (i) => i.complete && i.naturalWidth === 2))) throw new Error("the PNG preview did not load");
    if (!(await page.isHidden("#editor"))) throw new Error("a PNG is shown in the editor");
    await page.reload();
    await page.click('#files button:text-is("dot.png")');
    await page.waitForSelector('#file-view img[alt="preview of dot.png"]', { timeout: 10000 });
    await page.click('#files button:text-is("main.asy ★")');
    await setSource(page, `file f = input("points.csv").csv(); real[][] a = f.dimension(0, 2);\nsize(3cm); for (real[] p : a) dot((p[0], p[1])); // ${Date.now()}\n`);
    const binary = [];
    page.on("websocket", (ws) => ws.on("framesent", (f) => { if (typeof f.payload !== "string") binary.push(Buffer.from(f.payload)); }));
    await page.click("#compile");
    await waitDone(page);
    if (!/^done/.test(await page.textContent("#status"))) throw new Error("compile with data files: " + (await page.textContent("#status")) + " " + (await page.textContent("#console")));
    if (!binary.some((b) => b.equals(png))) throw new Error("the PNG was not sent as its bytes");
    await page.click("#share");
    await page.waitForFunction(() => /\/s\//.test(document.getElementById("share-url").value), null, { timeout: 10000 });
    const id = (await page.inputValue("#share-url")).split("/s/")[1];
    const shared = await (await fetch(`${base}/api/shares/${id}`)).json();
    const dot = shared.files.find((f) => f.filename === "dot.png");
    if (dot?.encoding !== "base64" || dot.content !== png.toString("base64")) throw new Error("shared dot.png: " + JSON.stringify(dot));
  },
  // job browser (/jobs): web/src/jobs/, helpers in web/test/jobsui.mjs.
  async "jobs: log in as admin; an agent's token is refused; a client sees no pause"(page) {
    const q = await newQueue("login");
    await page.goto(base + "/jobs");
    await page.fill("#token", "usher_not-a-token");
    await page.click("#login");
    await waitText(page, "#login-error", /does not know this token/);
    await page.fill("#token", await newToken("agent"));
    await page.click("#login");
    await waitText(page, "#login-error", /agent token .*needs an admin or client token/);
    if (await page.isVisible("#jobs-nav")) throw new Error("an agent's token opened the job browser");
    await page.fill("#token", process.env.USHER_TOKEN);
    await page.click("#login");
    await waitText(page, "#who", /\(admin\)/);
    await page.waitForSelector(`button[aria-label="Pause queue ${q}"]`);
    if (/\b(null|undefined)\b/.test(await page.textContent("#view"))) throw new Error("the queue list shows null or undefined");
    await page.reload();
    await waitText(page, "#who", /\(admin\)/); // the token stays for the tab
    await expectAccessible(page, "the queue list");
    await page.click("#logout");
    await page.waitForSelector("#login-form:not([hidden])");
    if (await page.evaluate(() => sessionStorage.length)) throw new Error("the token stayed in session storage after logging out");
    await page.fill("#token", await newToken("client"));
    await page.click("#login");
    await waitText(page, "#who", /\(client\)/);
    await page.waitForSelector(`#queues a:text-is("${q}")`);
    await waitText(page, "#role-note", /Pausing and resuming queues needs an admin token/);
    if (await page.$$eval("button.pause", (b) => b.length)) throw new Error("a client is offered pause buttons");
    await page.click(`#queues a:text-is("${q}")`);
    await page.waitForSelector("#bulk-all");
    if (await page.$("button.pause")) throw new Error("a client is offered pause on the queue's page");
    await expectAccessible(page, "the login form");
  },
  async "jobs: the queue list counts jobs per state; pause and resume"(page) {
    const q = await newQueue("pause");
    await v1("PATCH", `/queues/${q}`, { active: false });
    const agent = await startAgent(q);
    try {
      await enqueue(q, [{ payload: "a" }, { payload: "b" }, { payload: "c" }]);
      await logInJobs(page, "/jobs");
      const row = `#queues tr[data-key="${q}"]`;
      await waitText(page, `${row} .status`, /^paused$/);
      await waitText(page, `${row} .queued`, /^3$/);
      await waitText(page, "#rates", /per second over the last 10 s: [0-9.]+ started/);
      await page.click(`button[aria-label="Resume queue ${q}"]`);
      await waitText(page, `${row} .status`, /^active$/);
      if (!(await v1("GET", `/queues/${q}`)).active) throw new Error("Resume left the queue paused");
      await waitText(page, `${row} .queued`, /^0$/); // the agent ran them: the row follows without a reload
      await page.click(`button[aria-label="Pause queue ${q}"]`);
      await waitText(page, `${row} .status`, /^paused$/);
      if ((await v1("GET", `/queues/${q}`)).active) throw new Error("Pause left the queue active");
      await page.click(`${row} a:text-is("${q}")`);
      await waitText(page, "#queue-summary", /^paused · 0 queued/);
      await waitRows(page, 3);
      await page.click(`button[aria-label="Resume queue ${q}"]`);
      await waitText(page, "#queue-summary", /^active/);
    } finally { agent.stop(); }
  },
  async "jobs: filters, search and paging, kept in the address"(page) {
    const q = await newQueue("find");
    const ids = await enqueue(q, Array.from({ length: 130 }, (_, i) => ({ payload: i, tags: i % 2 ? ["odd", `n${i}`] : ["even"] })));
    await logInJobs(page, `/jobs/list?queue=${q}`);
    await waitRows(page, 50);
    await page.waitForSelector(`#queue-names option[value="${q}"]`, { state: "attached" }); // the queue field suggests the queues
    const first = await rowIds(page);
    if (first[0] !== ids[129] || first[49] !== ids[80]) throw new Error(`page 1 is not the newest first: ${first[0]}…${first[49]}`);
    await page.click("#next-page");
    await waitText(page, "#page-info", /^page 2: 50 job/);
    const second = await rowIds(page);
    if (second[0] !== ids[79] || !/after=/.test(page.url())) throw new Error(`page 2 starts at ${second[0]}, url ${page.url()}`);
    await page.click("#next-page");
    await waitText(page, "#page-info", /^page 3: 30 job\(s\), the last page/);
    if (!(await page.isDisabled("#next-page"))) throw new Error("Next page is offered on the last page");
    await page.goBack();
    await waitText(page, "#page-info", /^page 2: 50 job/);
    if ((await rowIds(page))[0] !== ids[79]) throw new Error("back did not show page 2 again");
    await page.fill("#f-tag", "even");
    await page.click("#apply");
    await waitText(page, "#page-info", /^page 1: 50 job/);
    if (!page.url().includes("tag=even") || page.url().includes("after=")) throw new Error("the address does not hold the filter: " + page.url());
    if ((await page.$$eval("#jobs td.tags", (t) => t.filter((c) => c.textContent !== "even").length))) throw new Error("tag=even shows other jobs");
    await page.fill("#f-tag", "");
    await page.fill("#f-q", "n12");
    await page.click("#apply");
    await waitRows(page, 5); // the tags n121 … n129 of the odd jobs
    const shared = page.url();
    await page.fill("#f-q", "");
    await page.selectOption("#f-state", "failed");
    await page.click("#apply");
    await waitText(page, "#jobs tbody", /no jobs match/);
    await page.selectOption("#f-state", "queued");
    await page.fill("#f-from", "2099-01-01T00:00");
    await page.click("#apply");
    await waitText(page, "#jobs tbody", /no jobs match/);
    await page.fill("#f-from", "");
    await page.fill("#f-to", "2099-01-01T00:00");
    await page.selectOption("#f-order", "asc");
    await page.click("#apply");
    await waitRows(page, 50);
    if ((await rowIds(page))[0] !== ids[0]) throw new Error("oldest first does not start with the first job");
    await expectAccessible(page, "the job list");
    // The address is the view: another tab opens it after logging in.
    const other = await page.context().newPage();
    await logInJobs(other, new URL(shared).pathname + new URL(shared).search);
    await waitRows(other, 5);
    if ((await other.inputValue("#f-q")) !== "n12") throw new Error("the shared address lost its search");
    await other.close();
  },
  async "jobs: a job's page shows what it carries; retry, cancel, run now, delete"(page) {
    const q = await newQueue("one");
    const key = `${q}:k`;
    const [id, later] = await enqueue(q, [
      { payload: { n: 1, s: "x" }, tags: ["t1", "t2"], metadata: { owner: "ana" }, keys: [key], group: "g1", mode: "read" },
      { payload: "later", delayMs: 3600000 },
    ]);
    await logInJobs(page, `/jobs/job/${id}`);
    await waitText(page, "#job-state", /^queued$/);
    await waitText(page, "#job-payload", /"n": 1,\s+"s": "x"/);
    await waitText(page, "#job-metadata", /"owner": "ana"/);
    await waitText(page, "#job-tags", /t1t2/);
    await waitText(page, "#job-attempt", /^0 of 1$/);
    await waitText(page, "#job-keys", new RegExp(`^${key}$`));
    await waitText(page, "#job-facts", /groupg1 \(read\)/);
    await waitText(page, "#job-timeline", /^created/);
    if (!(await page.isDisabled('button[data-action="retry"]'))) throw new Error("Retry is offered for a queued job");
    await expectAccessible(page, "a job's page");
    await page.click('button[data-action="cancel"]');
    await waitText(page, "#job-state", /^cancelled$/);
    await page.click('button[data-action="retry"]');
    await waitText(page, "#job-state", /^queued$/);
    if ((await v1("GET", `/jobs/${id}`)).state !== "queued") throw new Error("Retry did not queue the job");
    await page.click(`#job-keys a`);
    await page.waitForURL(`${base}/jobs/list?key=${encodeURIComponent(key)}`);
    await waitRows(page, 1);
    await page.goto(`${base}/jobs/job/${later}`);
    await waitText(page, "#job-state", /^scheduled$/);
    await waitText(page, "#job-timeline", /due \(runAt\)/);
    await page.click('button[data-action="run"]');
    await waitText(page, "#job-state", /^queued$/);
    await page.goto(`${base}/jobs/job/${id}`);
    await waitText(page, "#job-state", /^queued$/);
    await page.click('button[data-action="delete"]');
    await waitText(page, "#confirm-text", /Delete job/);
    await page.click("#confirm-cancel");
    if ((await v1("GET", `/jobs/${id}`)).id !== id) throw new Error("a declined delete deleted");
    await page.click('button[data-action="delete"]');
    await page.click("#confirm-ok");
    await page.waitForURL(new RegExp(`/jobs/list\\?queue=${q}$`));
    const gone = await fetch(`${base}/v1/jobs/${id}`, { headers: { Authorization: `Bearer ${process.env.USHER_TOKEN}` } });
    if (gone.status !== 404) throw new Error(`the deleted job answers ${gone.status}`);
    await waitRows(page, 1);
  },
  async "jobs: actions on a selection, and on every job of a filter with progress"(page) {
    const q = await newQueue("bulk");
    await enqueue(q, Array.from({ length: 600 }, (_, i) => ({ payload: i })));
    await enqueue(q, Array.from({ length: 600 }, (_, i) => ({ payload: i })));
    await logInJobs(page, `/jobs/list?queue=${q}`);
    await waitRows(page, 50);
    const [a, b] = await rowIds(page);
    await page.check(`input[aria-label="select job ${a}"]`);
    await page.check(`input[aria-label="select job ${b}"]`);
    await waitText(page, "#selection", /^2 selected$/);
    await page.click('button[data-action="cancel"]');
    await waitText(page, "#action-result", /^Cancel: 2 of 2 changed\.$/);
    await waitText(page, `#jobs tr[data-key="${a}"] .st`, /^cancelled$/);
    await page.selectOption("#f-state", "queued");
    await page.click("#apply");
    await waitText(page, "#filter-desc", /state=queued/);
    await page.evaluate(() => {
      window.seen = [];
      new MutationObserver(() => { const p = document.getElementById("bulk-progress"); if (p) window.seen.push(p.textContent); })
        .observe(document.getElementById("bulk"), { subtree: true, childList: true, characterData: true });
    });
    await page.selectOption("#bulk-action", "cancel");
    await page.click("#bulk-all");
    await waitText(page, "#confirm-text", /Cancel every job matching queue=.*, state=queued\?/);
    await page.click("#confirm-ok");
    await waitText(page, "#bulk-progress", /^done: \d+ batch\(es\), 1198 matched, 1198 changed, 0 error\(s\)$/, 30000);
    const seen = await page.evaluate(() => window.seen);
    if (!seen.some((s) => /^working: 1 batch\(es\), \d+ matched/.test(s))) throw new Error("no progress between batches: " + JSON.stringify(seen));
    await waitText(page, "#jobs tbody", /no jobs match/);
    if ((await v1("GET", `/jobs?queue=${q}&state=queued`)).jobs.length) throw new Error("queued jobs are left");
    await page.selectOption("#f-state", "cancelled");
    await page.click("#apply");
    await waitRows(page, 50);
    await page.selectOption("#bulk-action", "retry");
    await page.click("#bulk-all");
    await page.click("#confirm-ok");
    await waitText(page, "#bulk-progress", /^done: \d+ batch\(es\), 1200 matched, 1200 changed, 0 error\(s\)$/, 30000);
    const left = await v1("GET", `/jobs?queue=${q}&state=queued&limit=1000`);
    if (left.jobs.length !== 1000 || !left.next) throw new Error("retry on the filter did not queue all 1200 again");
    // Stop: the second batch is held on its way (then sent on unchanged)
    // until Stop was clicked, so the loop ends before a third.
    let batches = 0, release;
    const stopped = new Promise((r) => { release = r; });
    await page.route("**/v1/jobs/actions", async (route) => { if (++batches === 2) await stopped; await route.continue(); });
    await page.selectOption("#f-state", "queued");
    await page.click("#apply");
    await waitRows(page, 50);
    await page.selectOption("#bulk-action", "cancel");
    await page.click("#bulk-all");
    await page.click("#confirm-ok");
    await waitText(page, "#bulk-progress", /^working: 1 batch/);
    await page.click("#bulk-stop");
    release();
    await waitText(page, "#bulk-progress", /^stopped after 2 batch\(es\): (\d+) matched, \1 changed, 0 error\(s\)$/);
    const changed = Number((await page.textContent("#bulk-progress")).match(/(\d+) changed/)[1]);
    const rest = await v1("GET", `/jobs?queue=${q}&state=queued&limit=1000`);
    if (changed >= 1200 || rest.jobs.length !== 1200 - changed || batches !== 2) throw new Error(`after Stop: ${changed} changed, ${rest.jobs.length} queued, ${batches} batches sent`);
  },
  async "jobs: a workflow's DAG, each node a link to its job"(page) {
    const q = await newQueue("flow");
    const agent = await startAgent(q);
    try {
      const wf = await v1("POST", "/workflows", { name: "diamond <i>", jobs: [
        { name: "a", queue: q, payload: "ok" }, { name: "b", queue: q, payload: "fail:no", after: ["a"] },
        { name: "c", queue: q, payload: "ok", after: ["a"] }, { name: "d", queue: q, payload: "ok", after: ["b", "c"] }] });
      const done = await v1("GET", `/workflows/${wf.id}?wait=30s`);
      if (done.state !== "failed") throw new Error("the workflow ended " + done.state);
      await logInJobs(page, `/jobs/workflows/${wf.id}`);
      await page.waitForSelector("#dag a.node");
      const nodes = await page.$$eval("#dag a.node", (as) => Object.fromEntries(as.map((a) => [a.dataset.job,
        { x: Number(a.querySelector("rect").getAttribute("x")), cls: a.querySelector("rect").getAttribute("class"), label: a.textContent }])));
      const n = (k) => nodes[wf.jobs[k]];
      const want = { a: "succeeded", b: "failed", c: "succeeded", d: "cancelled" };
      for (const [k, s] of Object.entries(want)) {
        if (n(k)?.cls !== `state-${s}` || !n(k).label.endsWith(s)) throw new Error(`node ${k}: ${JSON.stringify(n(k))}, want ${s}`);
      }
      if (!(n("a").x < n("b").x && n("b").x === n("c").x && n("c").x < n("d").x)) throw new Error("not in layers: " + JSON.stringify(nodes));
      const edges = await page.$$eval("#dag path.edge", (ps) => ps.map((p) => `${p.dataset.from}>${p.dataset.to}`).sort());
      const wantEdges = [["a", "b"], ["a", "c"], ["b", "d"], ["c", "d"]].map(([f, t]) => `${wf.jobs[f]}>${wf.jobs[t]}`).sort();
      if (JSON.stringify(edges) !== JSON.stringify(wantEdges)) throw new Error(`edges ${edges}, want ${wantEdges}`);
      await waitText(page, "#wf-summary", /^“diamond <i>”, failed: /);
      await expectAccessible(page, "a workflow");
      await page.click(`#dag a[data-job="${wf.jobs.d}"]`);
      await page.waitForURL(`${base}/jobs/job/${wf.jobs.d}`);
      await waitText(page, "#job-state", /^cancelled$/);
      await page.click("#job-workflow");
      await page.waitForURL(`${base}/jobs/workflows/${wf.id}`);
      await page.focus(`#dag a[data-job="${wf.jobs.b}"]`);
      await page.keyboard.press("Enter");
      await page.waitForURL(`${base}/jobs/job/${wf.jobs.b}`);
      await waitText(page, "#job-output", /^no\n$/);
    } finally { agent.stop(); }
  },
  async "jobs: keys and limits, with the queued jobs a key holds back"(page) {
    const q = await newQueue("keys");
    const p = `jbk${Date.now()}`;
    await v1("PUT", "/limits", { pattern: `${p}:*`, limit: 1 });
    await v1("PUT", "/limits", { pattern: `${p}-rate`, rate: "1/h" });
    const g = gate();
    const agent = await startAgent(q);
    try {
      const held = await enqueue(q, [0, 1, 2].map(() => ({ payload: g.payload, keys: [`${p}:a`] })));
      await enqueue(q, [0, 1].map(() => ({ payload: "ok", keys: [`${p}-rate`] })));
      await logInJobs(page, "/jobs/keys");
      const row = `#keys tr[data-key="${p}:a"]`;
      await waitText(page, `${row} .run`, /^1 \/ 1$/);
      await waitText(page, `${row} .queued`, /^2$/);
      await waitText(page, `#keys tr[data-key="${p}-rate"] .tokens`, /^0, next at /);
      await waitText(page, `#limits tr[data-key="${p}:*"] .limit`, /^1$/);
      await waitText(page, `#limits tr[data-key="${p}-rate"] .rate`, /^1\/h$/);
      await expectAccessible(page, "keys and limits");
      await page.click(`a[aria-label="queued jobs holding ${p}:a"]`);
      await page.waitForURL(/\/jobs\/list\?key=.*&state=queued$/);
      await waitRows(page, 2);
      const shown = (await rowIds(page)).sort();
      const running = (await v1("GET", `/jobs?key=${p}:a&state=running`)).jobs.map((j) => j.id);
      if (shown.includes(running[0]) || shown.length + running.length !== held.length) throw new Error(`held back ${shown}, running ${running}`);
      g.open();
    } finally { agent.stop(); }
  },
  async "jobs: a job finishing changes the page without a reload"(page) {
    const q = await newQueue("live");
    const g = gate();
    const agent = await startAgent(q);
    try {
      const [id] = await enqueue(q, [{ payload: g.payload }]);
      await logInJobs(page, `/jobs/job/${id}`);
      await waitText(page, "#job-state", /^running$/);
      await waitText(page, "#job-progress-text", /50% waiting for the gate/);
      await page.evaluate(() => { window.stillHere = true; });
      g.open();
      await waitText(page, "#job-state", /^succeeded$/);
      await waitText(page, "#job-result", /"ok": true/);
      await waitText(page, "#job-output", /^done gate:/);
      await waitText(page, "#job-attempt", /^1 of 1$/);
      await waitText(page, "#live", /^live, updated/);
      // The list follows too: a new job of this queue shows on top, then
      // finishes (the queue's own list: other scenarios add jobs meanwhile).
      await page.click('#jobs-nav a[data-nav="list"]');
      await page.waitForURL(`${base}/jobs/list`);
      await page.fill("#f-queue", q);
      await page.click("#apply");
      await page.waitForURL(`${base}/jobs/list?queue=${q}`);
      const g2 = gate();
      const [id2] = await enqueue(q, [{ payload: g2.payload }]);
      await page.waitForFunction((id) => document.querySelector("#jobs tbody tr")?.dataset.key === id, id2, { timeout: 10000 });
      await waitText(page, `#jobs tr[data-key="${id2}"] .st`, /^running$/);
      g2.open();
      await waitText(page, `#jobs tr[data-key="${id2}"] .st`, /^succeeded$/);
      if (!(await page.evaluate(() => window.stillHere))) throw new Error("the page was reloaded");
    } finally { agent.stop(); }
  },
  async "jobs: HTML in a job's output, error, tags and metadata shows as text; its attempts are listed"(page) {
    const q = await newQueue("html", { retry: { maxAttempts: 2, backoffMs: 1 } });
    const agent = await startAgent(q);
    const img = `<img src=x onerror="window.pwned=1">`;
    try {
      const [id] = await enqueue(q, [{ payload: `fail:${img}`, tags: ["<b>bold</b>"], metadata: { note: "<script>window.pwned=2</script>" } }]);
      await waitJob(id, (j) => j.state === "failed", "failed");
      await logInJobs(page, `/jobs/job/${id}`);
      await waitText(page, "#job-state", /^failed$/);
      if ((await page.textContent("#job-output")) !== img + "\n") throw new Error("the output is not its text: " + (await page.innerHTML("#job-output")));
      await waitText(page, "#job-tags", /^<b>bold<\/b>$/);
      await waitText(page, "#job-metadata", /<script>window.pwned=2<\/script>/);
      await waitText(page, "#job-payload", /fail:<img src=x onerror=/);
      // Both attempts failed: the first was retried; each is listed with its exit code and output.
      await waitText(page, "#job-attempts tbody", /^1webtest-.*3.*2webtest-.*3/s);
      if ((await page.locator("#job-attempts tbody tr").count()) !== 2) throw new Error("the attempts table has not two rows");
      if ((await page.textContent("#job-attempts tbody tr pre")) !== img + "\n") throw new Error("an attempt's output is not its text");
      await waitText(page, "#job-timeline", /attempt 1 started.*attempt 1 ended/s);
      await page.goto(`${base}/jobs/list?queue=${q}`);
      await waitText(page, "#jobs td.tags", /^<b>bold<\/b>$/);
      const found = await page.evaluate(() => ({ pwned: window.pwned, els: document.querySelectorAll("#view img, #view b, #view script").length }));
      if (found.pwned || found.els) throw new Error("a job's content was read as HTML: " + JSON.stringify(found));
    } finally { agent.stop(); }
  },
  async "jobs: time from login to a list of 10^5 queued jobs (printed, not asserted)"(page) {
    const q = await newQueue("big");
    const n = 100000, per = 1000;
    const t0 = Date.now();
    let last = "0";
    for (let i = 0; i < n; i += per * 4) {
      const parts = await Promise.all([0, 1, 2, 3].map((k) => enqueue(q, Array.from({ length: per }, (_, j) => ({ payload: i + k * per + j })))));
      for (const id of parts.flat()) if (Number(id) > Number(last)) last = id; // the requests may land in any order
    }
    const enq = Date.now() - t0;
    try {
      await page.goto(`${base}/jobs/list?queue=${q}`);
      await page.waitForSelector("#login-form:not([hidden])");
      await page.fill("#token", process.env.USHER_TOKEN);
      // In the page: from the form's submit to the 50th row in the DOM
      // (a MutationObserver), without the harness's own delays.
      await page.evaluate(() => {
        window.timing = {};
        document.getElementById("login-form").addEventListener("submit", () => { window.timing.submit = performance.now(); }, { capture: true });
        new MutationObserver(() => { if (!window.timing.rows && document.querySelectorAll("#jobs tbody tr[data-key]").length === 50) window.timing.rows = performance.now(); })
          .observe(document.getElementById("view"), { childList: true, subtree: true });
      });
      const start = Date.now();
      await page.click("#login");
      await page.waitForFunction((id) => document.querySelectorAll("#jobs tbody tr[data-key]").length === 50 && document.querySelector("#jobs tbody tr").dataset.key === id, last, { timeout: 30000 });
      const list = Date.now() - start;
      const inPage = await page.evaluate(() => Math.round(window.timing.rows - window.timing.submit));
      // Where the time went: the two requests on the way, as the browser timed them.
      const calls = await page.evaluate(() => performance.getEntriesByType("resource").filter((e) => /\/v1\/(whoami|jobs\?)/.test(e.name))
        .slice(0, 2).map((e) => `${new URL(e.name).pathname} ${Math.round(e.duration)} ms`).join(", "));
      const s1 = Date.now();
      await page.click("#next-page");
      await waitText(page, "#page-info", /^page 2: 50 job/, 30000);
      const next = Date.now() - s1;
      const s2 = Date.now();
      await page.click('#jobs-nav a[data-nav="queues"]');
      await waitText(page, `#queues tr[data-key="${q}"] .queued`, /^100000$/, 30000);
      const queues = Date.now() - s2;
      console.log(`     10^5 queued jobs (enqueued in ${enq} ms, 1000 a request): login to the newest 50 listed ${list} ms as the harness sees it, ${inPage} ms in the page (${calls}); next page ${next} ms; queue list with counts ${queues} ms`);
    } finally {
      await v1("DELETE", `/queues/${q}`); // cancels its queued jobs, so that later scenarios see a quiet server
    }
  },
};

// Scenarios run two at a time, each in its own browser context: most wait
// on the server more than they compute. One that fills or frees the
// backends, stops a server or prints a time runs alone, after everything
// before it has ended, so scenarios that depend on an earlier one (the
// stopped scheduler) still follow it.
const alone = new Set([
  "queue position shows when the backends are busy",
  "the dashboard shows a running task",
  "a multi-node dashboard names the leading scheduler, and says when none leads",
  "Stop ends a long-running figure and frees its backend",
  "embed.js on another origin's page turns asy blocks into figures and errors",
  "symbols: dra completes to draw with its signatures, hover shows them, import gr offers graph",
  "time from page load to the default figure, cold and warm (printed, not asserted)",
  "jobs: the queue list counts jobs per state; pause and resume",
  "jobs: time from login to a list of 10^5 queued jobs (printed, not asserted)",
]);
for (const name of alone) if (!scenarios[name]) throw new Error(`alone: no scenario "${name}"`);
const lanes = Number(process.env.USHER_WEBTEST_LANES || 2);

let failed = 0;
async function runScenario(name, fn) {
  const page = await freshPage();
  const start = Date.now();
  try {
    await fn(page);
    console.log(`ok   ${name} (${Date.now() - start} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.message.split("\n")[0]}`);
  }
  await page.screenshot({ path: join(artifacts, name.replace(/[^a-z0-9]+/gi, "-") + ".png") }).catch(() => {});
  await page.context().close();
}

const t0 = Date.now();
const running = new Set();
for (const [name, fn] of Object.entries(scenarios)) {
  if (only && !name.includes(only)) continue;
  if (alone.has(name)) {
    await Promise.all(running);
    await runScenario(name, fn);
    continue;
  }
  if (running.size >= lanes) await Promise.race(running);
  const run = runScenario(name, fn).finally(() => running.delete(run));
  running.add(run);
}
await Promise.all(running);
await browser.close();
console.log(`${failed ? "FAIL" : "ok"}: ${failed} failed, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
process.exit(failed ? 1 : 0);
