#!/usr/bin/env bash
# Zones of a VM that opens after the profiler attached: record -- CMD (our LuaJIT, and a
# /bin/sh wrapper that execs it) and record -p of a C host that opens its VM late. The
# script pushes its first zone at its first line, so a sampler that learned the VM's zone
# id late would put early samples in "" (no zone), and a trace channel that learned where
# the zone ids are late would do the same to the aborts of the first milliseconds
# (abort_early); every sample and abort must land in the zone open when it happened.
. "$(dirname "$0")/../support/lib.sh"
need_root

cat >"$TMP/zoned.lua" <<'LUA'
local zone = require("nupp.zone")
zone("boot")
jit.off()
local function spin(t) local t0 = os.clock() while os.clock() - t0 < t do end end
local function boot_work(t) spin(t) end
local function main_work(t) spin(t) end
local FNEW = "local s = 0 for i = 1, 3000 do s = s + (function() return i end)() end return s"
jit.on() assert(loadstring(FNEW, "=abort_early"))() jit.off()
boot_work(0.6)
jit.on() assert(loadstring(FNEW, "=abort_boot"))() jit.off()
zone()
zone("main") zone("loop")
main_work(0.6)
jit.on() assert(loadstring(FNEW, "=abort_main"))() jit.off()
zone() zone()
io.stdout:write("done\n") io.stdout:flush()
LUA

# Checks the profile $1: boot_work only in "boot", main_work only in "main/loop", each
# with most of its 0.6 s of CPU (499 Hz: ~300 samples), and the aborts in the same zones.
check_zones() {
  python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
by = {}
for s in d["samples"]:
    for fn in ("boot_work", "main_work"):
        if fn in s["stack"]:
            by.setdefault(fn, {}).setdefault(s["zonePath"], 0)
            by[fn][s["zonePath"]] += s["count"]
ab = {a["location"]: a["zonePath"] for a in d["aborts"]}
print(sys.argv[2], by, ab)
assert set(by.get("boot_work", {})) == {"boot"}, (sys.argv[2], by)
assert set(by.get("main_work", {})) == {"main/loop"}, (sys.argv[2], by)
assert by["boot_work"]["boot"] > 150 and by["main_work"]["main/loop"] > 150, (sys.argv[2], by)
assert ab.get("abort_early:1") == "boot", (sys.argv[2], "an abort in the first milliseconds", ab)
assert ab.get("abort_boot:1") == "boot" and ab.get("abort_main:1") == "main/loop", (sys.argv[2], ab)
PY
}

# 1. record -- CMD: the VM opens after the attach.
"$NUPP_BPF" record -F 499 -o "$TMP/cmd.json" -- "$NUPP_LUAJIT" "$TMP/zoned.lua" >/dev/null 2>"$TMP/cmd.err" ||
  fail "record -- luajit failed: $(cat "$TMP/cmd.err")"
check_zones "$TMP/cmd.json" "record -- CMD" || fail "record -- CMD: samples or aborts in the wrong zone"

# 2. record -- a wrapper that execs our LuaJIT: the VM opens in the exec'ed image.
printf '#!/bin/sh\nexec "%s" "%s"\n' "$NUPP_LUAJIT" "$TMP/zoned.lua" >"$TMP/run.sh"
chmod +x "$TMP/run.sh"
"$NUPP_BPF" record -F 499 -o "$TMP/wrap.json" -- "$TMP/run.sh" >/dev/null 2>"$TMP/wrap.err" ||
  fail "record -- wrapper failed: $(cat "$TMP/wrap.err")"
check_zones "$TMP/wrap.json" "record -- wrapper" || fail "record -- wrapper: samples or aborts in the wrong zone"

# 3. record -p of a host whose VM opens (and runs the script) after the attach.
mkfifo "$TMP/in"
"$NUPP_TEST_BIN/prog_late_vm" 1 "$TMP/zoned.lua" <"$TMP/in" >"$TMP/host.out" & host=$!
exec 3>"$TMP/in"
for i in $(seq 100); do grep -q ready "$TMP/host.out" && break; sleep 0.1; done
grep -q ready "$TMP/host.out" || fail "the host did not start"
"$NUPP_BPF" record -F 499 -o "$TMP/late.json" -p "$host" 2>"$TMP/late.err" & rec=$!
for i in $(seq 600); do grep -q recording "$TMP/late.err" && break; sleep 0.1; done
grep -q recording "$TMP/late.err" || fail "record -p did not start: $(cat "$TMP/late.err")"
echo go >&3
for i in $(seq 300); do grep -q "open 1" "$TMP/host.out" && break; sleep 0.1; done
grep -q "open 1" "$TMP/host.out" || fail "the host's script did not finish"
kill -INT "$rec"; wait "$rec" || fail "record -p failed: $(cat "$TMP/late.err")"
exec 3>&-
wait "$host" || fail "the host failed"
check_zones "$TMP/late.json" "record -p, VM opened late" || fail "record -p: samples or aborts of a late VM in the wrong zone"
echo "PASS: record zones of VMs opened after the attach"
