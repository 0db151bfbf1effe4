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
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} > 0)); then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! command -v go >/dev/null 2>&1; then
  echo "deps: the Go toolchain is missing; install Go $(sed -n 's/^go //p' go.mod) or newer into /usr/local/go" >&2
  exit 1
fi

# Pre-fetch modules, including the pinned staticcheck tool, so tests need no network.
go mod download
