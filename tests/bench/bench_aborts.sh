#!/usr/bin/env bash
# Benchmark (not a test): the cost of the trace channel on a program that aborts in a
# loop thousands of times a second. Runs abort_loop.lua without and with the probes
# attached and prints the wall-time ratio and the kernel cost per abort event
# (bpf_stats run_time_ns / run_cnt; kernel.bpf_stats_enabled is restored afterwards).
# usage: sudo tests/bench/bench_aborts.sh [BUILD_DIR] [ROUNDS] [RUNS]
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$SRC/build}
ROUNDS=${2:-20000}
RUNS=${3:-5}
LUAJIT=$BUILD/luajit/bin/luajit
PROG=$SRC/tests/bench/abort_loop.lua

[ "$(id -u)" = 0 ] || { echo "bench_aborts.sh: needs root (BPF)" >&2; exit 77; }
[ -x "$LUAJIT" ] || { echo "bench_aborts.sh: build first ($LUAJIT missing)" >&2; exit 1; }

TMP=$(mktemp -d)
OLD_STATS=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() { sysctl -qw kernel.bpf_stats_enabled="$OLD_STATS"; rm -rf "$TMP"; }
trap cleanup EXIT

cc -O2 -o "$TMP/trace_attach" "$SRC/tests/bench/trace_attach.c" \
  -I"$SRC/include" -I"$BUILD/bpf" -I"$BUILD/gen" "$BUILD/libnupp.a" \
  $(pkg-config --libs --static libbpf libelf jansson) -lm

# Runs the driver (args: [-n]) once; appends "aborts run_time_ns run_cnt wall_ns" to $1.
run() {
  local out=$1; shift
  "$TMP/trace_attach" "$@" "$LUAJIT" "$LUAJIT" "$PROG" "$ROUNDS" >/dev/null 2>"$TMP/last.err" ||
    { cat "$TMP/last.err" >&2; exit 1; }
  grep '^aborts=' "$TMP/last.err" | sed 's/[a-z_]*=//g' | awk '{print $1, $3, $4, $5}' >>"$out"
}

# The median of column $1 of file $2.
median() { awk -v c="$1" '{print $c}' "$2" | sort -n |
  awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

sysctl -qw kernel.bpf_stats_enabled=1
EVENTS=$(ABORT_LOOP_COUNT=1 "$LUAJIT" "$PROG" "$ROUNDS")
: >"$TMP/base"; : >"$TMP/probed"
for _ in $(seq "$RUNS"); do
  run "$TMP/base" -n
  run "$TMP/probed"
done
awk '{print $1, $2, $3, $4, $2 / $3}' "$TMP/probed" >"$TMP/probed2"

BASE=$(median 4 "$TMP/base")
PROBED=$(median 4 "$TMP/probed")
ABORTS=$(median 1 "$TMP/probed")
PER_EVENT_NS=$(median 5 "$TMP/probed2")
WALL_PER_EVENT_NS=$(awk -v p="$PROBED" -v b="$BASE" -v n="$ABORTS" 'BEGIN {printf "%.0f", (p - b) / n}')

printf '%-44s %s\n' "program" "abort_loop.lua $ROUNDS rounds (median of $RUNS runs)"
printf '%-44s %s\n' "abort events (jit.attach count)" "$EVENTS"
printf '%-44s %s\n' "abort events (BPF, include_benign)" "$ABORTS"
printf '%-44s %s\n' "abort rate without probes (events/s)" "$(awk -v n="$EVENTS" -v b="$BASE" 'BEGIN {printf "%.0f", n / (b / 1e9)}')"
printf '%-44s %s\n' "wall time without probes (s)" "$(awk -v b="$BASE" 'BEGIN {printf "%.3f", b / 1e9}')"
printf '%-44s %s\n' "wall time with probes (s)" "$(awk -v p="$PROBED" 'BEGIN {printf "%.3f", p / 1e9}')"
printf '%-44s %s\n' "wall-time ratio (with / without)" "$(awk -v p="$PROBED" -v b="$BASE" 'BEGIN {printf "%.4f", p / b}')"
printf '%-44s %s\n' "wall cost per abort, uprobe trap incl. (ns)" "$WALL_PER_EVENT_NS"
printf '%-44s %s\n' "BPF run_time_ns / run_cnt per abort (ns)" "$(awk -v x="$PER_EVENT_NS" 'BEGIN {printf "%.0f", x}')"
