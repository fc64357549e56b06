#!/usr/bin/env bash
# nupp-bpf record refuses bad input and impossible targets with the cause and the
# remedy, and a non-zero status, never a crash.
. "$(dirname "$0")/../support/lib.sh"
need_root

# Runs record with the given arguments; checks status and a message on stderr.
expect_error() {
  local want_status=$1 msg=$2; shift 2
  local st=0
  "$NUPP_BPF" record "$@" >"$TMP/out" 2>"$TMP/err" || st=$?
  [ "$st" = "$want_status" ] || { cat "$TMP/err"; fail "record $*: status $st, want $want_status"; }
  assert_contains "$TMP/err" "$msg"
}

expect_error 2 "invalid PID 'abc'" -p abc
expect_error 2 "invalid frequency '0'" -F 0 -p 1
expect_error 2 "invalid duration 'x'" -d x -p 1
expect_error 2 "invalid depth '500': expected 1..256 frames" --depth 500 -p 1
expect_error 2 "unknown output format for 'out.xyz'" -o out.xyz -p 1
expect_error 2 "nothing to record" -o x.json
expect_error 2 "give either -p PID or -- COMMAND" -p 1 -- true
expect_error 1 "no such process" -p 4194303
# Unwritable outputs are refused before anything is recorded.
expect_error 1 "cannot write /nonexistent/dir/p.json: the folder /nonexistent/dir does not exist" \
  -o /nonexistent/dir/p.json -p 4194303
expect_error 1 "cannot write /nonexistent/a.csv" --aborts /nonexistent/a.csv -p 4194303
sleep 30 & sleeper=$!
expect_error 1 "is not running LuaJIT" -p "$sleeper"
kill "$sleeper"
expect_error 1 "command not found" -- /nonexistent/luajit x.lua

# LuaJIT without our probes and layout: Debian's own luajit package (bootstrap installs it).
if [ -x /usr/bin/luajit ]; then
  expect_error 1 "without nupp-bpf's probes and layout" -- /usr/bin/luajit -e 'print(1)'
  /usr/bin/luajit -e 'local t=os.clock() while os.clock()-t<20 do end' & plain=$!
  sleep 0.3
  expect_error 1 "has no nupp-bpf probes and layout" -p "$plain"
  assert_contains "$TMP/err" "/bin/luajit"
  kill "$plain"
else
  fail "/usr/bin/luajit (Debian's unpatched LuaJIT) is missing: run scripts/bootstrap"
fi

# Missing capabilities, named: run as an unprivileged user.
if command -v setpriv >/dev/null; then
  st=0
  setpriv --reuid=65534 --regid=65534 --clear-groups "$NUPP_BPF" record -d 1 -- "$NUPP_LUAJIT" -e '' \
    >"$TMP/out" 2>"$TMP/err" || st=$?
  assert_eq "$st" 1 "status without privileges"
  for cap in CAP_BPF CAP_PERFMON CAP_SYS_ADMIN CAP_SYS_PTRACE; do
    assert_contains "$TMP/err" "$cap ("
  done
  assert_contains "$TMP/err" "run as root (sudo)"
fi
echo "PASS: record errors"
