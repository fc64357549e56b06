#!/usr/bin/env bash
# nupp-bpf doctor: one line per check with the remedy when it fails, and an exit status
# that predicts record's: as root, as an unprivileged user, and with CAP_BPF, CAP_PERFMON
# and CAP_SYS_PTRACE but not CAP_SYS_ADMIN (what this kernel wants for uprobes is found
# by trying, and must agree with what record then does); and for target processes: our
# LuaJIT, a C host before and after it opens VMs, Debian's unpatched LuaJIT, a process
# that is not LuaJIT, a binary replaced under a running process, no such process.
. "$(dirname "$0")/../support/lib.sh"
need_root

# Runs doctor with the given arguments (under the prefix command in $AS, if any); checks
# the status; the output is in $TMP/out.
doctor() {
  local want=$1; shift
  local st=0
  $AS "$NUPP_BPF" doctor "$@" >"$TMP/out" 2>"$TMP/err" || st=$?
  [ "$st" = "$want" ] || { cat "$TMP/out" "$TMP/err"; fail "doctor $* ${AS:+(as $AS)}: status $st, want $want"; }
}
# Asserts a line of the last output starts with the status and check name and holds text.
line() {
  grep -E "^$1 +$2 " "$TMP/out" | grep -qF -- "$3" ||
    { cat "$TMP/out"; fail "no line '$1 $2 ... $3'"; }
}
# Runs a short record under $AS; prints its status.
record_status() {
  local st=0
  $AS "$NUPP_BPF" record -q -d 2 -o "$TMP/r.json" -- "$NUPP_LUAJIT" -e 'for i = 1, 3e7 do end' \
    >/dev/null 2>"$TMP/rec.err" || st=$?
  echo "$st"
}

# -- The machine, as root -----------------------------------------------------------
AS=
doctor 0
for cap in CAP_BPF CAP_PERFMON CAP_SYS_PTRACE CAP_SYS_ADMIN; do line ok "$cap" "present"; done
line ok user "root (uid 0"
line ok "kernel BTF" "/sys/kernel/btf/vmlinux"
line ok "BPF programs" "bpf_loop"
line ok "perf events" "deliver samples to BPF"
line ok uprobes "attaches and fires"
line ok "locked memory" "RLIMIT_MEMLOCK"
line ok "record's programs" "the sampler loads and attaches to every CPU"
grep -qE '^(ok|note) +bpffs ' "$TMP/out" || fail "no bpffs line"
grep -qE '^(ok|note|FAIL) +tracefs ' "$TMP/out" || fail "no tracefs line"
assert_eq "$(tail -1 "$TMP/out")" "doctor: record would work"
assert_eq "$(grep -c . "$TMP/out")" 14 "lines without -p (13 checks and the verdict)"
assert_eq "$(record_status)" 0 "record as root"

doctor 2 -p abc
assert_contains "$TMP/err" "invalid PID 'abc'"
doctor 2 extra
doctor 0 --help
assert_contains "$TMP/out" "USAGE"

# -- Unprivileged: every missing capability named, with the remedy ------------------
if ! command -v setpriv >/dev/null; then fail "setpriv (util-linux) is missing"; fi
AS="setpriv --reuid=nobody --regid=nogroup --clear-groups"
doctor 1
line note user "uid 65534, not root"
for cap in CAP_BPF CAP_PERFMON CAP_SYS_PTRACE; do line FAIL "$cap" "missing"; line FAIL "$cap" "fix: run with sudo"; done
line skip CAP_SYS_ADMIN "once CAP_BPF and CAP_PERFMON are granted"
line FAIL "BPF programs" "Operation not permitted"
line FAIL "perf events" "kernel.perf_event_paranoid="
line FAIL "perf events" "fix: grant CAP_PERFMON"
line FAIL uprobes "fails"
line skip "record's programs" "not tried"
assert_contains "$TMP/out" "doctor: record would fail: CAP_BPF: missing"
assert_eq "$(record_status)" 1 "record as nobody"
assert_contains "$TMP/rec.err" "nupp-bpf doctor"

# -- CAP_BPF + CAP_PERFMON + CAP_SYS_PTRACE only: does this kernel want CAP_SYS_ADMIN? --
CAPS=+bpf,+perfmon,+sys_ptrace
AS="setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=$CAPS --ambient-caps=$CAPS"
st=0; $AS "$NUPP_BPF" doctor >"$TMP/out" 2>&1 || st=$?
for cap in CAP_BPF CAP_PERFMON CAP_SYS_PTRACE; do line ok "$cap" "present"; done
line ok "BPF programs" "load"
line ok "perf events" "deliver samples to BPF"
rst=$(record_status)
if [ "$st" = 1 ]; then
  # This kernel (6.18 here) refuses uprobes without CAP_SYS_ADMIN: doctor says so, and record fails.
  line FAIL CAP_SYS_ADMIN "this kernel wants it for uprobes"
  line FAIL uprobes "fix: this kernel wants CAP_SYS_ADMIN"
  assert_contains "$TMP/out" "doctor: record would fail: CAP_SYS_ADMIN"
  [ "$rst" != 0 ] || fail "doctor says record fails without CAP_SYS_ADMIN, but record worked"
  assert_contains "$TMP/rec.err" "CAP_SYS_ADMIN"
  assert_contains "$TMP/rec.err" "nupp-bpf doctor"
else
  assert_eq "$st" 0 "doctor with three capabilities"
  line ok CAP_SYS_ADMIN "not needed"
  assert_eq "$rst" 0 "doctor says record works without CAP_SYS_ADMIN"
fi
AS=

# -- Targets --------------------------------------------------------------------------
"$NUPP_LUAJIT" -e 'local t = os.clock() while os.clock() - t < 30 do end' & ours=$!
/usr/bin/luajit -e 'local t = os.clock() while os.clock() - t < 30 do end' & plain=$!
sleep 30 & other=$!
# A C host with no VM yet, then three.
mkfifo "$TMP/host.in"
"$NUPP_TEST_BIN/prog_late_vm" 3 <"$TMP/host.in" >"$TMP/host.out" & host=$!
exec 7>"$TMP/host.in"
for _ in $(seq 100); do grep -q ready "$TMP/host.out" && break; sleep 0.05; done
trap 'kill $ours $plain $other $host 2>/dev/null; rm -rf "$TMP"' EXIT
sleep 0.3

doctor 0 --quick -p "$ours"
line ok process "PID $ours (luajit) runs"
line ok LuaJIT "luajit"
line ok "nupp-bpf build" "our build of luajit (LuaJIT 2.1): layout v"
line ok "USDT probes" "all 11 luajit:* probes"
line ok GC64 "GC64 with two-slot frames"
line ok "Lua VMs" "1 VM open (g = 0x"
line ok binary "is the file PID $ours started with"
line skip "record's programs" "quick"
assert_eq "$(tail -1 "$TMP/out")" "doctor: record -p would work"

doctor 1 --quick -p "$host"
line FAIL "Lua VMs" "no Lua VM open yet in PID $host"
line FAIL "Lua VMs" "fix: attach once the program has created its lua_State"
line ok "nupp-bpf build" "libluajit-5.1.so"
assert_contains "$TMP/out" "doctor: record -p would fail: Lua VMs"
echo go >&7
for _ in $(seq 100); do grep -q "open 3" "$TMP/host.out" && break; sleep 0.05; done
doctor 0 --quick -p "$host"
line ok "Lua VMs" "3 VMs open"

doctor 1 --quick -p "$plain"
line ok LuaJIT "/usr/bin/luajit"
line FAIL "nupp-bpf build" "no nupp-bpf probes and layout"
line FAIL "nupp-bpf build" "fix: run the program with our build"
line skip GC64 "not our LuaJIT build"

doctor 1 --quick -p "$other"
line FAIL LuaJIT "is not running LuaJIT"

doctor 1 --quick -p 4194303
line FAIL process "no such process: PID 4194303"

# Unprivileged, on a root-owned target: the process cannot be inspected.
AS="setpriv --reuid=nobody --regid=nogroup --clear-groups"
doctor 1 --quick -p "$ours"
line FAIL process "cannot be inspected"
line skip LuaJIT "cannot be inspected"
AS=

# A binary replaced while its process runs (as a rebuild does: a new file renamed over
# it), and one modified in place: doctor refuses both; record -p fails and points here.
cp "$(readlink -f "$NUPP_LUAJIT")" "$TMP/lj"
"$TMP/lj" -e 'local t = os.clock() while os.clock() - t < 30 do end' & repl=$!
trap 'kill $ours $plain $other $host $repl 2>/dev/null; rm -rf "$TMP"' EXIT
sleep 0.3
doctor 0 --quick -p "$repl"
cp "$TMP/lj" "$TMP/lj.new" && mv "$TMP/lj.new" "$TMP/lj"
doctor 1 --quick -p "$repl"
line FAIL binary "$TMP/lj was deleted or replaced after PID $repl started"
line FAIL binary "fix: restart the process"
st=0; "$NUPP_BPF" record -q -d 1 -p "$repl" -o "$TMP/r.json" 2>"$TMP/rec.err" || st=$?
assert_eq "$st" 1 "record -p on a replaced binary"
assert_contains "$TMP/rec.err" "nupp-bpf doctor"
kill "$repl"; wait "$repl" 2>/dev/null || true
"$TMP/lj" -e 'local t = os.clock() while os.clock() - t < 30 do end' & repl=$!
sleep 0.3
touch -d '+10 seconds' "$TMP/lj"
doctor 1 --quick -p "$repl"
line FAIL binary "was modified"

exec 7>&-
echo "PASS: doctor"
