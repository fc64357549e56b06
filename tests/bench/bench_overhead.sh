#!/usr/bin/env bash
# Benchmark (not a test): overhead of nupp-bpf record on CPU-bound LuaJIT workloads
# (tests/bench/workloads, fixed work, self-timed; loader.lua is the worst case for the
# prototype lifetime probe), against no profiler and LuaJIT's own jit.p (-jp=i1, 1 ms
# interval).
# Prints two tables of median ratios to the unprofiled run over RUNS paired runs (each
# profiled run is paired with an unprofiled twin running at the same time on the same
# CPU): of the workload's wall time, and of its own CPU time (os.clock: what the profiler
# costs the target, the kernel's sampling work included). With BASE (another build directory,
# e.g. of the main branch in a git worktree), its nupp-bpf at 1000 Hz is measured in the
# same minutes, alternating with this one. Then the kernel cost per sample of the
# sampling program (bpf_stats run_time_ns / run_cnt).
# usage: sudo tests/bench/bench_overhead.sh [RUNS] [BASE] [WORKLOADS]   (from a built tree: build/)
#   WORKLOADS: space-separated, default "numeric interp tables loader"
#   MODES=... (environment): which of nupp99 nupp1000 base1000 jp1 to run
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
NUPP=${NUPP_BPF:-$top/build/nupp-bpf}
LJ=${NUPP_LUAJIT:-$top/build/luajit/bin/luajit}
RUNS=${1:-5}
BASE=${2:-}
WLS=${3:-numeric interp tables loader}
W="$top/tests/bench/workloads"
tmp=$(mktemp -d)
old_stats=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled="$old_stats"; rm -rf "$tmp"' EXIT
[ "$(id -u)" = 0 ] || { echo "bench: run as root" >&2; exit 1; }
modes=${MODES:-nupp99 nupp1000 jp1}
if [ -n "$BASE" ]; then
  BASE=$(cd "$BASE" && pwd)
  [ -x "$BASE/nupp-bpf" ] && [ -x "$BASE/luajit/bin/luajit" ] || { echo "bench: $BASE is not a built tree" >&2; exit 1; }
  modes=${MODES:-nupp99 nupp1000 base1000 jp1}
fi

# The workload's own wall time and CPU time (it prints "elapsed S" and "cpu S" on
# stderr, from its first line to its last), so the profiler's start-up and tear-down
# (BPF load, uprobe attach/detach) are not counted as overhead on the program.
field() { awk -v k="$2" '$1 == k {print $2}' "$1"; }

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
range() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.3f-%.3f", lo, hi}'; }

# One paired run: the workload unprofiled and profiled (mode) AT THE SAME TIME ON THE SAME
# CPU (CPU 0, taking turns), so both see the same machine speed at the same moments (this
# VM's speed drifts by tens of percent from one minute to the next, and two CPUs differ:
# twins on two CPUs differed by up to 1.34x, on one CPU by 0.7 %); nupp-bpf itself runs
# on CPU 1. Appends profiled/unprofiled wall and CPU ratios.
pair() {
  local mode=$1 wl=$2 prof lj=$LJ
  local on0=(taskset -c 0)
  case $mode in
    nupp99) prof=(taskset -c 1 "$NUPP" record -q -F 99 -o "$tmp/p.json" -- "${on0[@]}" "$LJ" "$W/$wl.lua") ;;
    nupp1000) prof=(taskset -c 1 "$NUPP" record -q -F 1000 -o "$tmp/p.json" -- "${on0[@]}" "$LJ" "$W/$wl.lua") ;;
    base1000)
      lj=$BASE/luajit/bin/luajit
      prof=(taskset -c 1 "$BASE/nupp-bpf" record -q -F 1000 -o "$tmp/p.json" -- "${on0[@]}" "$lj" "$W/$wl.lua") ;;
    jp1) prof=("${on0[@]}" "$LJ" -jp=i1 "$W/$wl.lua") ;;
  esac
  "${on0[@]}" "$lj" "$W/$wl.lua" >/dev/null 2>"$tmp/base.err" & local b=$!
  "${prof[@]}" >/dev/null 2>"$tmp/prof.err" & local p=$!
  wait "$b" && wait "$p" || { cat "$tmp/base.err" "$tmp/prof.err" >&2; exit 1; }
  field "$tmp/base.err" elapsed >>"$tmp/base"
  awk -v a="$(field "$tmp/prof.err" elapsed)" -v b="$(field "$tmp/base.err" elapsed)" \
    'BEGIN {print a / b}' >>"$tmp/$mode.wall"
  awk -v a="$(field "$tmp/prof.err" cpu)" -v b="$(field "$tmp/base.err" cpu)" \
    'BEGIN {print a / b}' >>"$tmp/$mode.cpu"
}

declare -A rows
for wl in $WLS; do
  : >"$tmp/base"
  for m in $modes; do : >"$tmp/$m.wall"; : >"$tmp/$m.cpu"; done
  for _ in $(seq "$RUNS"); do
    for m in $modes; do pair "$m" "$wl"; done
  done
  for kind in wall cpu; do
    row=$(printf '%-10s %10.3f' "$wl" "$(median <"$tmp/base")")
    for m in $modes; do row+=$(printf ' %6.3fx (%s)' "$(median <"$tmp/$m.$kind")" "$(range <"$tmp/$m.$kind")"); done
    rows[$kind]+="$row"$'\n'
  done
done
for kind in wall cpu; do
  echo "$kind time of the workload, profiled / unprofiled twin (median, min-max of $RUNS pairs):"
  printf '%-10s %10s' workload "none (s)"
  for m in $modes; do printf ' %-21s' "$m"; done
  echo
  printf '%s' "${rows[$kind]}"
  echo
done

# Kernel cost per sample at 1000 Hz, from BPF run-time statistics.
sysctl -qw kernel.bpf_stats_enabled=1
for wl in $WLS; do
  "$NUPP" -v record -F 1000 -o "$tmp/p.json" -- "$LJ" "$W/$wl.lua" 2>"$tmp/stats" >/dev/null
  grep -E '^nupp-bpf: (bpf |prototypes: )' "$tmp/stats" | sed "s/^nupp-bpf: /$wl: /"
done
