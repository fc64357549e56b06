#!/usr/bin/env bash
# nupp-bpf record loses nothing: the profile is written when the duration ends, when
# the target exits mid-record, on Ctrl-C (SIGINT) and on SIGTERM, for -p PID and for
# -- COMMAND; a launched command's exit status is passed on.
. "$(dirname "$0")/../support/lib.sh"
need_root

BUSY='local t = os.clock() while os.clock() - t < (tonumber(arg[1]) or 30) do local s = 0 for i = 1, 1000 do s = s + i end end'
echo "$BUSY" >"$TMP/busy.lua"

# Checks a nupp profile: JSON with version 1, samples > 0, every stack well formed.
check_json() {
  python3 - "$1" "$2" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
pid = int(sys.argv[2])
assert doc["version"] == 1, doc.get("version")
m = doc["meta"]
assert pid in m["pids"], (pid, m["pids"])
assert m["samples"] > 0, m
assert m["samples"] == sum(s["count"] for s in doc["samples"]), "meta.samples != sum of counts"
for s in doc["samples"]:
    assert s["count"] == s["compiled"] + s["interpreted"] + s["cCode"] + s["collecting"] + s["compiling"], s
    assert s["stack"] and all(s["stack"].split(";")), s
assert isinstance(doc["aborts"], list)
print("ok", m["samples"], "samples")
PY
}

# 1. -p PID with a duration: the file is written when the duration ends.
"$NUPP_LUAJIT" "$TMP/busy.lua" 30 & target=$!
wait_luajit "$target"
"$NUPP_BPF" record -q -F 199 -d 1 -o "$TMP/d.json" -p "$target"
check_json "$TMP/d.json" "$target"
kill -0 "$target" || fail "record -p must not stop the target"

# 2. SIGINT (Ctrl-C) and SIGTERM during -p: the file is written, status 0, and every probe
# record attached is gone after it exits.
for sig in INT TERM; do
  "$NUPP_BPF" record -F 199 -o "$TMP/$sig.json" -p "$target" 2>"$TMP/$sig.err" & rec=$!
  wait_recording "$TMP/$sig.err"
  held_bpf "$rec" >"$TMP/$sig.held"
  grep -q '^link_id:' "$TMP/$sig.held" || fail "record holds no BPF link while recording"
  kill -"$sig" "$rec"
  st=0; wait "$rec" || st=$?
  assert_eq "$st" 0 "record exit status after SIG$sig"
  check_json "$TMP/$sig.json" "$target"
  wait_released "$TMP/$sig.held"
done
kill "$target"; wait "$target" 2>/dev/null || true

# 3. A target that exits mid-record (-p): the file is written.
"$NUPP_LUAJIT" "$TMP/busy.lua" 30 & target=$!
wait_luajit "$target"
"$NUPP_BPF" record -F 199 -o "$TMP/exit.folded" -p "$target" 2>"$TMP/exit.err" & rec=$!
wait_recording "$TMP/exit.err"
kill "$target"
wait "$rec" || fail "record -p of a target that exited mid-record failed: $(cat "$TMP/exit.err")"
grep -qE '^[^ ]+ [0-9]+$' "$TMP/exit.folded" || { cat "$TMP/exit.folded"; fail "no collapsed stacks after the target exited"; }
wait "$target" || true

# 4. -- COMMAND: written when the command exits; its status is passed on.
"$NUPP_BPF" record -q -F 199 -o "$TMP/cmd.json" -- "$NUPP_LUAJIT" "$TMP/busy.lua" 1
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["meta"]["samples"] > 0' "$TMP/cmd.json"
st=0; "$NUPP_BPF" record -q -o "$TMP/false.json" -- "$NUPP_LUAJIT" -e 'os.exit(3)' || st=$?
assert_eq "$st" 3 "exit status of the command"
[ -s "$TMP/false.json" ] || fail "no profile for a command that exited 3"
# A command that is not LuaJIT runs all the same, with a warning, and its status is passed on.
st=0; "$NUPP_BPF" record -o "$TMP/f.json" -- false 2>"$TMP/false.err" || st=$?
assert_eq "$st" 1 "record -- false passes exit status 1 on"
assert_contains "$TMP/false.err" "does not run LuaJIT"
assert_contains "$TMP/false.err" "never ran our LuaJIT: nothing was profiled"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["samples"] == [], d' "$TMP/f.json"
# ... even when it burns CPU: none of its samples (host code of a process that never ran
# our LuaJIT) is in the profile.
"$NUPP_BPF" record -q -F 997 -o "$TMP/sh.json" -- sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["samples"] == [] and d["meta"]["hostSamples"] == 0, d' "$TMP/sh.json"
st=0; "$NUPP_BPF" record -q -o "$TMP/lj-false.json" -- "$NUPP_LUAJIT" -e 'os.exit(false)' || st=$?
assert_eq "$st" 1 "exit status 1 of a LuaJIT command is passed on"

# Under sudo the command runs as the invoking user (SUDO_UID/SUDO_GID), still profiled.
SUDO_UID=65534 SUDO_GID=65534 "$NUPP_BPF" record -q -F 199 -o "$TMP/sudo.json" -- "$NUPP_LUAJIT" -e '
  local ffi = require("ffi"); ffi.cdef("unsigned getuid(void); unsigned getgid(void);")
  print(ffi.C.getuid(), ffi.C.getgid())
  local t = os.clock() while os.clock() - t < 0.5 do end' >"$TMP/ids"
assert_eq "$(cat "$TMP/ids")" "$(printf '65534\t65534')" "uid/gid of the command under sudo"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["meta"]["samples"] > 0' "$TMP/sudo.json"

# 5. SIGTERM during -- COMMAND: written, the command is stopped.
"$NUPP_BPF" record -F 199 -o "$TMP/cterm.json" -- "$NUPP_LUAJIT" "$TMP/busy.lua" 30 2>"$TMP/cterm.err" & rec=$!
wait_recording "$TMP/cterm.err"
held_bpf "$rec" >"$TMP/cterm.held"
kill -TERM "$rec"
wait "$rec" || true
wait_released "$TMP/cterm.held"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["meta"]["samples"] > 0' "$TMP/cterm.json"
pgrep -f "$TMP/busy.lua 30" && fail "the command outlived record after SIGTERM"

# 6. -o - writes collapsed stacks to stdout, the summary goes to stderr.
"$NUPP_BPF" record -F 199 -o - -- "$NUPP_LUAJIT" "$TMP/busy.lua" 0.5 >"$TMP/stdout" 2>"$TMP/stderr"
grep -qE '^[^ ]+ [0-9]+$' "$TMP/stdout" || fail "-o - wrote no collapsed stacks"
assert_contains "$TMP/stderr" "nupp-bpf: wrote stdout:"
echo "PASS: record lifecycle"
