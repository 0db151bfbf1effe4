// Helpers of the job browser's scenarios (run.mjs, "job browser"): /v1
// calls with the admin token, tokens of other roles, queues of their own
// per scenario, and real `usher agent` processes (bin/usher) that run a
// small shell script per job.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const base = process.env.USHER_URL || "http://127.0.0.1:8080";
const admin = process.env.USHER_TOKEN;

// v1 calls /v1 path with token (the admin's by default) and answers the
// decoded JSON; a failure throws with the server's error text.
export async function v1(method, path, body, token = admin) {
  const res = await fetch(base + "/v1" + path, {
    method, headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} /v1${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

// newToken creates a token of role and answers its secret.
export async function newToken(role) {
  return (await v1("POST", "/tokens", { name: `webtest-${role}-${Date.now()}`, role })).token;
}

// newQueue creates a queue named after label, unique to this run.
export async function newQueue(label, extra = {}) {
  const name = `jb-${label}-${Date.now().toString(36)}${Math.floor(Math.random() * 1e4)}`;
  await v1("POST", "/queues", { name, ...extra });
  return name;
}

// enqueue submits specs (each gets queue) and answers their ids.
export async function enqueue(queue, specs) {
  return (await v1("POST", "/jobs", { jobs: specs.map((s) => ({ queue, ...s })) })).ids;
}

// SCRIPT is what the agents run per job, its payload (a JSON string) as
// $1: "fail:TEXT" prints TEXT and exits 3; "gate:FILE" reports progress
// 0.5, then waits until FILE exists; anything else succeeds at once. A
// success reports the result {"ok":true} and prints "done PAYLOAD".
const SCRIPT = `a="$1"
case "$a" in
  fail:*) printf '%s\\n' "\${a#fail:}"; exit 3;;
  gate:*) echo "progress 0.5 waiting for the gate" >&3; while [ ! -e "\${a#gate:}" ]; do sleep 0.05; done;;
esac
echo 'result {"ok":true}' >&3
printf 'done %s\\n' "$a"`;

let agentToken = null;
// startAgent runs `usher agent` on queue; stop() ends it (SIGKILL: its
// queue is the scenario's own, what it held does not matter after).
export async function startAgent(queue, concurrency = 4) {
  agentToken ||= await newToken("agent");
  const p = spawn("./bin/usher", ["agent", "--server", base, "--token", agentToken, "--queue", queue, "--concurrency", String(concurrency),
    "--wait", "1s", "--name", `webtest-${queue}`, "--log-level", "warn", "--", "sh", "-c", SCRIPT, "job"], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  p.stderr.on("data", (d) => { log += d; });
  return { stop: () => p.kill("SIGKILL"), log: () => log };
}

// gate answers a file name for a "gate:" job and open(), which lets it end.
export function gate() {
  const file = join(mkdtempSync(join(tmpdir(), "jobsgate-")), "open");
  return { payload: `gate:${file}`, open: () => writeFileSync(file, "") };
}

// logInJobs opens path of the job browser and logs in with token there.
export async function logInJobs(page, path, token = admin) {
  await page.goto(base + path);
  await page.waitForSelector("#login-form:not([hidden])");
  await page.fill("#token", token);
  await page.click("#login");
  await page.waitForSelector("#who:not(:empty)", { timeout: 10000 });
}

// waitJob polls GET /v1/jobs/{id} until ok(job) holds (10 s).
export async function waitJob(id, ok, what) {
  let j;
  for (const end = Date.now() + 10000; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) {
    j = await v1("GET", `/jobs/${id}`);
    if (ok(j)) return j;
  }
  throw new Error(`job ${id} never ${what}: ${JSON.stringify(j)}`);
}

// waitText waits until the text of selector's element matches re (10 s).
export async function waitText(page, selector, re, timeout = 10000) {
  await page.waitForFunction(([s, src, flags]) => new RegExp(src, flags).test(document.querySelector(s)?.textContent ?? ""), [selector, re.source, re.flags], { timeout })
    .catch(async () => { throw new Error(`${selector} shows ${JSON.stringify(await page.$eval(selector, (e) => e.textContent).catch(() => "(absent)"))}, never ${re}`); });
}

// rowIds answers the ids of the job list's rows, in order.
export const rowIds = (page) => page.$$eval("#jobs tbody tr[data-key]", (trs) => trs.map((t) => t.dataset.key));

// waitRows waits until the job list shows n rows.
export async function waitRows(page, n, timeout = 10000) {
  await page.waitForFunction((n) => document.querySelectorAll("#jobs tbody tr[data-key]").length === n, n, { timeout })
    .catch(async () => { throw new Error(`the list shows ${(await rowIds(page)).length} rows, never ${n}`); });
}
