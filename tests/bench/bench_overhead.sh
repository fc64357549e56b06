#!/usr/bin/env bash
# Benchmark (not a test): wall-time overhead of nupp-bpf record on CPU-bound LuaJIT
# workloads (tests/bench/workloads, fixed work, self-timed; loader.lua is the worst case
# for the prototype lifetime probes), against no profiler and
# LuaJIT's own jit.p (-jp=i1, 1 ms interval).
# Prints a table of median ratios to the unprofiled run over RUNS paired runs (each
# profiled run is paired with an unprofiled twin running at the same time), and the
# kernel cost per sample of the sampling program (bpf_stats run_time_ns / run_cnt).
# usage: sudo tests/bench/bench_overhead.sh [RUNS]   (from a built tree: build/)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
NUPP=${NUPP_BPF:-$top/build/nupp-bpf}
LJ=${NUPP_LUAJIT:-$top/build/luajit/bin/luajit}
RUNS=${1:-5}
W="$top/tests/bench/workloads"
tmp=$(mktemp -d)
old_stats=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled="$old_stats"; rm -rf "$tmp"' EXIT
[ "$(id -u)" = 0 ] || { echo "bench: run as root" >&2; exit 1; }

# The workload's own wall time (it prints "elapsed S" on stderr, measured with
# CLOCK_MONOTONIC from its first line to its last), so the profiler's start-up and
# tear-down (BPF load, uprobe attach/detach) are not counted as overhead on the program.
elapsed() { awk '/^elapsed / {print $2}' "$1"; }

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# One paired run: the workload unprofiled and profiled (mode) AT THE SAME TIME, one per
# CPU, so both see the same machine speed (this VM's speed drifts by tens of percent
# from one minute to the next); prints profiled/unprofiled.
pair() {
  local mode=$1 wl=$2 prof
  case $mode in
    nupp99) prof=("$NUPP" record -q -F 99 -o "$tmp/p99.json" -- "$LJ" "$W/$wl.lua") ;;
    nupp1000) prof=("$NUPP" record -q -F 1000 -o "$tmp/p1000.json" -- "$LJ" "$W/$wl.lua") ;;
    jp1) prof=("$LJ" -jp=i1 "$W/$wl.lua") ;;
  esac
  "$LJ" "$W/$wl.lua" >/dev/null 2>"$tmp/base.err" & local b=$!
  "${prof[@]}" >/dev/null 2>"$tmp/prof.err" & local p=$!
  wait "$b" && wait "$p" || { cat "$tmp/base.err" "$tmp/prof.err" >&2; exit 1; }
  elapsed "$tmp/base.err" >>"$tmp/base"
  awk -v a="$(elapsed "$tmp/prof.err")" -v b="$(elapsed "$tmp/base.err")" 'BEGIN {print a / b}'
}

printf '%-10s %10s %12s %14s %12s\n' workload "none (s)" "nupp 99 Hz" "nupp 1000 Hz" "jit.p i1"
for wl in numeric interp tables loader; do
  : >"$tmp/base"
  for m in nupp99 nupp1000 jp1; do : >"$tmp/$m"; done
  for _ in $(seq "$RUNS"); do
    for m in nupp99 nupp1000 jp1; do pair "$m" "$wl" >>"$tmp/$m"; done
  done
  row=$(printf '%-10s %10.3f' "$wl" "$(median <"$tmp/base")")
  for m in nupp99 nupp1000 jp1; do row+=$(printf ' %13.3fx' "$(median <"$tmp/$m")"); done
  echo "$row"
done

# Kernel cost per sample at 1000 Hz, from BPF run-time statistics.
sysctl -qw kernel.bpf_stats_enabled=1
echo
for wl in numeric interp tables loader; do
  "$NUPP" -v record -F 1000 -o "$tmp/p.json" -- "$LJ" "$W/$wl.lua" 2>"$tmp/stats" >/dev/null
  grep -E '^nupp-bpf: bpf ' "$tmp/stats" | sed "s/^nupp-bpf: bpf /$wl: /"
done
