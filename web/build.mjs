// Builds web/src into internal/webapp/dist deterministically: fixed file
// names, no timestamps, no source maps, so `make test` can compare bytes.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2] || join(here, "..", "internal", "webapp", "dist");
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "assets"), { recursive: true });
await esbuild.build({
  absWorkingDir: here,
  entryPoints: { app: "src/app.js", dashboard: "src/dashboard.js", tex: "src/tex.js", jobs: "src/jobs/main.js", style: "src/style.css" },
  outdir: join(out, "assets"),
  bundle: true, minify: true, format: "iife", target: "es2020",
  legalComments: "none", logLevel: "warning",
});
for (const f of ["index.html", "dashboard.html", "tex.html", "jobs.html"]) copyFileSync(join(here, "src", f), join(out, f));
