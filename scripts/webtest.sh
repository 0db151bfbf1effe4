#!/usr/bin/env bash
# Starts bin/usher serve on a free loopback port with a fresh data file and
# two local backends (both may run slow tasks), runs the browser scenarios
# (web/test/run.mjs) against it, and stops it. Screenshots land in
# web/test/artifacts/.
set -euo pipefail
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
token="usher_webtest-$(date +%s%N)"
./bin/usher serve --admin-token "$token" --listen "127.0.0.1:$port" --data "$tmp/usher.db" --backends 2 --medium-limit 2 --slow-limit 2 --log-level warn >"$tmp/serve.log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.log" >&2; exit 1; }
  sleep 0.1
done
USHER_URL="http://127.0.0.1:$port" USHER_TOKEN="$token" node web/test/run.mjs || { echo "--- usher serve log" >&2; tail -50 "$tmp/serve.log" >&2; exit 1; }
