#!/usr/bin/env bash
# report --why and record --why on real recordings under our LuaJIT: a program whose hot
# loop the JIT blacklists (tests/data/ci/blacklisted_loop.lua) names the loop's lines,
# its share and interpreted share, and the abort reason, blacklisted, with --lines (and
# by file without); a function under jit.off is joined with the abort at its first
# line; a program that compiles everything has nothing to explain.
. "$(dirname "$0")/../support/lib.sh"
need_root

D="$NUPP_TEST_DATA/ci"
cd "$TMP"

# The blacklisted loop, recorded with --lines and --why: the text on stderr.
"$NUPP_BPF" record -F 999 --lines --why -o bl.json -- "$NUPP_LUAJIT" "$D/blacklisted_loop.lua" >/dev/null 2>rec.err ||
  { cat rec.err; fail "record"; }
# The block is the lines sampled interpreted: the loop (14-17) holding the closure's line
# 15, within bad() (12-18): its first and last lines join when one of its 600 runs is
# sampled there.
block=$(sed -nE 's/^1\. the code at blacklisted_loop\.lua:([0-9]+)-([0-9]+) took [0-9.]+ % of the samples.*/\1 \2/p' rec.err)
read -r b_first b_last <<<"${block:-0 0}"
[ "$b_first" -ge 12 ] && [ "$b_first" -le 15 ] && [ "$b_last" -ge 15 ] && [ "$b_last" -le 18 ] ||
  { cat rec.err; fail "record --why does not name the loop (block: '$block')"; }
assert_contains rec.err "   why: NYI: bytecode FNEW at blacklisted_loop.lua:15, blacklisted"
"$NUPP_BPF" report --why bl.json >why.txt
# The same text from the saved profile.
sed -n '/^Hot code/,$p' rec.err | diff -u - why.txt || fail "report --why and record --why differ"
"$NUPP_BPF" report --why --json bl.json >why.json
python3 - why.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["lines"] and not d["nothingToExplain"], d
it = d["items"][0]
assert it["file"] == "blacklisted_loop.lua" and 12 <= it["first"] <= 15 <= it["last"] <= 18, it
assert it["share"] > 50 and it["interpretedOfLua"] > 80, it
ab = it["aborts"][0]
assert ab == {"severity": "blacklist", "reason": "NYI: bytecode FNEW", "location": "blacklisted_loop.lua:15",
              "count": 1, "zonePath": "", "join": "within"}, ab
# work() compiles: only its entry and return run interpreted (nanoseconds a call), so a
# block of its lines (4-8) is at most a stray sample or two, never joined to the loop's.
assert all(i["last"] < 4 or i["first"] > 8 or i["share"] < 2 for i in d["items"]), d["items"]
PY

# Recorded without --lines: functions, joined by file, and the text says so.
"$NUPP_BPF" record -q -F 999 -o blf.json -- "$NUPP_LUAJIT" "$D/blacklisted_loop.lua" >/dev/null
"$NUPP_BPF" report --why blf.json >whyf.txt
grep -qE '^1\. the function blacklisted_loop\.lua:bad took [0-9.]+ % of the samples.*, (9[0-9]|100) % of its Lua time interpreted$' whyf.txt ||
  { cat whyf.txt; fail "no function line for bad"; }
assert_contains whyf.txt "   in the same file: NYI: bytecode FNEW at blacklisted_loop.lua:15, blacklisted"
assert_contains whyf.txt "aborts are joined by file. Record with --lines"

# A function under jit.off: the abort LuaJIT reports at its first line joins its loop.
BENCH_N=6e7 "$NUPP_BPF" record -q -F 999 --lines -o off.json -- "$NUPP_LUAJIT" "$D/bench.lua" jitoff=beta >/dev/null
"$NUPP_BPF" report --why off.json >whyoff.txt
grep -qE '^1\. the code at bench\.lua:2[2-5](-2[3-6])? took' whyoff.txt || { cat whyoff.txt; fail "beta's loop not named"; }
assert_contains whyoff.txt "JIT compilation disabled for function at bench.lua:22"

# Everything compiled: nothing to explain.
BENCH_N=5e7 "$NUPP_BPF" record -q -F 999 --lines -o comp.json -- "$NUPP_LUAJIT" "$D/bench.lua" >/dev/null
"$NUPP_BPF" report --why comp.json >whyc.txt
grep -qE '^nothing to explain: no code ran interpreted for 1\.0 % or more of the [0-9]+ samples \(0 trace aborts, 0 blacklisted\)$' whyc.txt ||
  { cat whyc.txt; fail "want nothing to explain"; }
"$NUPP_BPF" report --why --json comp.json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["nothingToExplain"] and d["samples"] > 200, d'

# Usage: --json only with --why.
st=0; "$NUPP_BPF" report --json comp.json >/dev/null 2>err || st=$?
assert_eq "$st" 2 "report --json without --why"
assert_contains err "--json applies to --why"
echo "PASS: why"
