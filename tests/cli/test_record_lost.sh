#!/usr/bin/env bash
# Lost samples are counted and, past 1 % of a reason, explained: 300 functions of
# distinct stacks, each run 2 ms in turn, against a counts map of 64 stacks (--max-stacks
# 64) lose samples as mapFull; the summary says so with its remedy, and every sample of
# the run is either a stack or counted lost (the program's CPU time at 997 Hz). The same
# run with the default map loses none to it and warns of nothing. In both, every stack is
# one the program runs and none is lost unnamed (symbolize): with 64 stacks, 300 stacks
# share the 128 slots of a buffer's marks, so they are sent again and again.
. "$(dirname "$0")/../support/lib.sh"
need_root
cat >"$TMP/many.lua" <<'LUA'
local fs = {}
for i = 1, 300 do
  fs[i] = assert(loadstring("local t0 = os.clock() while os.clock() - t0 < 0.002 do end", "=f" .. i))
end
local t0 = os.clock()
while os.clock() - t0 < 2 do for i = 1, 300 do fs[i]() end end
io.stderr:write(string.format("cpu %.3f\n", os.clock()))
LUA
check() { # $1 profile, $2 the program's stderr; prints mapFull, stacks and lost
  python3 - "$1" "$2" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
cpu = float(re.search(r"cpu ([0-9.]+)", open(sys.argv[2]).read()).group(1))
m = d["meta"]
lost = sum(m["lost"].values())
assert abs((m["samples"] + lost) - 997 * cpu) <= 0.05 * 997 * cpu, (m["samples"], lost, cpu)
assert m["lost"]["symbolize"] == 0, m["lost"]
# The call graph: the main chunk calls f1..f300 (each calls os.clock) and, first,
# loadstring, last io.stderr:write; host code and the start of the VM besides (pmain alone, or opening its
# libraries: pmain;luaopen_*).
main = ["pmain", "many.lua:0"]
for s in d["samples"]:
    f = s["stack"].split(";")
    start = f == ["pmain"] or len(f) == 2 and f[0] == "pmain" and f[1].startswith("luaopen_")
    assert f[0] == "[host]" or start or f[:2] == main and (
        len(f) == 2 or len(f) == 3 and f[2] in ("loadstring", "os.clock", "io.method.write") or
        re.fullmatch(r"f([1-9][0-9]?|[12][0-9][0-9]|300):0", f[2]) and (len(f) == 3 or f[3:] == ["os.clock"])), s
print(m["lost"]["mapFull"], m["samples"], lost)
PY
}
"$NUPP_BPF" record -F 997 --max-stacks 64 -o "$TMP/small.json" -- "$NUPP_LUAJIT" "$TMP/many.lua" 2>"$TMP/small.err" ||
  { cat "$TMP/small.err"; fail "record --max-stacks 64: status $?"; }
read -r full named lost < <(check "$TMP/small.json" "$TMP/small.err") || { cat "$TMP/small.err"; fail "small map: samples"; }
echo "--max-stacks 64: $named named, $lost lost, $full of them mapFull"
[ "$full" -ge 10 ] && [ "$((full * 100))" -ge "$((named + lost))" ] || fail "only $full samples lost as mapFull with a map of 64 stacks"
assert_contains "$TMP/small.err" "% of the samples were lost as mapFull (the kernel's counts map, or the ring that carries new stacks, was full): raise --max-stacks"

"$NUPP_BPF" record -F 997 -o "$TMP/big.json" -- "$NUPP_LUAJIT" "$TMP/many.lua" 2>"$TMP/big.err" ||
  { cat "$TMP/big.err"; fail "record: status $?"; }
read -r full named lost < <(check "$TMP/big.json" "$TMP/big.err") || { cat "$TMP/big.err"; fail "default map: samples"; }
echo "default map: $named named, $lost lost, $full of them mapFull"
assert_eq "$full" 0 "mapFull with the default map"
if grep -q "warning: .* of the samples were lost" "$TMP/big.err"; then cat "$TMP/big.err"; fail "a loss warning with the default map"; fi
echo "ok: mapFull counted and explained with its remedy"
