#!/usr/bin/env bash
# startup.sh: seconds from starting `usher serve` (the embedded default:
# a fresh SQLite file, local sandboxed backends) to /readyz answering 200,
# which includes the sandbox's start-up check and the editor's catalogs
# (asy's symbols, the TeX list).
#
#   bench/startup.sh [-n RUNS] BIN [OTHER_BIN]
#
# With OTHER_BIN the two alternate, run by run, so that a comparison is
# made under the same load. Prints every run, then each binary's median.
set -euo pipefail

runs=3
while [[ $# -gt 0 ]]; do
	case $1 in
	-n) runs=$2; shift 2 ;;
	-h | --help) sed -n '2,10p' "$0"; exit 0 ;;
	*) break ;;
	esac
done
[[ $# -ge 1 ]] || { sed -n '2,10p' "$0" >&2; exit 2; }
bins=("$@")

tmp=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# once BIN: one start, in seconds.
once() {
	local port data t0 t1
	port=$(free_port)
	data=$(mktemp -d -p "$tmp")
	t0=$(date +%s%N)
	"$1" serve --listen "127.0.0.1:$port" --data "$data/usher.db" --log-level warn >"$data/log" 2>&1 &
	pid=$!
	until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
		kill -0 "$pid" 2>/dev/null || { echo "startup: $1 serve exited:" >&2; cat "$data/log" >&2; exit 1; }
		sleep 0.02
	done
	t1=$(date +%s%N)
	kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", (b - a) / 1e9 }'
}

declare -A times
for ((i = 1; i <= runs; i++)); do
	for b in "${bins[@]}"; do
		t=$(once "$b")
		times[$b]+="$t "
		echo "run $i  $b  ${t} s"
	done
done
for b in "${bins[@]}"; do
	echo "median $b  $(tr ' ' '\n' <<<"${times[$b]}" | grep . | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }') s"
done
