#!/usr/bin/env bash
# nupp-bpf record on a program that fills its machine-code area and flushes every trace
# in a loop (tests/data/sampler/flush.lua, thousands of traces a second): drains stay
# bounded in time, so -d 5 ends the recording on time and the first Ctrl-C writes the
# profile within 1 s of the signal; no trace dies before its samples are named
# (symbolize losses <= 1 %), and none is named as another (every frame under the main
# chunk is one of the program's call graph, and some of them compiled). Traces are
# copied at their first sample: never more copies than compiled samples, although the
# program makes thousands of traces a second.
# Times are taken from nupp-bpf's own stderr lines ("recording ...": attached and
# sampling; "wrote ...": the profile is on disk), stamped as they arrive. Start-up (BPF
# verification) and tear-down (uprobe detach) are outside these bounds: see README.
. "$(dirname "$0")/../support/lib.sh"
need_root

FLUSH="$NUPP_TEST_DATA/sampler/flush.lua"

now() { cut -d' ' -f1 /proc/uptime; }

# Waits (up to 30 s) until file $1 has a line matching $2; prints the time it saw it.
seen() {
  local i
  for i in $(seq 1500); do
    grep -q -- "$2" "$1" 2>/dev/null && { now; return 0; }
    sleep 0.02
  done
  fail "no line [$2] in $1"
}

# symbolize losses and samples of a profile, as "LOST SAMPLES".
losses() {
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["meta"]; print(m["lost"]["symbolize"], m["samples"])' "$1"
}

# Every frame under the program's main chunk is one of its call graph's (known by
# construction: the loop, drive(), the generated functions, every builtin the main chunk
# calls, from jit.opt.start and tonumber before the loop to print after it), and
# traces name their samples: a trace named from another incarnation's copy (its number
# and address reused after a flush) would show a frame the program never ran there.
# Prints "MAIN COMPILED BAD" (samples under the main chunk, compiled ones, misnamed).
# $2: a regular expression of more frames the program runs there (or none).
frames() {
  python3 - "$1" "${2:-}" <<'PY'
import json, re, sys
more = "|" + sys.argv[2] if sys.argv[2] else ""
ok = re.compile(r"^(flush\.lua:(0|drive)|gen[0-9]+:(f|0)|jit\.opt\.start|tonumber|os\.clock|load|assert|"
                r"string\.format|jit\.flush|io\.method\.write|print" + more + r")$")
main = comp = bad = 0
for r in json.load(open(sys.argv[1]))["samples"]:
    fr = r["stack"].split(";")
    if fr[:2] != ["pmain", "flush.lua:0"]:
        continue
    main += r["count"]
    comp += r["compiled"]
    if not all(ok.match(f) for f in fr[1:]):
        bad += r["count"]
        print("misnamed:", r["stack"], r["count"], file=sys.stderr)
print(main, comp, bad)
PY
}

# Checks frames() of profile $1 (label $2; $3: more frames, as frames() takes them): none
# misnamed, some compiled samples.
check_frames() {
  local main comp bad
  read -r main comp bad < <(frames "$1" "${3:-}")
  echo "$2: $main samples under the main chunk, $comp compiled, $bad misnamed"
  [ "$bad" = 0 ] || fail "$2: $bad samples with a frame the program does not run there"
  # How much of its time the program spends in compiled code rather than compiling
  # depends on the machine (2-5 % here); some compiled samples show the traces' path ran.
  [ "$comp" -ge 20 ] || fail "$2: only $comp of $main samples compiled (traces not named?)"
}

# 1. -d 5: the recording ends 5 s after it began (drains bounded), the profile written.
"$NUPP_BPF" -v record -F 997 -d 5 -o "$TMP/d.json" -- "$NUPP_LUAJIT" "$FLUSH" 60 >/dev/null 2>"$TMP/d.err" &
rec=$!
t0=$(seen "$TMP/d.err" 'nupp-bpf: recording')
t1=$(seen "$TMP/d.err" 'nupp-bpf: wrote')
wait "$rec" || fail "nupp-bpf -d 5 exited with status $?"
cat "$TMP/d.err"
t=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
echo "-d 5: profile written $t s after recording began"
awk -v t="$t" 'BEGIN {exit !(t >= 4.9 && t <= 6.0)}' || fail "-d 5 wrote its profile after $t s (want 5..6 s)"
read -r lost samples < <(losses "$TMP/d.json")
echo "-d 5: $samples samples, symbolize $lost"
[ "$samples" -gt 200 ] || fail "too few samples ($samples)"
[ $((lost * 100)) -le "$samples" ] || fail "symbolize losses $lost > 1 % of $samples"
check_frames "$TMP/d.json" "-d 5"
# Each copy was made by a sample in the trace: at most the compiled samples reported,
# and those lost (counted, not reported).
read -r _ comp _ < <(frames "$TMP/d.json")
lost_all=$(python3 -c 'import json,sys; print(sum(json.load(open(sys.argv[1]))["meta"]["lost"].values()))' "$TMP/d.json")
copied=$(sed -n 's/^nupp-bpf: traces sampled: \([0-9]*\) copied by bpf.*/\1/p' "$TMP/d.err")
echo "-d 5: $copied traces copied, $comp compiled samples, $lost_all lost"
[ -n "$copied" ] && [ "$copied" -gt 0 ] || fail "-v printed no trace copies"
[ "$copied" -le $((comp + lost_all)) ] || fail "$copied traces copied for $comp compiled samples (a copy is made at a sample)"

# 2. The first Ctrl-C (SIGINT) writes the profile within 1 s; the command gets the
# signal too and its status is passed on (LuaJIT's "interrupted!" error: 1).
"$NUPP_BPF" record -F 997 -o "$TMP/c.json" -- "$NUPP_LUAJIT" "$FLUSH" 60 >/dev/null 2>"$TMP/c.err" &
rec=$!
seen "$TMP/c.err" 'nupp-bpf: recording' >/dev/null
sleep 4
t0=$(now)
kill -INT "$rec"
t1=$(seen "$TMP/c.err" 'nupp-bpf: wrote')
st=0
wait "$rec" || st=$?
cat "$TMP/c.err"
[ "$st" = 1 ] || fail "nupp-bpf exited with status $st after SIGINT (want 1: the command's)"
t=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
echo "Ctrl-C: profile written $t s after the signal"
awk -v t="$t" 'BEGIN {exit !(t <= 1.0)}' || fail "the profile was written $t s after SIGINT (want <= 1 s)"
read -r lost samples < <(losses "$TMP/c.json")
echo "Ctrl-C: $samples samples, symbolize $lost"
[ "$samples" -gt 200 ] || fail "too few samples ($samples)"
[ $((lost * 100)) -le "$samples" ] || fail "symbolize losses $lost > 1 % of $samples"
# Interrupted, LuaJIT raises "interrupted!" where the program is and runs luajit.c's
# message handler (traceback, a C function) there: a sample in it is the program's.
check_frames "$TMP/c.json" "Ctrl-C" "traceback"
echo PASS
