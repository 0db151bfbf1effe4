#!/usr/bin/env bash
# cycleratio.sh: the scheduling core's BenchmarkCycle at queued=1000 and
# queued=1000000, measured together many times, so that the ratio the
# scheduling-core goals speak of (op at 10^6 ÷ op at 10^3) comes from
# figures taken seconds apart on this shared, noisy machine.
#
#   bench/cycleratio.sh [-n RUNS] [-ops OPS] [BASE_REV]
#   bench/cycleratio.sh -rate [-n RUNS] [-ops OPS]
#
# Each run is one process that measures 10^3 and then 10^6 (filling the
# queue takes a few seconds). With BASE_REV, the same runs of that
# revision's core alternate with this tree's, in ABBA order (a run right
# after another's exit is often slower), for an A/B comparison.
# Prints every run, then the median of each column and of the ratios.
# With -rate, each run measures BenchmarkCycle and BenchmarkCycleRate (rate
# keys in the mix) at 10^3 and 10^6 in one process instead, and the ratios
# are rate ÷ plain.
set -euo pipefail

runs=9
ops=1000000
rate=
while [[ $# -gt 0 ]]; do
	case $1 in
	-n) runs=$2; shift 2 ;;
	-ops) ops=$2; shift 2 ;;
	-rate) rate=1; shift ;;
	-h | --help) sed -n '2,17p' "$0"; exit 0 ;;
	*) break ;;
	esac
done
base=${1:-}

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$root" && go test -c -o "$tmp/this.test" ./internal/sched/)
if [[ -n $rate ]]; then
	for ((r = 1; r <= runs; r++)); do
		"$tmp/this.test" -test.run '^$' -test.bench '^BenchmarkCycle(Rate)?$/^queued=(1000|1000000)$' \
			-test.benchtime "${ops}x" |
			awk -v r="$r" '
				/^BenchmarkCycle\/queued=1000-/ { p3 = $3 }
				/^BenchmarkCycle\/queued=1000000-/ { p6 = $3 }
				/^BenchmarkCycleRate\/queued=1000-/ { r3 = $3 }
				/^BenchmarkCycleRate\/queued=1000000-/ { r6 = $3 }
				END { printf "run %d: 10^3 %.0f/%.0f ns  ratio %.3f  10^6 %.0f/%.0f ns  ratio %.3f\n", r, r3, p3, r3 / p3, r6, p6, r6 / p6 }'
	done | tee "$tmp/runs"
	awk '
		{ a[NR] = $7; b[NR] = $12 }
		function median(x, n,   i, j, t) {
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
			return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
		}
		END { printf "median of %d runs: rate/plain at 10^3 %.3f, at 10^6 %.3f\n", NR, median(a, NR), median(b, NR) }' "$tmp/runs"
	exit 0
fi
binaries=(this)
if [[ -n $base ]]; then
	git -C "$root" archive "$base" | tar -x -C "$tmp" --one-top-level=base
	(cd "$tmp/base" && go test -c -o "$tmp/base.test" ./internal/sched/)
	binaries+=(base)
fi

for ((r = 1; r <= runs; r++)); do
	order=("${binaries[@]}")
	if ((r % 2 == 0)); then # ABBA: neither binary always runs right after the other
		order=($(printf '%s\n' "${binaries[@]}" | tac))
	fi
	for b in "${order[@]}"; do
		"$tmp/$b.test" -test.run '^$' -test.bench '^BenchmarkCycle$/^queued=(1000|1000000)$' \
			-test.benchtime "${ops}x" |
			awk -v b="$b" -v r="$r" '
				/queued=1000-/ { small = $3 }
				/queued=1000000-/ { large = $3 }
				END { printf "%s run %d: 10^3 %.0f ns  10^6 %.0f ns  ratio %.2f\n", b, r, small, large, large / small }'
	done
done | tee "$tmp/runs"

for b in "${binaries[@]}"; do
	grep "^$b " "$tmp/runs" | awk -v b="$b" '
		{ s[NR] = $5; l[NR] = $8; q[NR] = $11 }
		function median(a, n,   i, j, t) {
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
			return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		}
		END { printf "%s median of %d runs: 10^3 %.0f ns  10^6 %.0f ns  ratio %.2f\n", b, NR, median(s, NR), median(l, NR), median(q, NR) }'
done
