#!/usr/bin/env bash
# The helper process of an in-app session (nupp.profile, bpf backend): it is not the
# app's child (forked twice) and leads its own session (setsid), runs with the app's uid,
# holds no socket another user could connect to (an anonymous socket pair only),
# and lives no longer than the app, even when a child the app forked holds the session's
# socket open (tests/data/cli/helper_fork.lua). Its BPF links and programs go with it.
. "$(dirname "$0")/../support/lib.sh"
need_root
APP="$NUPP_TEST_DATA/cli/helper_fork.lua"

# The session's helper: the luajit process that leads its own session (pid == sid) and
# was not there before ($1: the pids before). Only it does: the app and its child are in
# this script's session.
helper_of() {
  ps -eo pid=,sid=,comm= | awk -v before=" $1 " '$3 == "luajit" && $1 == $2 && index(before, " " $1 " ") == 0 { print $1 }'
}

# 1. The app stops its session and exits; its forked child lives on: the profile has the
# app's samples, and the helper is gone with the session.
before=" $(pgrep -d ' ' -x luajit || true) "
"$NUPP_LUAJIT" "$APP" stop >"$TMP/stop.out" 2>"$TMP/stop.err" || { cat "$TMP/stop.err"; fail "helper_fork.lua stop: status $?"; }
read -r _ app _ child <"$TMP/stop.out"
n=$(sed -n 's/^samples //p' "$TMP/stop.out")
[ -n "$n" ] && [ "$n" -ge 1 ] || { cat "$TMP/stop.out" "$TMP/stop.err"; fail "the stopped session has no samples"; }
kill -0 "$child" || fail "the app's child $child is not running"
for i in $(seq 50); do [ -z "$(helper_of "$before")" ] && break; sleep 0.1; done
h=$(helper_of "$before")
[ -z "$h" ] || fail "the session's helper $h outlived s:stop()"
kill "$child"

# 2. The app exits without stopping its session while its child holds the socket open.
# While the app runs, the helper is there, not its child, with its uid; after the app's
# exit the helper follows within 5 s, though the socket is still open in the child. The
# child also holds the app's copies of the BPF links (a fork copies every descriptor): they
# are released when it exits.
before=" $(pgrep -d ' ' -x luajit || true) "
"$NUPP_LUAJIT" "$APP" exit >"$TMP/exit.out" 2>"$TMP/exit.err" & app=$!
for i in $(seq 100); do h=$(helper_of "$before"); [ -n "$h" ] && break; sleep 0.05; done
[ -n "$h" ] || { cat "$TMP/exit.err"; fail "no session helper while the app ran"; }
read -r ppid uid < <(ps -o ppid=,uid= -p "$h")
[ "$ppid" != "$app" ] || fail "the helper $h is the app's child"
assert_eq "$uid" "$(ps -o uid= -p "$app" | tr -d ' ')" "the helper's uid"
# Nothing another local user could open to drive it: no listening socket, no named one.
ss -xap | grep -F "pid=$h," >"$TMP/socks" || fail "the helper $h holds no socket"
awk '$2 == "LISTEN" || ($5 != "*" && $5 != "") { bad = 1 } END { exit bad }' "$TMP/socks" ||
  { cat "$TMP/socks"; fail "the helper $h listens or holds a named socket"; }
ss -ltnup | grep -qF "pid=$h," && fail "the helper $h holds an internet socket"
held_bpf "$h" >"$TMP/held"
[ -s "$TMP/held" ] || fail "the helper $h holds no BPF link or program"
wait "$app" || { cat "$TMP/exit.err"; fail "helper_fork.lua exit: status $?"; }
read -r _ _ _ child <"$TMP/exit.out"
kill -0 "$child" || fail "the app's child $child is not running"
ls -l /proc/"$child"/fd | grep -q socket || fail "the app's child $child holds no socket"
for i in $(seq 50); do kill -0 "$h" 2>/dev/null || break; sleep 0.1; done
kill -0 "$h" 2>/dev/null && { kill "$child"; fail "the helper $h outlived its app by 5 s (its child holds the socket)"; }
kill "$child"
wait_released "$TMP/held"
echo "ok: the session helper is no child of the app, has its uid, and ends with it"
