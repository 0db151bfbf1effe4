#!/usr/bin/env bash
# estimates-redis.sh: the queue-wait estimate benchmark (bench/asyload
# -mode estimates) against multi-node mode on this machine: a
# redis-server, one scheduler, N backends and one queue server, all on
# loopback, stopped at the end. Flags after -- go to asyload.
#
#   bench/estimates-redis.sh [-b BACKENDS] [-- ASYLOAD FLAGS]
#   bench/estimates-redis.sh -b 2 -- -clients 40 -every 150ms -runs 3
set -euo pipefail
backends=2
while [[ $# -gt 0 ]]; do
	case $1 in
	-b) backends=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "usage: $0 [-b BACKENDS] [-- ASYLOAD FLAGS]" >&2; exit 2 ;;
	esac
done
dir=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# waitlog FILE REGEX: the first match's first group, within 60 s.
waitlog() {
	for _ in $(seq 600); do
		if m=$(grep -oP "$2" "$1" 2>/dev/null | head -1) && [[ -n $m ]]; then echo "$m"; return; fi
		sleep 0.1
	done
	echo "timed out waiting for $2 in $1:" >&2; cat "$1" >&2; exit 1
}

go build -o "$dir/usher" ./cmd/usher
go build -o "$dir/asyload" ./bench/asyload
rport=$(freeport)
redis-server --port "$rport" --bind 127.0.0.1 --dir "$dir" --save '' --appendonly no >"$dir/redis.log" 2>&1 &
pids+=($!)
waitlog "$dir/redis.log" 'Ready to accept connections' >/dev/null
url=redis://127.0.0.1:$rport
"$dir/usher" scheduler --redis "$url" --node sched --listen 127.0.0.1:0 --admin-token-file "$dir/admin.token" \
	--medium-limit "$backends" >"$dir/sched.log" 2>&1 &
pids+=($!)
for i in $(seq "$backends"); do
	"$dir/usher" backend --redis "$url" --listen 127.0.0.1:0 >"$dir/backend-$i.log" 2>&1 &
	pids+=($!)
	waitlog "$dir/backend-$i.log" 'listening.* addr=\K\S+' >/dev/null
done
"$dir/usher" serve --redis "$url" --node front --listen 127.0.0.1:0 --data "$dir/front.db" --cache-bytes 0 \
	--max-queued-per-client 100000 >"$dir/front.log" 2>&1 &
pids+=($!)
addr=$(waitlog "$dir/front.log" 'msg="usher serving" addr=\K\S+')
"$dir/asyload" -mode estimates -url "ws://$addr/asy" "$@"
