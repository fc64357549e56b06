#!/usr/bin/env bash
# Benchmark (not a test): what nupp-bpf record costs a real third-party program that
# compiles, flushes and recompiles traces without pause: Debian's luacheck (lua-check)
# linting FILES Lua files of Debian's Lua modules under our LuaJIT, --no-cache, at
# 997 Hz with both channels on (samples and trace aborts).
# Each pair runs the workload unprofiled and profiled one after the other, the order
# alternating from pair to pair (the VM's speed drifts). Per pair: wall ratio (the
# workload's own "elapsed", tests/bench/workloads/luacheck_run.lua), nupp-bpf's own CPU
# (getrusage of the record process itself, all its threads, start to exit, as `-v`
# prints it) as a share of the target's CPU (its own clock), and beside it the wider
# measure "all - target": user + system of `nupp-bpf record` and every descendant
# (/usr/bin/time) minus the target's own CPU, which also holds the target's exit after
# its clock stops and the processes luacheck itself starts (sh, uname); samples lost
# (share of samples taken), process_vm_readv calls per
# second (`nupp-bpf -v`), and the target's voluntary context switches (unprofiled /
# profiled). The table prints the median over PAIRS pairs, with the ratio of the target's
# own CPU time (getrusage: what BPF costs it is charged to it), profiled / unprofiled.
# LOAD=busy runs one CPU-bound process per CPU beside the target during every run.
# TWIN=1 runs the two of a pair at the same time, one per CPU, instead of one after the
# other: both see the same speed of this VM, which drifts by tens of percent from one
# minute to the next (nupp-bpf's own CPU then competes with both; not with LOAD=busy).
# TWIN=shared runs them at the same time on CPU 0, taking turns, and nupp-bpf on CPU 1:
# the two then see the VM's speed at the same moments (two CPUs of this VM differ by up to
# 1.34x, one CPU shared by two runs by 0.7 %), and nupp-bpf competes with neither. The
# wall ratio then measures little (each runs half the time); the target CPU ratio is the
# figure.
# BASE_NUPP=PATH (another build's nupp-bpf) adds to each pair a profiled run by that
# binary, one after the other with this one's (alternating which goes first), and a
# column with its own CPU: two builds of nupp-bpf compared in the same minutes.
# usage: sudo tests/bench/bench_luacheck.sh [PAIRS] [FILES]   (from a built tree: build/)
#        sudo LOAD=busy tests/bench/bench_luacheck.sh 5
#        sudo TWIN=1 tests/bench/bench_luacheck.sh 5
#        sudo TWIN=shared tests/bench/bench_luacheck.sh 5
#        sudo TWIN=1 ARGS=--no-aborts tests/bench/bench_luacheck.sh 5   (more record options)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
NUPP=${NUPP_BPF:-$top/build/nupp-bpf}
LJ=${NUPP_LUAJIT:-$top/build/luajit/bin/luajit}
PAIRS=${1:-5}
FILES=${2:-600}
LOAD=${LOAD:-quiet}
TWIN=${TWIN:-0}
ARGS=${ARGS:-}
BASE_NUPP=${BASE_NUPP:-}
[ -z "$BASE_NUPP" ] || [ -x "$BASE_NUPP" ] || { echo "bench: BASE_NUPP $BASE_NUPP is not executable" >&2; exit 1; }
[ -z "$BASE_NUPP" ] || [ "$TWIN" = 0 ] || { echo "bench: BASE_NUPP runs without TWIN" >&2; exit 1; }
[ "$TWIN" = 0 ] || [ "$LOAD" = quiet ] || { echo "bench: TWIN runs without LOAD=busy" >&2; exit 1; }
RUN="$top/tests/bench/workloads/luacheck_run.lua"
[ "$(id -u)" = 0 ] || { echo "bench: run as root" >&2; exit 1; }

# luacheck and a body of Lua modules to lint (Debian's, installed once).
pkgs="lua-check lua-penlight lua-ldoc lua-busted lua-luassert lua-http lua-moses lua-nvim lua-inspect
      lua-lpeg-patterns lua-ljsyscall"
missing=$(for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
  apt-get install -y --no-install-recommends $missing >/dev/null 2>&1 ||
    { apt-get update >/dev/null && apt-get install -y --no-install-recommends $missing >/dev/null; }
fi
export LUA_PATH='/usr/share/lua/5.1/?.lua;/usr/share/lua/5.1/?/init.lua;;'
export LUA_CPATH='/usr/lib/x86_64-linux-gnu/lua/5.1/?.so;;'
tmp=$(mktemp -d)
busy=()
stop_busy() { for b in "${busy[@]}"; do kill "$b" 2>/dev/null || true; done; busy=(); }
trap 'stop_busy; rm -rf "$tmp"' EXIT
# Listed whole, then cut: head closing the pipe early would fail it (pipefail).
find /usr/share/lua/5.1 /usr/share/lua/5.3 -name '*.lua' | LC_ALL=C sort >"$tmp/all"
head -"$FILES" "$tmp/all" >"$tmp/files"
nfiles=$(wc -l <"$tmp/files")

start_busy() {
  [ "$LOAD" = busy ] || return 0
  for _ in $(seq "$(nproc)"); do "$LJ" -e 'local x = 0 while true do x = x + 1 end' & busy+=($!); done
}

val() { awk -v k="$1" '$1 == k {print $2}' "$2"; }
median() { sort -g | awk '{a[NR]=$1} END {if (!NR) print "nan"; else print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# TWIN=shared: both luacheck runs on CPU 0, taking turns (they see the VM's speed at the
# same moments), nupp-bpf on CPU 1.
on0=() on1=()
[ "$TWIN" = shared ] && on0=(taskset -c 0) on1=(taskset -c 1)

base_run() {
  "${on0[@]}" "$LJ" "$RUN" --no-cache $(cat "$tmp/files") >/dev/null 2>"$tmp/base.err" || true
}

prof_run() {
  /usr/bin/time -f 'rusage %U %S' -o "$tmp/time" \
    "${on1[@]}" "$NUPP" -v record -F 997 $ARGS -o "$tmp/p.json" -- "${on0[@]}" "$LJ" "$RUN" --no-cache \
    $(cat "$tmp/files") >/dev/null 2>"$tmp/prof.err" || true
}

# The same with BASE_NUPP (its own CPU only).
bprof_run() {
  "$BASE_NUPP" -v record -F 997 $ARGS -o "$tmp/pb.json" -- "$LJ" "$RUN" --no-cache \
    $(cat "$tmp/files") >/dev/null 2>"$tmp/bprof.err" || true
  grep -q 'nupp-bpf: wrote' "$tmp/bprof.err" || { grep -v 'drain:\|walk lost\|not named\|prototype event' "$tmp/bprof.err" >&2; exit 1; }
}

checked() {
  grep -q '^elapsed ' "$tmp/base.err" || { cat "$tmp/base.err" >&2; exit 1; }
  grep -q '^elapsed ' "$tmp/prof.err" && grep -q 'nupp-bpf: wrote' "$tmp/prof.err" ||
    { grep -v 'drain:\|walk lost\|not named\|prototype event' "$tmp/prof.err" >&2; exit 1; }
}

base() { start_busy; base_run; stop_busy; }
prof() { start_busy; prof_run; stop_busy; }

: >"$tmp/rows"
for i in $(seq "$PAIRS"); do
  if [ "$TWIN" != 0 ]; then
    base_run & b=$!
    prof_run & p=$!
    wait "$b" "$p"
  elif [ -n "$BASE_NUPP" ]; then
    # The two builds' profiled runs next to each other, in turns.
    if [ $((i % 2)) = 1 ]; then base; prof; bprof_run; else bprof_run; prof; base; fi
  elif [ $((i % 2)) = 1 ]; then base; prof; else prof; base; fi
  checked
  wall=$(awk -v a="$(val elapsed "$tmp/prof.err")" -v b="$(val elapsed "$tmp/base.err")" 'BEGIN {print a / b}')
  tcpu=$(val cpu "$tmp/prof.err")
  ncpu=$(awk -v t="$tcpu" '/nupp-bpf: own CPU/ {print $4 / t * 100}' "$tmp/prof.err")
  acpu=$(awk -v t="$tcpu" '/^rusage/ {print ($2 + $3 - t) / t * 100}' "$tmp/time")
  lost=$(awk '/nupp-bpf: wrote/ {for (i = 1; i <= NF; i++) { if ($i == "samples") s = $(i-1); if ($i == "lost") l = $(i+1) }
              gsub(/[^0-9]/, "", l); print l / (s + l) * 100}' "$tmp/prof.err")
  reads=$(awk '/process_vm_readv calls/ {print $(NF)}' "$tmp/prof.err" | sed 's,/s,,')
  tratio=$(awk -v a="$tcpu" -v b="$(val cpu "$tmp/base.err")" 'BEGIN {print a / b}')
  bcpu=nan
  [ -z "$BASE_NUPP" ] ||
    bcpu=$(awk -v t="$(val cpu "$tmp/bprof.err")" '/nupp-bpf: own CPU/ {print $4 / t * 100}' "$tmp/bprof.err")
  echo "$wall $ncpu $lost $reads $(val nvcsw "$tmp/base.err") $(val nvcsw "$tmp/prof.err") \
$(val elapsed "$tmp/base.err") $tratio $acpu $bcpu" >>"$tmp/rows"
  echo "pair $i: wall x$wall, target CPU x$tratio, nupp-bpf CPU $ncpu % of the target's (all - target $acpu %)," \
    "lost $lost %," \
    "$reads reads/s, nvcsw $(val nvcsw "$tmp/base.err") -> $(val nvcsw "$tmp/prof.err")" \
    "${BASE_NUPP:+, BASE_NUPP CPU $bcpu %}" >&2
  grep -E 'nupp-bpf: (wrote|warning)' "$tmp/prof.err" | sed 's/^/  /' >&2
done

col() { awk -v c="$1" '{print $c}' "$tmp/rows" | median; }
pairing=$(case $TWIN in 0) echo "one after the other, alternating" ;;
  shared) echo "at the same time on one CPU (nupp-bpf on the other)" ;; *) echo "at the same time" ;; esac)
echo "luacheck, $nfiles files, --no-cache, 997 Hz, samples + trace aborts, load: $LOAD; pairs run $pairing;" \
  "median of $PAIRS pairs"
printf '%-12s %-12s %-12s %-16s %-10s %-12s %-10s %-14s %-12s\n' "wall ratio" "target CPU" "nupp CPU %" \
  "all - target %" "lost %" "reads/s" "nvcsw base" "nvcsw profiled" "base wall s"
printf '%-12.3f %-12.3f %-12.2f %-16.2f %-10.3f %-12.0f %-10.0f %-14.0f %-12.2f\n' "$(col 1)" "$(col 8)" \
  "$(col 2)" "$(col 9)" "$(col 3)" "$(col 4)" "$(col 5)" "$(col 6)" "$(col 7)"
if [ -n "$BASE_NUPP" ]; then
  span() { awk -v c="$1" '{print $c}' "$tmp/rows" | sort -g | awk '{a[NR]=$1} END {printf "%.2f-%.2f", a[1], a[NR]}'; }
  printf 'nupp CPU %%, the same pairs: this build %.2f (%s), BASE_NUPP %.2f (%s) (%s)\n' "$(col 2)" "$(span 2)" \
    "$(col 10)" "$(span 10)" "$BASE_NUPP"
fi
