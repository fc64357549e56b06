#!/usr/bin/env bash
# Benchmark (not a test): the floor cost of a perf_event sample on this machine, i.e. what
# the unavoidable parts of any LuaJIT stack sample cost here, to set against the
# sampler's figure from bench_sampler_cost.sh (same units: bpf_stats run_time_ns/run_cnt).
# The driver tests/bench/floor.c runs a CPU-bound LuaJIT loop and attaches the programs of
# tests/bench/floor.bpf.c to per-process CPU-clock events at 1000 Hz, so every run counted
# is one of the target's samples. A round measures every program once for SECONDS
# (forward, then backward on the next round); RUNS rounds. MODE:
#  * "alone" (default): one program at a time, as cold as the sampler, which runs alone
#    too: the floor to compare with bench_sampler_cost.sh. The machine's load swings
#    (2-3x over seconds on a shared VM) land on some programs and not others.
#  * "together": all programs at once, each on its own event of the same process, so all
#    see the same load. Their timers fire together, so a program finds what earlier ones
#    touched in cache: figures are lower than alone, a lower bound of the floor.
#  * "ns/run": median of the RUNS per-round figures, with min and max. bpf_stats times a
#    program between two clock reads inside the kernel, so "empty" is the fixed cost of
#    running any program plus one clock read; the kernel's perf and timer interrupt work
#    around the program is not counted (nor is it in the sampler's figure).
#  * variants 1-6 are stacked, each the previous one plus one step of a real sample:
#    empty; filter (bpf_get_current_pid_tgid + a HASH lookup by tgid; "pid" is the
#    helper alone); regs (+ bpf_task_pt_regs(bpf_get_current_task_btf()), 5 registers
#    loaded); read16 (+ a 16-byte bpf_probe_read_user at the user sp); read512 (+ a
#    PERCPU_ARRAY scratch lookup and a 512-byte user read into it: a stack window);
#    count (+ a HASH lookup of a 24-byte key that hits and an atomic add: the counts map).
#    "count" is a whole sample that walks no frame.
#  * rd8xN: the user registers and N 8-byte user reads up the stack in a loop;
#    lkN (N = 1, 8, 32): N lookups of distinct entries of a 4096 x 64-byte PERCPU_ARRAY
#    (the sampler's frame cache shape; the verifier inlines these lookups), the same
#    entries every sample; lkr32: 32 lookups of random entries of a 16384 x 64-byte
#    PERCPU_ARRAY (the sampler's frame cache now, 1 MB per CPU: a walk through functions
#    met in no order), lka32 the same in a plain ARRAY (no per-CPU pointer read before
#    each entry: the sampler's layout), lkm32 the same 1 MB as 64 ARRAYs of 16 KB reached
#    through an ARRAY_OF_MAPS (each small enough for kmalloc, so in the kernel's direct
#    map, mapped with large pages, where a large ARRAY is in vmalloc space with 4 KB
#    pages), lka32m and lka32s random entries of only the first 256 KB and 64 KB of the
#    ARRAY (smaller tables: 64 KB holds 4,096 entries of 16 bytes, about the least that
#    could name thousands of functions' frames), rnd32 their 32 bpf_get_prandom_u32
#    alone; ktime: bpf_ktime_get_ns.
#  * "derived": per-step and per-helper costs, each the median over rounds of the
#    difference within a round (so a load drift between rounds cancels), with min-max.
#  * "floor at depth D": count + D x the cheapest per-frame work measured (a per-CPU
#    lookup or an 8-byte read, whichever is cheaper), and count + D x one 8-byte read (a
#    walk with no frame cache). A depth-D sampler that takes these steps cannot cost
#    less than the first. "random entries": count + D x a random lookup in 1 MB of a
#    plain ARRAY, the floor of a walk whose frames' cache entries are not those of the
#    sample before; "... in 64 KB": the same in the smallest table above.
#  * "faults": failed user reads (a fault takes a slower path, so a row with faults is
#    not a floor; expect 0).
# kernel.bpf_stats_enabled is set for the run and restored afterwards.
# usage: sudo tests/bench/bench_floor.sh [BUILD_DIR] [RUNS] [SECONDS] [MODE] [DEPTH]
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$SRC/build}
RUNS=${2:-5}
SECS=${3:-1}
MODE=${4:-alone}
DEPTH=${5:-32}
LUAJIT=$BUILD/luajit/bin/luajit

[ "$(id -u)" = 0 ] || { echo "bench_floor.sh: needs root (BPF)" >&2; exit 77; }
case $MODE in
  alone) together=() ;;
  together) together=(-t) ;;
  *) echo "bench_floor.sh: MODE is alone or together, not $MODE" >&2; exit 2 ;;
esac
[ -x "$LUAJIT" ] && [ -f "$BUILD/bpf/vmlinux.h" ] || { echo "bench_floor.sh: build first ($BUILD)" >&2; exit 1; }
# The tools the build was configured with, else the ones on PATH.
CLANG=$(sed -n 's/^CLANG:FILEPATH=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
BPFTOOL=$(sed -n 's/^BPFTOOL:FILEPATH=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
CLANG=${CLANG:-clang}
BPFTOOL=${BPFTOOL:-bpftool}

TMP=$(mktemp -d)
OLD_STATS=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() { sysctl -qw kernel.bpf_stats_enabled="$OLD_STATS"; rm -rf "$TMP"; }
trap cleanup EXIT

# The BPF object as CMakeLists.txt's nupp_bpf_object builds ours, its skeleton, the driver.
"$CLANG" -O2 -g -target bpf -mcpu=v3 -D__TARGET_ARCH_x86 -Wall -Werror -I"$BUILD/bpf" \
  -idirafter /usr/include/x86_64-linux-gnu -c "$SRC/tests/bench/floor.bpf.c" -o "$TMP/floor.bpf.o"
"$BPFTOOL" gen skeleton "$TMP/floor.bpf.o" name floor_bpf >"$TMP/floor.skel.h"
cc -O2 -Wall -Wextra -o "$TMP/floor" "$SRC/tests/bench/floor.c" -I"$TMP" \
  $(pkg-config --libs --static libbpf libelf)

sysctl -qw kernel.bpf_stats_enabled=1
echo "floor cost per sample, programs $MODE, 1000 Hz, ${SECS} s per run, median of $RUNS runs (min-max); $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
# TARGET (environment): a Lua script and its arguments for our LuaJIT to run instead of the
# tight loop, for the floor under a target whose own memory traffic cools the caches
# between samples (e.g. "tests/bench/workloads/depth.lua 32 600 interp many"; the
# script must outlive the run and is killed after it).
if [ -n "${TARGET:-}" ]; then
  read -r -a target <<<"$TARGET"
  target=("$LUAJIT" "${target[@]}")
  echo "target: ${target[*]}"
else
  target=("$LUAJIT" -e "local x=0 for i=1,1e15 do x=x+i end")
fi
"$TMP/floor" "${together[@]}" -F 1000 -r "$RUNS" -s "$SECS" "${target[@]}" >"$TMP/runs" ||
  { echo "bench_floor.sh: driver failed" >&2; exit 1; }

awk -v depth="$DEPTH" '
# Median, min and max of a[1..n], as "med (min-max)" (sorts a).
function mmm(a, n,    i, j, t, m) {
  for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
  m = (n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
  MED = m; LO = a[1]; HI = a[n]
  return sprintf("%8.0f %15s", m, sprintf("(%.0f-%.0f)", a[1], a[n]))
}
# The median over rounds of (hi - lo) / k, for variants hi and lo.
function diff(hi, lo, k,    r, d, n) {
  n = 0
  for (r = 1; r <= rounds; r++) if ((hi, r) in ns && (lo, r) in ns) d[++n] = (ns[hi, r] - ns[lo, r]) / k
  return mmm(d, n)
}
{
  for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
  if (!(v["variant"] in seen)) { seen[v["variant"]] = 1; order[++nvar] = v["variant"] }
  ns[v["variant"], v["round"]] = v["ns_per_run"]
  cnt[v["variant"]] += v["run_cnt"]; flt[v["variant"]] += v["faults"]
  if (v["round"] > rounds) rounds = v["round"]
}
END {
  what["empty"] = "1 return 0"; what["pid"] = "  bpf_get_current_pid_tgid"
  what["filter"] = "2 pid_tgid + HASH lookup (tgid)"; what["regs"] = "3 (2) + task_pt_regs, 5 regs"
  what["read16"] = "4 (3) + 16-byte user read"; what["read512"] = "5 (4) + 512-byte read to scratch"
  what["count"] = "6 (5) + 24-byte-key HASH + atomic"
  what["rd8x1"] = "7 regs + 1 x 8-byte read"; what["rd8x8"] = "7 regs + 8 x 8-byte read"
  what["rd8x32"] = "7 regs + 32 x 8-byte read"; what["lk1"] = "8 1 x PERCPU_ARRAY lookup"
  what["lk8"] = "8 8 x PERCPU_ARRAY lookup"
  what["lk32"] = "8 32 x PERCPU_ARRAY lookup"; what["ktime"] = "9 bpf_ktime_get_ns"
  what["lkr32"] = "10 32 x random of 16384 (1 MB)"; what["rnd32"] = "10 32 x bpf_get_prandom_u32"
  what["lka32"] = "10 the same, a plain ARRAY"; what["lkm32"] = "10 the same, 64 ARRAYs of 16 KB"
  what["lka32m"] = "10 ARRAY, random of 4096 (256 KB)"; what["lka32s"] = "10 ARRAY, random of 1024 (64 KB)"
  printf "%-8s %-34s %7s %8s %15s %6s\n", "variant", "what", "runs", "ns/run", "(min-max)", "faults"
  for (i = 1; i <= nvar; i++) {
    n = 0; delete a
    for (r = 1; r <= rounds; r++) if ((order[i], r) in ns) a[++n] = ns[order[i], r]
    printf "%-8s %-34s %7d %s %6d\n", order[i], what[order[i]], cnt[order[i]], mmm(a, n), flt[order[i]]
    med[order[i]] = MED
  }
  print ""
  printf "%-45s %8s %15s\n", "derived (median of per-round differences)", "ns", "(min-max)"
  printf "%-45s %s\n", "bpf_get_current_pid_tgid (pid - empty)", diff("pid", "empty", 1)
  printf "%-45s %s\n", "HASH lookup, 4-byte key (filter - pid)", diff("filter", "pid", 1)
  printf "%-45s %s\n", "task_btf + task_pt_regs + loads (regs - filter)", diff("regs", "filter", 1)
  printf "%-45s %s\n", "16-byte user read (read16 - regs)", diff("read16", "regs", 1)
  printf "%-45s %s\n", "scratch + 512-byte read (read512 - read16)", diff("read512", "read16", 1)
  printf "%-45s %s\n", "HASH 24-byte key + atomic (count - read512)", diff("count", "read512", 1)
  printf "%-45s %s\n", "8-byte user read ((rd8x32 - rd8x1) / 31)", diff("rd8x32", "rd8x1", 31); rd = MED
  printf "%-45s %s\n", "8-byte user read ((rd8x8 - rd8x1) / 7)", diff("rd8x8", "rd8x1", 7)
  printf "%-45s %s\n", "PERCPU_ARRAY lookup ((lk32 - lk8) / 24)", diff("lk32", "lk8", 24); lk = MED
  printf "%-45s %s\n", "first PERCPU_ARRAY lookup (lk1 - empty)", diff("lk1", "empty", 1)
  printf "%-45s %s\n", "bpf_ktime_get_ns (ktime - empty)", diff("ktime", "empty", 1)
  printf "%-45s %s\n", "random lookup in 1 MB ((lkr32 - rnd32) / 32)", diff("lkr32", "rnd32", 32)
  printf "%-45s %s\n", "... in a plain ARRAY ((lka32 - rnd32) / 32)", diff("lka32", "rnd32", 32); lka = MED
  printf "%-45s %s\n", "... in 64 ARRAYs of 16 KB ((lkm32 - rnd32) / 32)", diff("lkm32", "rnd32", 32)
  printf "%-45s %s\n", "... in 256 KB of an ARRAY ((lka32m - rnd32) / 32)", diff("lka32m", "rnd32", 32)
  printf "%-45s %s\n", "... in 64 KB of an ARRAY ((lka32s - rnd32) / 32)", diff("lka32s", "rnd32", 32); lks = MED
  print ""
  frame = (lk < rd) ? lk : rd
  printf "floor at depth %d = count + %d x %s: %.0f + %d x %.1f = %.0f ns\n", depth, depth,
    (lk < rd) ? "PERCPU_ARRAY lookup" : "8-byte read", med["count"], depth, frame, med["count"] + depth * frame
  printf "no frame cache    = count + %d x 8-byte read:       %.0f + %d x %.1f = %.0f ns\n", depth,
    med["count"], depth, rd, med["count"] + depth * rd
  printf "random entries    = count + %d x random 1 MB lookup: %.0f + %d x %.1f = %.0f ns\n", depth,
    med["count"], depth, lka, med["count"] + depth * lka
  printf "... in 64 KB      = count + %d x random 64 KB lookup: %.0f + %d x %.1f = %.0f ns\n", depth,
    med["count"], depth, lks, med["count"] + depth * lks
}' "$TMP/runs"
