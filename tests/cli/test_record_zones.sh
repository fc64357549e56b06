#!/usr/bin/env bash
# record -p PID names samples and aborts by nupp.zone path, zones pushed before the attach
# and after it; --zone filters on the path; --zone on a target without nupp.zone says so.
. "$(dirname "$0")/../support/lib.sh"
need_root

cat >"$TMP/zoned.lua" <<'LUA'
-- "early" is pushed before the profiler attaches (it waits for a line on stdin), then
-- "late/inner" after; each spins on its own function and aborts at its own chunk.
local zone = require("nupp.zone")
jit.off()
local function spin(t) local t0 = os.clock() while os.clock() - t0 < t do end end
local function early_work(t) spin(t) end
local function late_work(t) spin(t) end
local FNEW = "local s = 0 for i = 1, 3000 do s = s + (function() return i end)() end return s"
zone("early")
io.stdout:write("ready\n") io.stdout:flush()
io.read("*l")
early_work(1.0)
jit.on() assert(loadstring(FNEW, "=abort_early"))() jit.off()
zone()
zone("late") zone("inner")
late_work(1.0)
jit.on() assert(loadstring(FNEW, "=abort_late"))() jit.off()
zone() zone()
io.stdout:write("done\n") io.stdout:flush()
io.read("*l")
LUA

mkfifo "$TMP/in"
"$NUPP_LUAJIT" "$TMP/zoned.lua" <"$TMP/in" >"$TMP/out" & target=$!
exec 3>"$TMP/in"
for i in $(seq 100); do grep -q ready "$TMP/out" && break; sleep 0.1; done
"$NUPP_BPF" record -F 499 -o "$TMP/z.json" -p "$target" 2>"$TMP/rec.err" & rec=$!
for i in $(seq 600); do grep -q recording "$TMP/rec.err" && break; sleep 0.1; done
echo go >&3
for i in $(seq 300); do grep -q done "$TMP/out" && break; sleep 0.1; done
grep -q done "$TMP/out" || fail "the target did not finish"
kill -INT "$rec"; wait "$rec" || fail "record failed: $(cat "$TMP/rec.err")"
echo bye >&3; exec 3>&-
wait "$target" || true
python3 - "$TMP/z.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
by = {}
for s in d["samples"]:
    for fn in ("early_work", "late_work"):
        if fn in s["stack"]:
            by.setdefault(fn, {}).setdefault(s["zonePath"], 0)
            by[fn][s["zonePath"]] += s["count"]
print(by)
assert set(by["early_work"]) == {"early"}, by
assert set(by["late_work"]) == {"late/inner"}, by
assert by["early_work"]["early"] > 200 and by["late_work"]["late/inner"] > 200, by
ab = {a["location"]: a["zonePath"] for a in d["aborts"]}
print(ab)
assert ab.get("abort_early:1") == "early" and ab.get("abort_late:1") == "late/inner", ab
print("ok zones")
PY

# --zone PREFIX keeps that subtree only.
"$NUPP_LUAJIT" "$TMP/zoned.lua" <"$TMP/in" >"$TMP/out2" & target=$!
exec 3>"$TMP/in"
for i in $(seq 100); do grep -q ready "$TMP/out2" && break; sleep 0.1; done
"$NUPP_BPF" record -F 499 --zone late -o "$TMP/late.folded" -p "$target" 2>"$TMP/rec2.err" & rec=$!
for i in $(seq 600); do grep -q recording "$TMP/rec2.err" && break; sleep 0.1; done
echo go >&3
for i in $(seq 300); do grep -q done "$TMP/out2" && break; sleep 0.1; done
kill -INT "$rec"; wait "$rec" || fail "record --zone failed: $(cat "$TMP/rec2.err")"
echo bye >&3; exec 3>&-
wait "$target" || true
grep -q late_work "$TMP/late.folded" || fail "--zone late lost late_work"
grep -q early_work "$TMP/late.folded" && fail "--zone late kept early_work"

# --zone on a target that never loads nupp.zone says so, and writes nothing.
st=0
"$NUPP_BPF" record -d 0.5 --zone frame -o "$TMP/none.json" -- "$NUPP_LUAJIT" -e \
  'local t = os.clock() while os.clock() - t < 0.5 do end' 2>"$TMP/none.err" || st=$?
assert_eq "$st" 1 "status of --zone without nupp.zone"
assert_contains "$TMP/none.err" "never loaded nupp.zone"
[ ! -e "$TMP/none.json" ] || fail "a profile was written although --zone matched nothing"
echo "PASS: record zones"
