#!/usr/bin/env bash
# nupp-bpf dump: a thread blocked in a system call (io.read, and poll through the FFI) is
# read from memory with its exact frames, lines and locals; a thread spinning in Lua, one
# in the GC and the threads of a C host are sampled and show their known stacks; --json
# parses; errors name the cause; the samplers are released after exit.
. "$(dirname "$0")/../support/lib.sh"
need_root

DATA="$NUPP_SOURCE_DIR/tests/data"

# Starts "$@" in the background with stdin a FIFO no one writes (io.read blocks); sets $target.
start() {
  rm -f "$TMP/in"; mkfifo "$TMP/in"
  "$@" <"$TMP/in" >/dev/null 2>&1 &
  target=$!
  PIDS+=("$target")
  exec 7<>"$TMP/in" # a writer, so the reader's open returns and read blocks
  wait_luajit "$target"
}

# Ends $target, then closes the FIFO's writer: closed first, the reader would see EOF and
# might exit before the kill, which then fails.
stop() {
  kill "$target"
  wait "$target" 2>/dev/null || true
  exec 7>&-
}

# Waits until every thread of $target is off CPU in a system call.
wait_blocked() {
  local i t ok
  for i in $(seq 100); do
    ok=1
    for t in /proc/"$target"/task/*; do grep -q '^running' "$t/syscall" && ok=0; done
    [ "$ok" = 1 ] && return 0
    sleep 0.1
  done
  fail "target $target never blocked"
}

# 1. Blocked in io.read: every frame, line and local, from memory.
start "$NUPP_LUAJIT" "$DATA/cli/blocked.lua"
wait_blocked
"$NUPP_BPF" dump --locals --json -p "$target" >"$TMP/b.json" 2>"$TMP/b.err" || { cat "$TMP/b.err"; fail "dump of io.read"; }
"$NUPP_BPF" dump --locals -p "$target" >"$TMP/b.txt" 2>>"$TMP/b.err" || { cat "$TMP/b.err"; fail "dump text"; }
cat "$TMP/b.txt"
python3 - "$TMP/b.json" <<'EOF' || fail "dump of a thread blocked in io.read"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["readFromRunningProcess"] is True
[t] = d["threads"]
assert t["how"] == "memory" and t["syscall"] is not None and t["state"] == "S", t
assert t["vmState"] == "C code", t["vmState"]
got = [(f["name"], f["where"]) for f in t["frames"]]
want = [("pmain", None), ("blocked.lua:0", "blocked.lua:30"), ("blocked.lua:main", "blocked.lua:26"),
        ("blocked.lua:read_input", "blocked.lua:10"), ("io.read", None)]
assert got == want, got
loc = lambda i: [(l["name"], l["value"]) for l in t["frames"][i]["locals"]]
# line is assigned by the call that blocks: not live yet, not shown.
assert loc(3) == [("prompt", '"> "'), ("n", "42"), ("label", '"waiting for input"')], loc(3)
assert [n for n, _ in loc(2)] == ["t", "r"] and loc(2)[0][1].startswith("table: 0x") and loc(2)[1][1] == "nil", loc(2)
assert loc(1)[0] == ("mode", '"read"'), loc(1)
EOF
# Text: innermost frame first, locals under their frame.
awk '/io.read/{a=NR} /blocked.lua:read_input/{b=NR} /n = 42/{c=NR} END{exit !(a && a < b && b < c)}' "$TMP/b.txt" ||
  fail "the text dump is not innermost first with locals under their frame"
stop

# 1b. The zone path open in the VM (nupp.zone), read from memory too.
start "$NUPP_LUAJIT" "$DATA/cli/blocked.lua" zone
wait_blocked
"$NUPP_BPF" dump --json -p "$target" >"$TMP/z.json" || fail "dump of a zoned thread"
python3 -c 'import json,sys; [t] = json.load(open(sys.argv[1]))["threads"]; assert t["zonePath"] == "request/parse", t["zonePath"]; assert t["frames"][-2]["name"] == "blocked.lua:read_input"' \
  "$TMP/z.json" || fail "the zone path of a blocked thread"
stop

# 2. Blocked in poll(2) called through the FFI from interpreted code.
start "$NUPP_LUAJIT" "$DATA/cli/blocked.lua" ffi
wait_blocked
"$NUPP_BPF" dump --locals --json -p "$target" >"$TMP/f.json" || fail "dump of an FFI call"
python3 - "$TMP/f.json" <<'EOF' || fail "dump of a thread blocked in an FFI call"
import json, sys
[t] = json.load(open(sys.argv[1]))["threads"]
assert t["how"] == "memory", t
lua = [(f["name"], f["where"]) for f in t["frames"] if f["lua"]]
assert lua == [("blocked.lua:0", "blocked.lua:30"), ("blocked.lua:main", "blocked.lua:26"),
               ("blocked.lua:wait_ffi", "blocked.lua:18")], lua
w = [f for f in t["frames"] if f["name"] == "blocked.lua:wait_ffi"][0]
vals = {l["name"]: l["value"] for l in w["locals"]}
assert vals["ms"] == "100000" and vals["calls"] == "7", vals
assert t["frames"][-1]["lua"] is False, "the FFI call is not the leaf"
EOF
stop

# 3. Spinning in a compiled loop, and in the GC: sampled.
"$NUPP_LUAJIT" "$DATA/report/spin.lua" &
target=$!
PIDS+=("$target")
wait_luajit "$target"
bpftool -j prog show >"$TMP/progs.before"
"$NUPP_BPF" dump --json -p "$target" >"$TMP/s.json" || fail "dump of a spinning thread"
python3 - "$TMP/s.json" <<'EOF' || fail "dump of a thread spinning in Lua"
import json, sys
[t] = json.load(open(sys.argv[1]))["threads"]
assert t["how"] == "sampled" and t["vmState"] == "compiled", t
assert t["samplesOfStack"] >= 0.95 * t["samples"] and t["samples"] >= 100, t
got = [(f["name"], f["where"]) for f in t["frames"]]
assert got == [("pmain", None), ("spin.lua:0", "spin.lua:4"), ("spin.lua:f", "spin.lua:3")], got
assert [f["lua"] for f in t["frames"]] == [False, True, True], t["frames"]
EOF
kill -9 "$target"
# The samplers are released after exit (by the closer process).
for i in $(seq 200); do
  bpftool -j prog show >"$TMP/progs.after"
  python3 -c 'import json,sys; a={p["id"] for p in json.load(open(sys.argv[1]))}; b={p["id"] for p in json.load(open(sys.argv[2]))}; sys.exit(0 if b <= a else 1)' \
    "$TMP/progs.before" "$TMP/progs.after" && break
  sleep 0.1
done
[ "$i" -lt 200 ] || fail "BPF programs of dump still loaded 20 s after it exited"

"$NUPP_LUAJIT" "$DATA/cli/gc_loop.lua" &
target=$!
PIDS+=("$target")
wait_luajit "$target"
sleep 1 # past building the heap
"$NUPP_BPF" dump --json -p "$target" >"$TMP/g.json" || fail "dump of a thread in the GC"
python3 - "$TMP/g.json" <<'EOF' || fail "dump of a thread in the GC"
import json, sys
[t] = json.load(open(sys.argv[1]))["threads"]
assert t["how"] == "sampled" and t["vmState"] == "GC", t
got = [(f["name"], f["where"]) for f in t["frames"]]
assert got == [("pmain", None), ("gc_loop.lua:0", "gc_loop.lua:8"), ("gc_loop.lua:collect_all", "gc_loop.lua:6"),
               ("collectgarbage", None)], got
EOF
kill -9 "$target"

# 4. A C host: a thread running Lua, a thread spinning in C (both sampled); then one VM
# handed between two threads under a mutex, the main thread blocked in pthread_join.
"$NUPP_BINARY_DIR/tests/prog_host_threads" busy 30 >/dev/null &
target=$!
PIDS+=("$target")
sleep 1
"$NUPP_BPF" dump --json -p "$target" >"$TMP/h.json" || fail "dump of a C host"
python3 - "$TMP/h.json" <<'EOF' || fail "dump of a C host's threads"
import json, sys
ts = json.load(open(sys.argv[1]))["threads"]
stacks = sorted(tuple(f["name"] for f in t["frames"]) for t in ts)
assert ("[host]", "host_compute") in stacks, stacks
lua = [s for s in stacks if "hostprog:work" in s]
assert len(lua) == 1 and lua[0][-2:] == ("hostprog:work", "hostprog:loop"), stacks
EOF
kill -9 "$target"
"$NUPP_BINARY_DIR/tests/prog_host_threads" handoff 30 >/dev/null &
target=$!
PIDS+=("$target")
sleep 1
"$NUPP_BPF" dump --json -p "$target" >"$TMP/o.json" || fail "dump of a C host handing a VM over"
python3 - "$TMP/o.json" <<'EOF' || fail "dump of the handoff host"
import json, sys
ts = {t["tid"]: t for t in json.load(open(sys.argv[1]))["threads"]}
main = ts[min(ts)]
assert main["how"] == "host" and main["syscall"] is not None, main
named = {t["name"] for t in ts.values()}
assert {"lua_a", "lua_b"} <= named, named
EOF
kill -9 "$target"

# 5. Errors.
st=0
"$NUPP_BPF" dump -p 4194303 2>"$TMP/e1" || st=$?
assert_eq "$st" 1 "dump of no process"
assert_contains "$TMP/e1" "no such process"
st=0
"$NUPP_BPF" dump -p $$ 2>"$TMP/e2" || st=$?
assert_eq "$st" 1 "dump of a shell"
assert_contains "$TMP/e2" "doctor -p"
st=0
"$NUPP_BPF" dump 2>"$TMP/e3" || st=$?
assert_eq "$st" 2 "dump without a PID"
assert_contains "$TMP/e3" "give -p PID"
echo "PASS"
