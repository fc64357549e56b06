#!/usr/bin/env bash
# Benchmark (not a test): what one hit of a USDT probe costs the traced process, with
# sdt.h's 1-byte NOP at the site (an int3 trap at every hit) and with the 5-byte NOP our
# LuaJIT build uses (Linux 6.18+ makes it a call of its uprobe trampoline). Each site
# gets a uprobe through tracefs (a trace event, tracing off: the handler does next to
# nothing, so the rest is the trap or the call), then the workload calls it N times and
# prints the CPU time a call took; RUNS alternating runs, median; and the same without a
# probe.
# usage: sudo tests/bench/bench_uprobe_site.sh [RUNS] [N]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
RUNS=${1:-5}
N=${2:-2000000}
T=/sys/kernel/tracing
[ "$(id -u)" = 0 ] || { echo "bench: run as root" >&2; exit 1; }
[ -w "$T/uprobe_events" ] || { echo "bench: $T/uprobe_events is not writable (tracefs)" >&2; exit 1; }
tmp=$(mktemp -d)
was_on=$(cat "$T/tracing_on")
cleanup() {
  echo 0 >"$T/events/nupp_upb/enable" 2>/dev/null || true
  echo "-:nupp_upb/p1" >>"$T/uprobe_events" 2>/dev/null || true
  echo "-:nupp_upb/p5" >>"$T/uprobe_events" 2>/dev/null || true
  echo "$was_on" >"$T/tracing_on"
  rm -rf "$tmp"
}
trap cleanup EXIT
cc -O2 -mno-red-zone -o "$tmp/site" "$top/tests/bench/uprobe_site.c"
loc() { readelf -n "$tmp/site" | awk -v p="$1" '$1 == "Name:" && $2 == p {getline; print $2}' | tr -d ,; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
runs() { for i in $(seq "$RUNS"); do "$tmp/site" "$1" "$N"; done | median; }

np1=$(runs 1)
np5=$(runs 5)
echo "p:nupp_upb/p1 $tmp/site:$(loc p1)" >>"$T/uprobe_events"
echo "p:nupp_upb/p5 $tmp/site:$(loc p5)" >>"$T/uprobe_events"
echo 0 >"$T/tracing_on"
echo 1 >"$T/events/nupp_upb/enable"
: >"$tmp/p1"; : >"$tmp/p5"
for i in $(seq "$RUNS"); do
  "$tmp/site" 1 "$N" >>"$tmp/p1"
  "$tmp/site" 5 "$N" >>"$tmp/p5"
done
printf '%-34s %-16s %-16s\n' "site" "no probe, ns" "uprobe, ns/hit"
printf '%-34s %-16s %-16s\n' "1-byte NOP (sys/sdt.h)" "$np1" "$(median <"$tmp/p1")"
printf '%-34s %-16s %-16s\n' "5-byte NOP (our LuaJIT's probes)" "$np5" "$(median <"$tmp/p5")"
