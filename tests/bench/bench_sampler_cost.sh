#!/usr/bin/env bash
# Benchmark (not a test): the sampler's kernel cost per sample at fixed Lua stack depths.
# Runs tests/bench/workloads/depth.lua (a hot loop under DEPTH frames) at FREQ Hz (1000) with the
# real sampler program and prints, per depth, the samples, how many had exactly DEPTH
# frames, the samples lost, and bpf_stats run_time_ns / run_cnt:
#  * "ns/sample": the driver tests/bench/sampler_cost.c samples the target process only
#    (a per-process CPU-clock event), so every run counted is one of the target's samples
#    (median of RUNS runs, with min and max);
#  * "cli ns/run": nupp-bpf -v record -F 1000, one run; its per-CPU events also run the
#    program for every other process on the machine (an early return), which dilutes
#    the figure on a busy machine.
#  * with BASE_BUILD_DIR (another tree's build, e.g. of main), "base ns" and "ratio": that
#    build's sampler program runs on the same process at the same time (a second event),
#    so the ratio is free of the machine's load swings, which move single figures by 2x
#    on a shared VM. The program attached second runs a little warmer (8-19 % less
#    with two identical builds), so the base is favoured: the ratio is conservative.
# Shapes (SHAPES, environment, default all four): "same" recurses through one function,
# "distinct" through DEPTH-3 different prototypes, "churn" is "distinct" while the target
# frees prototypes all the time (the "frees/s" column: luajit:proto_free per second of
# the run), "many" goes down random paths through 3000 prototypes (each sample a
# different path of DEPTH-4 of them); modes: "interp" (JIT off), "jit" (the loop is a
# trace).
# The walk counters (the sampler's wstat map), per sample walked: "hit%" frames taken
# from the frame cache of the frames reported, "looks" frame cache set lookups, "pgen"
# free generations read (entries filled before the process's last prototype free), "stale"
# entries refused by a prototype free, "reads" and "KB" target memory read, "new%"
# samples that stored a new stack. TIMES=1 (environment) also times, in separate runs
# (the sampler then reads the clock 4 to 6 times a sample), the walk ("walk ns") and the
# store of the stack and its count ("store ns"; of it, "copy ns": copying the traces
# samples meet for the first time), medians of the runs; and in the same runs the count
# (the store less trace copies) of a sample whose stack was new in its buffer ("new ns")
# beside one whose stack was known ("known"), and of a new one's: its mark in the stacks
# map ("mark") and its send on the ring ("ring").
# WARM (environment, seconds, default 0): the target runs WARM + SECONDS, and the costs and
# counters of the sampler runs (not the CLI's) are those after the first WARM seconds:
# the frame cache warm (a cold cache fills each function's entry once per CPU; "many"
# has 3000 functions, met at random).
# FLOOR=1 (environment) ends with tests/bench/bench_floor.sh's floor at the largest depth
# (3 rounds), the figure a sample that walks that many frames cannot go below here.
# FREQ (environment, default 1000): the sampling rate. On this project's nested VM the
# same program costs ~2x less per sample at 10000 Hz than at 1000 Hz: at 1000 Hz every
# sample starts with cold caches and TLB (target pages, the frame cache, the scratch).
# kernel.bpf_stats_enabled is set for the CLI runs and restored afterwards.
# usage: sudo tests/bench/bench_sampler_cost.sh [BUILD_DIR] [RUNS] [SECONDS] [DEPTHS] [BASE_BUILD_DIR]
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$SRC/build}
RUNS=${2:-5}
SECS=${3:-1}
DEPTHS=${4:-"4 16 32 64"}
BASE=${5:-}
FREQ=${FREQ:-1000}
SHAPES=${SHAPES:-"same distinct churn many"}
WARM=${WARM:-0}
LUAJIT=$BUILD/luajit/bin/luajit
NUPP=$BUILD/nupp-bpf
WL=$SRC/tests/bench/workloads/depth.lua

[ "$(id -u)" = 0 ] || { echo "bench_sampler_cost.sh: needs root (BPF)" >&2; exit 77; }
[ -x "$LUAJIT" ] && [ -x "$NUPP" ] || { echo "bench_sampler_cost.sh: build first ($BUILD)" >&2; exit 1; }

TMP=$(mktemp -d)
OLD_STATS=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() { sysctl -qw kernel.bpf_stats_enabled="$OLD_STATS"; rm -rf "$TMP"; }
trap cleanup EXIT

cflags=()
# The LuaJIT layout version a build's tree exports (its sampler refuses any other).
layout_version() {
  local src
  src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$1/CMakeCache.txt" 2>/dev/null)
  sed -n 's/^#define NUPP_LJ_LAYOUT_VERSION \([0-9]*\)u.*/\1/p' "$src/include/nupp/lj_layout.h" 2>/dev/null
}

if [ -n "$BASE" ]; then
  [ -f "$BASE/bpf/sampler.skel.h" ] || { echo "bench_sampler_cost.sh: no $BASE/bpf/sampler.skel.h" >&2; exit 1; }
  # Both samplers run on this build's LuaJIT: a base of another layout version would refuse
  # every sample and look free.
  bv=$(layout_version "$BASE")
  tv=$(layout_version "$BUILD")
  [ -n "$bv" ] && [ "$bv" = "$tv" ] || {
    echo "bench_sampler_cost.sh: $BASE exports LuaJIT layout version ${bv:-?}, $BUILD ${tv:-?}:" \
      "its sampler would walk nothing on this build's LuaJIT (compare builds of one layout)" >&2
    exit 1
  }
  # The base skeleton under other C names; the object keeps its name (its map names).
  sed 's/sampler_bpf/base_bpf/g; s/SAMPLER_BPF/BASE_BPF/g; s/"base_bpf"/"sampler_bpf"/g' \
    "$BASE/bpf/sampler.skel.h" >"$TMP/base.skel.h"
  cflags=(-DCOST_BASE -I"$TMP")
fi
cc -O2 "${cflags[@]}" -o "$TMP/sampler_cost" "$SRC/tests/bench/sampler_cost.c" \
  -I"$SRC/include" -I"$BUILD/bpf" -I"$BUILD/gen" "$BUILD/libnupp.a" \
  $(pkg-config --libs --static libbpf libelf jansson) -lm

# The value of key $1 in a "key=value ..." line on stdin.
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }

# Median, min and max of the numbers on stdin.
stats() { sort -g | awk '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2;
  printf "%.0f %.0f %.0f\n", m, a[1], a[NR]}'; }

sysctl -qw kernel.bpf_stats_enabled=1
echo "sampler cost per sample, $FREQ Hz, ${SECS} s per run (after ${WARM} s of warm-up), median of $RUNS runs (min-max); $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
[ -n "$BASE" ] && echo "base: $BASE (its sampler on the same process at the same time)"
printf '%-6s %-8s %5s %8s %9s %6s %8s %12s %13s %11s' mode shape depth samples "at depth" lost frees/s "ns/sample" \
  "(min-max)" "cli ns/run"
printf ' %4s %5s %5s %5s %5s %5s %4s' hit% looks pgen stale reads KB new%
[ "${TIMES:-0}" = 1 ] && printf ' %7s %8s %7s %7s %7s %7s %7s' "walk ns" "store ns" "copy ns" "new ns" "known" "mark" "ring"
[ -n "$BASE" ] && printf ' %10s %6s' "base ns" ratio
echo
for mode in interp jit; do
  for shape in $SHAPES; do
    for d in $DEPTHS; do
      : >"$TMP/runs"
      for _ in $(seq "$RUNS"); do
        "$TMP/sampler_cost" -F "$FREQ" -e "$d" -w "$((WARM * 1000))" "$LUAJIT" "$WL" "$d" "$((SECS + WARM))" "$mode" "$shape" 2>/dev/null |
          grep -E '^(samples|base_run_cnt|ws_samples)=' | paste -sd' ' >>"$TMP/runs" ||
          { echo "bench: driver failed ($mode $shape $d)" >&2; exit 1; }
      done
      samples=$(field samples <"$TMP/runs" | awk '{s += $1} END {print s}')
      atd=$(field at_depth <"$TMP/runs" | awk '{s += $1} END {print s}')
      lost=$(sed 's/.*lost_no_vm=\([0-9]*\) lost_fault=\([0-9]*\) lost_bad=\([0-9]*\) lost_trunc=\([0-9]*\) lost_full=\([0-9]*\).*/\1 \2 \3 \4 \5/' \
        "$TMP/runs" | awk '{s += $1 + $2 + $3 + $4 + $5} END {print s}')
      frees=$(field frees <"$TMP/runs" | awk -v n="$RUNS" -v t="$((SECS + WARM))" '{s += $1} END {printf "%.0f", s / (n * t)}')
      read -r med lo hi < <(field ns_per_run <"$TMP/runs" | stats)
      # The walk counters per sample walked, over all runs.
      ws=$(awk '{for (i = 1; i <= NF; i++) {split($i, kv, "="); v[kv[1]] += kv[2]}}
        END {n = v["ws_samples"] ? v["ws_samples"] : 1; f = v["ws_frames"] ? v["ws_frames"] : 1
          printf "%.0f %.1f %.2f %.2f %.1f %.2f %.0f", 100 * v["ws_hits"] / f, v["ws_looks"] / n, v["ws_pgreads"] / n, v["ws_stale"] / n,
            v["ws_reads"] / n, v["ws_rbytes"] / n / 1024, 100 * v["ws_newstack"] / n}' "$TMP/runs")
      times=
      if [ "${TIMES:-0}" = 1 ]; then
        : >"$TMP/truns"
        for _ in $(seq "$RUNS"); do
          "$TMP/sampler_cost" -F "$FREQ" -e "$d" -t -w "$((WARM * 1000))" "$LUAJIT" "$WL" "$d" "$((SECS + WARM))" "$mode" "$shape" 2>/dev/null |
            grep -E '^ws_samples=' >>"$TMP/truns" || { echo "bench: timed driver failed" >&2; exit 1; }
        done
        # Per timed sample, median of the runs: the walk, the store (and of it the trace copies).
        per() { awk -v k="$1" '{for (i = 1; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]}
          print v[k] / (v["ws_timed"] ? v["ws_timed"] : 1)}' "$TMP/truns" | stats | cut -d' ' -f1; }
        # The count of a sample that sent a new stack and of one whose stack was known (the
        # store less trace copies), in the same runs (- when a run has none of one kind),
        # and of a new one's: the mark (the stacks map) and the send (the stack ring).
        pair() { awk -v num="$1" -v den="$2" -v sub_num="${3:-}" -v sub_den="${4:-}" '
          {for (i = 1; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]}
           d = v[den] - (sub_den != "" ? v[sub_den] : 0); n = v[num] - (sub_num != "" ? v[sub_num] : 0)
           if (d > 0) print n / d}' "$TMP/truns" | stats | cut -d' ' -f1; }
        newns=$(pair ws_new_ns ws_new_timed); oldns=$(pair ws_count_ns ws_timed ws_new_ns ws_new_timed)
        markns=$(pair ws_mark_ns ws_new_timed); ringns=$(pair ws_ring_ns ws_new_timed)
        times="$(per ws_walk_ns) $(per ws_store_ns) $(per ws_copy_ns) ${newns:--} ${oldns:--} ${markns:--} ${ringns:--}"
      fi
      "$NUPP" -v record -F "$FREQ" -o "$TMP/p.json" -- "$LUAJIT" "$WL" "$d" "$SECS" "$mode" "$shape" \
        >/dev/null 2>"$TMP/cli" || true
      cli=$(sed -n 's/^nupp-bpf: bpf sampler [0-9]* runs, \([0-9]*\) ns\/run.*/\1/p' "$TMP/cli")
      printf '%-6s %-8s %5d %8d %8.1f%% %6d %8d %12d %13s %11s' "$mode" "$shape" "$d" "$samples" \
        "$(awk -v a="$atd" -v s="$samples" 'BEGIN {print s ? 100 * a / s : 0}')" "$lost" "$frees" "$med" "($lo-$hi)" \
        "${cli:-?}"
      # shellcheck disable=SC2086
      printf ' %4s %5s %5s %5s %5s %5s %4s' $ws
      [ -n "$times" ] && printf ' %7s %8s %7s %7s %7s %7s %7s' $times
      if [ -n "$BASE" ]; then
        # Median of the per-run ratios (each run: both programs on the same samples' time).
        ratio=$(awk '{for (i = 1; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]}
          print v["ns_per_run"] / v["base_ns_per_run"]}' "$TMP/runs" | sort -g |
          awk '{a[NR]=$1} END {printf "%.2f", (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
        bmed=$(field base_ns_per_run <"$TMP/runs" | stats | cut -d' ' -f1)
        printf ' %10s %6s' "$bmed" "$ratio"
      fi
      echo
    done
  done
done
if [ "${FLOOR:-0}" = 1 ]; then
  echo
  "$SRC/tests/bench/bench_floor.sh" "$BUILD" 3 "$SECS" alone "${DEPTHS##* }" | grep -E '^(floor|no frame cache|random entries)'
fi
