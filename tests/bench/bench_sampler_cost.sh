#!/usr/bin/env bash
# Benchmark (not a test): the sampler's kernel cost per sample at fixed Lua stack depths.
# Runs tests/bench/workloads/depth.lua (a hot loop under DEPTH frames) at 1000 Hz with the
# real sampler program and prints, per depth, the samples, how many had exactly DEPTH
# frames, the samples lost, and bpf_stats run_time_ns / run_cnt:
#  * "ns/sample": the driver tests/bench/sampler_cost.c samples the target process only
#    (a per-process CPU-clock event), so every run counted is one of the target's samples
#    (median of RUNS runs, with min and max);
#  * "cli ns/run": nupp-bpf -v record -F 1000, one run; its per-CPU events also run the
#    program for every other process on the machine (an early return), which dilutes
#    the figure on a busy machine.
# Shapes: "same" recurses through one function, "distinct" through DEPTH-3 different
# prototypes; modes: "interp" (JIT off), "jit" (the loop is a trace).
# kernel.bpf_stats_enabled is set for the CLI runs and restored afterwards.
# usage: sudo tests/bench/bench_sampler_cost.sh [BUILD_DIR] [RUNS] [SECONDS] [DEPTHS]
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$SRC/build}
RUNS=${2:-5}
SECS=${3:-1}
DEPTHS=${4:-"4 16 32 64"}
LUAJIT=$BUILD/luajit/bin/luajit
NUPP=$BUILD/nupp-bpf
WL=$SRC/tests/bench/workloads/depth.lua

[ "$(id -u)" = 0 ] || { echo "bench_sampler_cost.sh: needs root (BPF)" >&2; exit 77; }
[ -x "$LUAJIT" ] && [ -x "$NUPP" ] || { echo "bench_sampler_cost.sh: build first ($BUILD)" >&2; exit 1; }

TMP=$(mktemp -d)
OLD_STATS=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() { sysctl -qw kernel.bpf_stats_enabled="$OLD_STATS"; rm -rf "$TMP"; }
trap cleanup EXIT

cc -O2 -o "$TMP/sampler_cost" "$SRC/tests/bench/sampler_cost.c" \
  -I"$SRC/include" -I"$BUILD/bpf" -I"$BUILD/gen" "$BUILD/libnupp.a" \
  $(pkg-config --libs --static libbpf libelf jansson) -lm

# The value of key $1 in a "key=value ..." line on stdin.
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }

# Median, min and max of the numbers on stdin.
stats() { sort -g | awk '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2;
  printf "%.0f %.0f %.0f\n", m, a[1], a[NR]}'; }

sysctl -qw kernel.bpf_stats_enabled=1
echo "sampler cost per sample, 1000 Hz, ${SECS} s per run, median of $RUNS runs (min-max); $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
printf '%-6s %-8s %5s %8s %9s %6s %12s %13s %11s\n' mode shape depth samples "at depth" lost "ns/sample" "(min-max)" "cli ns/run"
for mode in interp jit; do
  for shape in same distinct; do
    for d in $DEPTHS; do
      : >"$TMP/runs"
      for _ in $(seq "$RUNS"); do
        "$TMP/sampler_cost" -F 1000 -e "$d" "$LUAJIT" "$WL" "$d" "$SECS" "$mode" "$shape" 2>/dev/null |
          grep '^samples=' >>"$TMP/runs" || { echo "bench: driver failed ($mode $shape $d)" >&2; exit 1; }
      done
      samples=$(field samples <"$TMP/runs" | awk '{s += $1} END {print s}')
      atd=$(field at_depth <"$TMP/runs" | awk '{s += $1} END {print s}')
      lost=$(sed 's/.*lost_no_vm=\([0-9]*\) lost_fault=\([0-9]*\) lost_bad=\([0-9]*\) lost_trunc=\([0-9]*\) lost_full=\([0-9]*\).*/\1 \2 \3 \4 \5/' \
        "$TMP/runs" | awk '{s += $1 + $2 + $3 + $4 + $5} END {print s}')
      read -r med lo hi < <(field ns_per_run <"$TMP/runs" | stats)
      "$NUPP" -v record -F 1000 -o "$TMP/p.json" -- "$LUAJIT" "$WL" "$d" "$SECS" "$mode" "$shape" \
        >/dev/null 2>"$TMP/cli" || true
      cli=$(sed -n 's/^nupp-bpf: bpf sampler [0-9]* runs, \([0-9]*\) ns\/run.*/\1/p' "$TMP/cli")
      printf '%-6s %-8s %5d %8d %8.1f%% %6d %12d %13s %11s\n' "$mode" "$shape" "$d" "$samples" \
        "$(awk -v a="$atd" -v s="$samples" 'BEGIN {print s ? 100 * a / s : 0}')" "$lost" "$med" "($lo-$hi)" "${cli:-?}"
    done
  done
done
