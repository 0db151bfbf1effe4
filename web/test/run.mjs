// Browser scenarios in real Chromium (Debian's /usr/bin/chromium) driven by
// playwright-core, against a running `usher serve` at $USHER_URL.
// Each scenario saves a screenshot under web/test/artifacts/.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const base = process.env.USHER_URL || "http://127.0.0.1:8080";
const artifacts = join(dirname(fileURLToPath(import.meta.url)), "artifacts");
mkdirSync(artifacts, { recursive: true });
const only = process.argv[2];

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
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
    await page.click("#compile");
    await page.waitForFunction(() => document.getElementById("status").textContent === "connecting…" || true);
    await page.waitForFunction(() => !document.getElementById("stop").disabled === false && /^done/.test(document.getElementById("status").textContent), null, { timeout: 30000 });
    await waitDone(page);
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
    const blockers = [];
    for (let i = 0; i < 2; i++) {
      const p = await freshPage();
      await p.goto(base + "/");
      // 10 s blockers (the test server allows two medium tasks): a 3 s one
      // could end before the third task is even sent on a loaded machine.
      await setSource(p, `while(true){} // blocker ${i} ${Date.now()}\n`);
      await p.selectOption("#timeout", "10000");
      await p.click("#compile");
      await p.waitForFunction(() => /^running/.test(document.getElementById("status").textContent), null, { timeout: 10000 });
      blockers.push(p);
    }
    await page.goto(base + "/");
    await setSource(page, `size(1cm); draw(unitcircle); // ${Date.now()}\n`);
    await page.click("#compile");
    await page.waitForFunction(() => /^queued/.test(document.getElementById("status").textContent), null, { timeout: 10000 });
    await page.screenshot({ path: join(artifacts, "queue-position-shows-while-queued.png") });
    for (const p of blockers) await p.context().close(); // frees both backends
    await waitDone(page);
  },
  async "the dashboard shows a running task"(page) {
    const runner = await freshPage();
    await runner.goto(base + "/");
    await setSource(runner, `while(true){} // dash ${Date.now()}\n`);
    await runner.selectOption("#timeout", "3000");
    await runner.click("#compile");
    await page.goto(base + "/dashboard");
    await page.waitForFunction(() => { const r = document.querySelector("#running tbody td"); return r && !r.classList.contains("empty"); }, null, { timeout: 10000 });
    await runner.context().close();
  },
};

let failed = 0;
const t0 = Date.now();
for (const [name, fn] of Object.entries(scenarios)) {
  if (only && !name.includes(only)) continue;
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
await browser.close();
console.log(`${failed ? "FAIL" : "ok"}: ${failed} failed, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
process.exit(failed ? 1 : 0);
