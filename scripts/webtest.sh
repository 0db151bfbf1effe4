#!/usr/bin/env bash
# Starts bin/usher serve on a free loopback port with a fresh data file and
# two local backends (both may run slow tasks), a second one with --auth
# (one backend), and a small multi-node
# deployment (a redis-server, one usher scheduler, one usher serve --redis)
# for the multi-node dashboard; runs the browser scenarios
# (web/test/run.mjs) against them, and stops them. Screenshots land in
# web/test/artifacts/.
set -euo pipefail
tmp=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
token="usher_webtest-$(date +%s%N)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# wait_ready URL PID LOG: polls URL until it answers (60 s: sandboxes start
# slowly on a busy machine, three at once here), failing when PID exits.
wait_ready() {
  for _ in $(seq 600); do
    curl -fs "$1" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || { cat "$3" >&2; exit 1; }
    sleep 0.1
  done
  echo "webtest: $1 not ready" >&2; cat "$3" >&2; exit 1
}
# The embed scenario's forum page is served from this other origin, which
# the main server allows (--allowed-origins).
fport=$(free_port)
./bin/usher serve --admin-token "$token" --allowed-origins "http://localhost:$fport" --listen "127.0.0.1:$port" --data "$tmp/usher.db" --backends 2 --medium-limit 2 --slow-limit 2 --log-level warn >"$tmp/serve.log" 2>&1 &
pid=$!
pids+=("$pid")

aport=$(free_port)
./bin/usher serve --auth --admin-token "$token" --listen "127.0.0.1:$aport" --data "$tmp/auth.db" --backends 1 --log-level warn >"$tmp/auth.log" 2>&1 &
apid=$!
pids+=("$apid")

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --dir "$tmp" --save "" --appendonly no --logfile "$tmp/redis.log" &
pids+=($!)
mport=$(free_port)
./bin/usher serve --redis "redis://127.0.0.1:$rport" --listen "127.0.0.1:$mport" --data "$tmp/multi.db" --log-level warn >"$tmp/multi.log" 2>&1 &
mpid=$!
pids+=("$mpid")
./bin/usher scheduler --redis "redis://127.0.0.1:$rport" --node webtest-sched --listen 127.0.0.1:0 --admin-token "$token" --log-level warn >"$tmp/sched.log" 2>&1 &
spid=$!
pids+=("$spid")
# All three start at once, so that their sandboxes' start-up checks overlap.
wait_ready "http://127.0.0.1:$port/readyz" "$pid" "$tmp/serve.log"
wait_ready "http://127.0.0.1:$aport/readyz" "$apid" "$tmp/auth.log"
wait_ready "http://127.0.0.1:$mport/readyz" "$mpid" "$tmp/multi.log"

USHER_URL="http://127.0.0.1:$port" USHER_FORUM_PORT="$fport" USHER_TOKEN="$token" USHER_AUTH_URL="http://127.0.0.1:$aport" USHER_MULTINODE_URL="http://127.0.0.1:$mport" USHER_SCHEDULER_PID="$spid" \
  node web/test/run.mjs "$@" || { echo "--- usher serve log" >&2; tail -n 50 "$tmp/serve.log" >&2; echo "--- multi-node logs" >&2; tail -n 20 "$tmp/multi.log" "$tmp/sched.log" "$tmp/auth.log" >&2; exit 1; }
