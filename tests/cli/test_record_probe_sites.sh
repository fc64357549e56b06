#!/usr/bin/env bash
# While nupp-bpf records, each luajit:* probe site our LuaJIT hits is a breakpoint (the
# site is a 1-byte NOP: never a call of Linux 6.18's uprobe trampoline, which a forked
# child does not inherit); a child the target forks while attached runs on and exits 0;
# once record -p has detached, every site is the NOP again (and luajit:proto_free's
# semaphore 0: the VM frees prototypes at once again, not in batches) and the target runs
# on, with the result it gives unprofiled.
. "$(dirname "$0")/../support/lib.sh"
need_root

exe=$(readlink -f "$NUPP_LUAJIT")
sites=$(readelf -n "$exe" | awk '/Provider: luajit/ {getline; n = $2; getline; print n ":" $2}' | tr -d ,)
# luajit:proto_free has a semaphore: the kernel counts its consumers in the process, and
# the VM batches its frees only while one is attached.
sema=$(readelf -n "$exe" | awk '/Provider: luajit/ {getline; n = $2; getline; if (n == "proto_free") print $6}')
[ -n "$sema" ] && [ "$((sema))" -ne 0 ] || fail "luajit:proto_free has no semaphore"
# Code loaded and collected without pause (proto_free fires 20 times a
# round) until the file arg[1] exists (60 s at most), then its checksum.
cat >"$TMP/load.lua" <<'LUA'
local src = {}
for i = 1, 20 do src[#src + 1] = ("local function f%d(n) return n * %d end"):format(i, i) end
src[#src + 1] = "return f1(2) + f20(3)"
src = table.concat(src, "\n")
local t0, sum, r = os.time(), 0, 0
repeat
  for _ = 1, 100 do
    r = r + 1
    sum = sum + assert(loadstring(src, "=chunk"))()
  end
  collectgarbage()
  local f = io.open(arg[1])
  if f then f:close() end
until f or os.time() - t0 > 60
print(sum / r)
LUA
touch "$TMP/stop"
want=$("$NUPP_LUAJIT" "$TMP/load.lua" "$TMP/stop")
rm "$TMP/stop"
assert_eq "$want" "62" "the workload's own result"

# The byte at a site of the running target (its exe mapped at base).
site_bytes() {
  dd if="/proc/$1/mem" bs=1 iflag=skip_bytes,count_bytes skip=$(($2 + $3)) count=1 2>/dev/null | od -An -tx1 | tr -d ' \n'
}
# The value of the proto_free semaphore of the running target.
sema_value() {
  dd if="/proc/$1/mem" bs=1 iflag=skip_bytes,count_bytes skip=$((base + sema)) count=2 2>/dev/null | od -An -tu2 | tr -d ' \n'
}

# The kernel takes a profiler's probes out after it has exited, not at once (within 2 s
# here): waits up to 10 s for every site of $1 to be the
# NOP; what is left is in $left.
wait_nops() {
  for _ in $(seq 100); do
    left=""
    for s in $sites; do
      b=$(site_bytes "$1" "$base" "${s#*:}")
      [ "$b" = 90 ] || left="$left ${s%%:*}=$b"
    done
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  return 1
}

"$NUPP_LUAJIT" "$TMP/load.lua" "$TMP/stop" >"$TMP/out" & target=$!
sleep 0.3
base=$((0x$(awk -v f="$exe" '$6 == f && $3 == "00000000" {split($1, a, "-"); print a[1]; exit}' "/proc/$target/maps")))
# (A profiler that just exited, as the test before may have, leaves its probes in for a
# moment: wait for them to go.)
wait_nops "$target" || fail "probe sites not NOPs before recording:$left"
assert_eq "$(sema_value "$target")" 0 "the proto_free semaphore before recording"
"$NUPP_BPF" record -q -F 199 -d 2 -o "$TMP/p.json" -p "$target" 2>"$TMP/rec.err" & rec=$!
# A site attached is a breakpoint (int3).
optimized=""
while kill -0 "$rec" 2>/dev/null; do
  sleep 0.1
  for s in $sites; do
    case ${s%%:*} in proto_free) ;; *) continue ;; esac
    [ "$(site_bytes "$target" "$base" "${s#*:}")" = cc ] && optimized="$optimized ${s%%:*}"
  done
  [ -n "$optimized" ] && break
done
[ -n "$optimized" ] || fail "no proto_free site became a breakpoint while recording"
[ "$(sema_value "$target")" -ge 1 ] || fail "the proto_free semaphore is $(sema_value "$target") while recording"
wait "$rec" || fail "record -p failed: $(cat "$TMP/rec.err")"
kill -0 "$target" || fail "the target stopped when record -p detached"
wait_nops "$target" || fail "probe sites still not NOPs 10 s after record -p detached:$left"
assert_eq "$(sema_value "$target")" 0 "the proto_free semaphore after record -p detached"
touch "$TMP/stop"
wait "$target" || fail "the target failed after record -p detached"
assert_eq "$(cat "$TMP/out")" "$want" "the target's result after profiling"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["meta"]["samples"] > 0, d["meta"]' "$TMP/p.json" ||
  fail "the profile has no samples"

# A process that forks while attached: the child hits the probes its parent had hit
# (with 5-byte sites, Linux 6.18 killed it with SIGSEGV at its first hit).
cat >"$TMP/fork.lua" <<'LUA'
local ffi = require("ffi")
ffi.cdef[[int fork(void); int waitpid(int, int *, int);]]
local function churn(n) for i = 1, n do assert(loadstring("return " .. i))() end collectgarbage() end
local t0 = os.clock()
while os.clock() - t0 < 1 do churn(2000) end -- the probe sites hit while attached
local pid = ffi.C.fork()
if pid == 0 then churn(2000); os.exit(0) end
local st = ffi.new("int[1]")
assert(ffi.C.waitpid(pid, st, 0) == pid)
print("child status " .. st[0])
LUA
"$NUPP_BPF" record -F 99 -o "$TMP/f.json" -- "$NUPP_LUAJIT" "$TMP/fork.lua" >"$TMP/fork.out" 2>"$TMP/fork.err" ||
  { cat "$TMP/fork.err"; fail "record of a forking program failed"; }
assert_eq "$(cat "$TMP/fork.out")" "child status 0" "a child forked while the probes were attached"
echo "PASS: probe sites are breakpoints while recording, NOPs again after; a forked child runs on"
