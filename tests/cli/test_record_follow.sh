#!/usr/bin/env bash
# record -- CMD follows an exec into our LuaJIT (a wrapper script, env, sh -c), and with
# --subprocesses every child process that runs our LuaJIT, each one's rows apart (pid)
# and its CPU time in the profile within 5 % of its own os.clock; without it, a warning
# names the children not followed.
. "$(dirname "$0")/../support/lib.sh"
need_root
FREQ=499

cat >"$TMP/spin.lua" <<'LUA'
-- Spins for arg[1] seconds of CPU, then prints "pid clock" to the file arg[2].
local ffi = require("ffi")
ffi.cdef("int getpid(void);")
local t0 = os.clock()
local function spin() local s = 0 for i = 1, 1000 do s = s + i end return s end
while os.clock() - t0 < tonumber(arg[1]) do spin() end
local f = assert(io.open(arg[2], "a"))
f:write(ffi.C.getpid(), " ", os.clock(), "\n")
f:close()
LUA

# 1. A #!/bin/sh wrapper that execs our LuaJIT: profiled, not "running unprofiled".
printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$NUPP_LUAJIT" "$TMP/spin.lua" >"$TMP/run.sh"
chmod +x "$TMP/run.sh"
"$NUPP_BPF" record -F $FREQ -o "$TMP/wrap.json" -- "$TMP/run.sh" 1.5 "$TMP/wrap.clock" 2>"$TMP/wrap.err" ||
  fail "record of a wrapper failed: $(cat "$TMP/wrap.err")"
python3 - "$TMP/wrap.json" "$TMP/wrap.clock" $FREQ <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
pid, clock = open(sys.argv[2]).read().split()
freq = int(sys.argv[3])
n = sum(s["count"] for s in d["samples"] if s["pid"] == int(pid) and "spin.lua" in s["stack"])
print("wrapper: pid", pid, "samples", n, "cpu", clock, "pids", d["meta"]["pids"])
assert int(pid) in d["meta"]["pids"], d["meta"]["pids"]
assert abs(n / freq - float(clock)) <= 0.05 * float(clock), (n / freq, clock)
PY
for how in env sh; do
  if [ $how = env ]; then cmd=(env "$NUPP_LUAJIT" "$TMP/spin.lua" 0.5 "$TMP/$how.clock")
  else cmd=(sh -c "exec '$NUPP_LUAJIT' '$TMP/spin.lua' 0.5 '$TMP/$how.clock'"); fi
  "$NUPP_BPF" record -q -F $FREQ -o "$TMP/$how.json" -- "${cmd[@]}" || fail "record -- $how failed"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); n=sum(s["count"] for s in d["samples"] if "spin.lua" in s["stack"]); print(sys.argv[2], n); assert n > 100, n' \
    "$TMP/$how.json" $how
done

# 2. A Lua program that starts two LuaJIT children with os.execute.
cat >"$TMP/parent.lua" <<LUA
local lj, spin, out = "$NUPP_LUAJIT", "$TMP/spin.lua", arg[2]
assert(os.execute(lj .. " " .. spin .. " 1.5 " .. out) == 0)
assert(os.execute(lj .. " " .. spin .. " 1.0 " .. out) == 0)
dofile(spin) -- arg[1], arg[2] as given: the parent spins too
LUA
"$NUPP_BPF" record -F $FREQ --subprocesses -o "$TMP/sub.json" -- "$NUPP_LUAJIT" "$TMP/parent.lua" 0.5 "$TMP/sub.clock" \
  2>"$TMP/sub.err" || fail "record --subprocesses failed: $(cat "$TMP/sub.err")"
python3 - "$TMP/sub.json" "$TMP/sub.clock" $FREQ <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
freq = int(sys.argv[3])
procs = [l.split() for l in open(sys.argv[2])]
assert len(procs) == 3, procs
for pid, clock in procs:
    n = sum(s["count"] for s in d["samples"] if s["pid"] == int(pid))
    print("pid", pid, "samples", n, "cpu %.3f s" % (n / freq), "os.clock", clock)
    assert int(pid) in d["meta"]["pids"], (pid, d["meta"]["pids"])
    assert abs(n / freq - float(clock)) <= 0.05 * float(clock), (pid, n / freq, clock)
print("lost", d["meta"]["lost"])
PY
# 3. Without --subprocesses: the children are named in a warning.
rm -f "$TMP/sub.clock"
"$NUPP_BPF" record -F $FREQ -o "$TMP/nosub.json" -- "$NUPP_LUAJIT" "$TMP/parent.lua" 0.3 "$TMP/sub.clock" \
  2>"$TMP/nosub.err" || fail "record failed: $(cat "$TMP/nosub.err")"
n=$(grep -c "was not followed (--subprocesses follows it)" "$TMP/nosub.err" || true)
assert_eq "$n" 2 "warnings for the two children not followed"
for pid in $(awk 'NR<3 {print $1}' "$TMP/sub.clock"); do
  assert_contains "$TMP/nosub.err" "child process $pid ("
done
echo "PASS: record follows execs and subprocesses"
