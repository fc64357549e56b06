#!/usr/bin/env bash
# nupp-bpf diff on real recordings of tests/data/ci/bench.lua (three functions with a
# third of the work each) under our LuaJIT: the same workload twice exits 0 (also with
# two runs a side merged); one function doing 3x the work exits 1 and names it; one
# whose loop stops compiling (jit.off, at about the same cost) exits 1 and says "now
# interpreted". The margins are wide: about 650 samples a run put a third's standard
# error near 2.6 points, the slowed function moves 27 points (z ~ 10), the interpreted
# share ~30 points (z ~ 15); runs of the same work differ by z ~ 0.5.
. "$(dirname "$0")/../support/lib.sh"
need_root

W="$NUPP_TEST_DATA/ci/bench.lua"
export BENCH_N=6e7

# Records one run of the benchmark with the given arguments into $TMP/$1.json.
rec() {
  local out=$1; shift
  "$NUPP_BPF" record -q -F 999 -o "$TMP/$out.json" -- "$NUPP_LUAJIT" "$W" "$@" >/dev/null 2>"$TMP/rec.err" ||
    { cat "$TMP/rec.err"; fail "record $out"; }
}
# Runs diff; checks the status; output in $TMP/out.
diff_st() {
  local want=$1; shift
  local st=0
  "$NUPP_BPF" diff "$@" >"$TMP/out" 2>"$TMP/err" || st=$?
  [ "$st" = "$want" ] || { cat "$TMP/out" "$TMP/err"; fail "diff $*: status $st, want $want"; }
}
# Checks the JSON result: python code run on d (the document) and rows (key -> row).
check_json() {
  python3 - "$TMP/out" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["key"]: r for r in d["rows"]}
assert d["base"]["samples"] >= 300 and d["new"]["samples"] >= 300, (d["base"]["samples"], d["new"]["samples"])
exec(sys.argv[2])
PY
}

cd "$TMP"
rec base1
rec base2
rec new1
rec new2
rec slow slow=beta
rec off jitoff=beta

# The same workload: no regression, and the three functions each near a third.
diff_st 0 base1.json new1.json
assert_contains out "nupp-bpf diff: no regression"
diff_st 0 --json base1.json new1.json
check_json '
for f in ("alpha", "beta", "gamma"):
    r = rows["bench.lua:" + f]
    assert 25 < r["self"]["base"] < 42 and 25 < r["self"]["new"] < 42, (f, r["self"])
    assert not r["regression"], r
assert d["regressions"] == 0'
diff_st 0 --base base1.json --base base2.json --new new1.json --new new2.json
assert_contains out "2 runs"

# One function slowed: a regression that names it.
diff_st 1 base1.json slow.json
grep -qE ' bench\.lua:beta  \[grew\]$' out || { cat out; fail "the slowed function is not named"; }
diff_st 1 --json --base base1.json --base base2.json --new slow.json
check_json '
r = rows["bench.lua:beta"]
assert r["flags"] == ["grew"] and r["regression"], r
assert 15 < r["self"]["change"] < 40 and r["self"]["z"] > 6, r["self"]
assert d["regressions"] == 1, [k for k, v in rows.items() if v["regression"]]
for f in ("alpha", "gamma"):
    assert "shrank" in rows["bench.lua:" + f]["flags"], rows["bench.lua:" + f]'

# A hot loop that stops compiling: "now interpreted", whatever its share did.
diff_st 1 base1.json off.json
grep -qE ' bench\.lua:beta  \[.*now interpreted\]$' out || { cat out; fail "no 'now interpreted' for beta"; }
assert_contains out "JIT compilation disabled for function at bench.lua:22"
diff_st 1 --json base1.json off.json
check_json '
r = rows["bench.lua:beta"]
assert "nowInterpreted" in r["flags"] and r["regression"], r
assert r["interpreted"]["base"] < 1 and r["interpreted"]["new"] > 15 and r["interpreted"]["z"] > 6, r["interpreted"]
assert r["new"]["interpreted"] > 0.95 * (r["new"]["interpreted"] + r["new"]["compiled"]), r["new"]'
echo "PASS: diff on real recordings"
