#!/usr/bin/env bash
# Benchmark (not a test): nupp-bpf record on a program with thousands of hot functions
# (tests/bench/workloads/many_funcs.lua: N functions called along pseudo-random paths,
# nearly every sample a new stack, RELOAD chunks of 100 functions loaded again per second
# so prototypes die all along), at 997 Hz with both channels on, for SECS of the target's
# CPU time. Per run: samples, samples lost by reason (mapFull among them), nupp-bpf's own
# CPU (user + system of `nupp-bpf record` and its child, minus the child's own CPU) as a
# share of the target's, prototype events lost (ring buffer full), and the drain times
# (`nupp-bpf -vv`: median and max of the sampler drains, in ms). RUNS runs, quiet and then
# with one CPU-bound process per CPU beside the target (LOAD=busy); LOADS picks them.
# usage: sudo tests/bench/bench_many_funcs.sh [RUNS=1] [SECS=60] [N=5000] [RELOAD=10]
#        sudo LOADS=busy tests/bench/bench_many_funcs.sh 3 20
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
NUPP=${NUPP_BPF:-$top/build/nupp-bpf}
LJ=${NUPP_LUAJIT:-$top/build/luajit/bin/luajit}
RUNS=${1:-1}
SECS=${2:-60}
N=${3:-5000}
RELOAD=${4:-10}
LOADS=${LOADS:-quiet busy}
WL="$top/tests/bench/workloads/many_funcs.lua"
[ "$(id -u)" = 0 ] || { echo "bench: run as root" >&2; exit 1; }
tmp=$(mktemp -d)
busy=()
stop_busy() { for b in "${busy[@]}"; do kill "$b" 2>/dev/null || true; done; busy=(); }
trap 'stop_busy; rm -rf "$tmp"' EXIT
start_busy() {
  for _ in $(seq "$(nproc)"); do "$LJ" -e 'local x = 0 while true do x = x + 1 end' & busy+=($!); done
}
val() { awk -v k="$1" '$1 == k {print $2}' "$2"; }

echo "many_funcs.lua: $N functions on random paths, reload $RELOAD chunks/s, $SECS s, 997 Hz, samples + trace aborts"
printf '%-6s %-4s %-8s %-8s %-9s %-8s %-9s %-10s %-9s %-10s %-11s %-10s %s\n' load run samples "lost %" \
  symbolize badFrame readFault truncated mapFull "nupp CPU%" "events lost" "drain med" "drain max ms"
for load in $LOADS; do
  for i in $(seq "$RUNS"); do
    [ "$load" = busy ] && start_busy
    /usr/bin/time -f 'rusage %U %S' -o "$tmp/time" \
      "$NUPP" -vv record -F 997 -o "$tmp/p.json" -- "$LJ" "$WL" "$N" "$SECS" 12 "$RELOAD" \
      >/dev/null 2>"$tmp/err" || true
    stop_busy
    grep -q 'nupp-bpf: wrote' "$tmp/err" || { grep -v 'drain:\|walk lost\|not named' "$tmp/err" >&2; exit 1; }
    tcpu=$(val cpu "$tmp/err")
    ncpu=$(awk -v t="$tcpu" '/^rusage/ {print ($2 + $3 - t) / t * 100}' "$tmp/time")
    python3 - "$tmp/p.json" "$tmp/err" "$load" "$i" "$ncpu" <<'EOF'
import json, re, statistics, sys
p = json.load(open(sys.argv[1]))
err = open(sys.argv[2]).read()
lost = p["meta"]["lost"]
samples = p["meta"]["samples"]
nlost = sum(v for v in lost.values() if isinstance(v, int))
drains = [int(m) / 1000 for m in re.findall(r"^drain: .* (\d+) us$", err, re.M)]
ev = sum(int(m) for m in re.findall(r"(\d+) prototype events lost", err))
print("%-6s %-4s %-8d %-8.3f %-9d %-8d %-9d %-10d %-9d %-10.2f %-11d %-10.1f %.1f" % (
    sys.argv[3], sys.argv[4], samples, 100.0 * nlost / max(1, samples + nlost), lost.get("symbolize", 0),
    lost.get("badFrame", 0), lost.get("readFault", 0), lost.get("truncated", 0), lost.get("mapFull", 0),
    float(sys.argv[5]), ev, statistics.median(drains) if drains else 0, max(drains) if drains else 0))
EOF
  done
done
