#!/usr/bin/env bash
# Installs what usher needs to build and test, and nothing when all is there.
# Debian packages come from apt-get (one update, then one install of the
# missing ones); Go tools are pinned in go.mod and fetched by the go command.
set -euo pipefail

# Debian packages the build and the tests need. Grows with the project.
packages=(
  ca-certificates
  git
  make
  # The sandboxed Asymptote backend: asy itself, the sandbox, and what asy
  # calls for svg (dvisvgm) and pdf/png (ghostscript).
  asymptote
  bubblewrap
  dvisvgm
  ghostscript
  # 3D: a virtual display per task for asy's OpenGL rendering (Mesa's
  # software renderer comes with asymptote's libgl1), and repstopdf, which
  # asy calls for a png that mixes 2D and rendered 3D.
  xvfb
  texlive-font-utils
  # The TeX a user expects in a label: Times, Palatino and the other
  # PostScript fonts (mathptmx needs their metrics and Type 1 files), and
  # the LaTeX packages beyond the recommended set (ocgx2's PDF layers,
  # and more). The sandbox sees them under /usr (docs/sandbox.md).
  texlive-fonts-recommended
  texlive-latex-extra
  # The web front end's browser tests drive Debian's chromium.
  chromium
  # Multi-node mode's tests start real Redis servers and build a Redis
  # Cluster with redis-cli; the generic-jobs bench (bench/jobsbench, whose
  # smoke run is part of make test) runs hibiken/asynq on redis-server too.
  redis-server
  redis-tools
  # ... and riverqueue/river on a PostgreSQL cluster it creates with
  # initdb (it starts no Debian service).
  postgresql
  # The Python client (clients/python) and its tests, in Debian's python3.
  python3
  python3-httpx
  # The reverse-proxy test runs nginx, with the configuration the docs
  # print (docs/nginx-usher.conf), in front of usher serve.
  nginx
)
# node and npm build the bundle (esbuild) and drive the browser tests
# (playwright-core); Debian's packages only when no node is on the PATH.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

source "$(dirname "$0")/apt-missing.sh"
apt_install_missing deps "${packages[@]}"

if ! command -v go >/dev/null 2>&1; then
  echo "deps: the Go toolchain is missing; install Go $(sed -n 's/^go //p' go.mod) or newer into /usr/local/go" >&2
  exit 1
fi

# The web front end's npm packages, exactly as pinned in web/package-lock.json.
# web/node_modules/.usher-lock is the lock file of the last npm ci.
if ! cmp -s web/package-lock.json web/node_modules/.usher-lock; then
  echo "deps: npm ci in web/"
  (cd web && npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.usher-lock)
fi

# Pre-fetch modules, including the pinned staticcheck tool, so tests need no
# network; bench/jobsbench is a module of its own (the anchors it measures).
go mod download
(cd bench/jobsbench && go mod download)
