#!/usr/bin/env bash
# record's outputs are never lost: names that are not UTF-8, -o - with a command that
# writes to stdout, a full disk, an output that is a folder (or in a missing or
# read-only folder), a closed pipe, a second Ctrl-C; and the status line on a terminal.
# Each case checks the exact files left and the exit status.
. "$(dirname "$0")/../support/lib.sh"
need_root

DATA="$NUPP_SOURCE_DIR/tests/data/report"
MOUNTS=()
cleanup() {
  local m
  for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

# Asserts that a file is a complete nupp profile (valid JSON with its samples).
assert_profile() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["meta"]["samples"] == sum(r["count"] for r in d["samples"])' \
    "$1" || fail "$1 is not a complete nupp profile"
}

# Waits (up to 60 s) until file contains text.
wait_for() {
  local i
  for i in $(seq 600); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  cat "$1" >&2
  fail "timed out waiting for [$2] in $1"
}

# 1. Names that are not UTF-8: every output is written, the JSON is valid.
st=0
"$NUPP_BPF" record -F 499 -o "$TMP/n.json" -o "$TMP/n.folded" --aborts "$TMP/n.csv" -- \
  "$NUPP_LUAJIT" "$DATA/names.lua" 1 2>"$TMP/err" || st=$?
assert_eq "$st" 0 "status with non-UTF-8 names"
assert_profile "$TMP/n.json"
grep -qa $'caf\xe9.lua' "$TMP/n.folded" || fail "n.folded lacks the raw chunk name"
head -1 "$TMP/n.csv" | grep -q '^severity,count,reason,location,zonePath' || fail "n.csv was not written"

# 2. -o - with a command that prints lines ending in numbers: stdout holds only the
# stacks (each line a stack of the profile written beside it), the command's lines go
# to stderr.
st=0
"$NUPP_BPF" record -F 499 -o - -o "$TMP/c.json" -- "$NUPP_LUAJIT" "$DATA/chatty.lua" 1 >"$TMP/c.out" 2>"$TMP/c.err" || st=$?
assert_eq "$st" 0 "status of -o - with a chatty command"
grep -q '^progress ' "$TMP/c.err" || fail "the command's stdout did not reach stderr"
! grep -q 'progress' "$TMP/c.out" || fail "the command's stdout got into the profile"
"$NUPP_BPF" report "$TMP/c.json" -f collapsed >"$TMP/c.want"
cmp "$TMP/c.out" "$TMP/c.want" || fail "stdout is not exactly the collapsed profile"

# 3. A full disk: that output fails with the cause and leaves nothing (an old file
# there stays whole), the other output and the summary are still written, status 1.
mkdir -p "$TMP/full"
mount -t tmpfs -o size=12k tmpfs "$TMP/full"
MOUNTS+=("$TMP/full")
printf 'old flame graph\n' >"$TMP/full/p.svg"
dd if=/dev/zero of="$TMP/full/filler" bs=1k count=64 2>/dev/null || true
st=0
"$NUPP_BPF" record -F 499 -o "$TMP/full/p.svg" -o "$TMP/ok.json" -- "$NUPP_LUAJIT" "$DATA/states.lua" 1 2>"$TMP/err" || st=$?
assert_eq "$st" 1 "status with a full disk"
assert_contains "$TMP/err" "cannot write $TMP/full/p.svg: No space left on device"
assert_contains "$TMP/err" "wrote $TMP/ok.json; FAILED to write $TMP/full/p.svg"
assert_eq "$(cat "$TMP/full/p.svg")" "old flame graph" "the old file on the full disk"
assert_eq "$(ls -A "$TMP/full" | tr '\n' ' ')" "filler p.svg " "files left on the full disk"
assert_profile "$TMP/ok.json"

# 4. Paths checked before recording starts: a folder, a missing folder, a read-only
# one. The command never runs (it would create a marker).
mkdir -p "$TMP/dir.json" "$TMP/ro"
mount -t tmpfs -o ro,size=16k tmpfs "$TMP/ro"
MOUNTS+=("$TMP/ro")
for bad in "$TMP/dir.json" "$TMP/missing/p.json" "$TMP/ro/p.json"; do
  st=0
  "$NUPP_BPF" record -o "$TMP/fine.json" -o "$bad" -- "$NUPP_LUAJIT" -e "io.open('$TMP/ran', 'w')" 2>"$TMP/err" || st=$?
  assert_eq "$st" 1 "status for output $bad"
  [ ! -e "$TMP/ran" ] || fail "the command ran although $bad cannot be written"
  [ ! -e "$TMP/fine.json" ] || fail "an output was written although $bad cannot be"
done
"$NUPP_BPF" record -o "$TMP/dir.json" -- true 2>"$TMP/err" || true
assert_contains "$TMP/err" "cannot write $TMP/dir.json: it is a folder"
"$NUPP_BPF" record -o "$TMP/missing/p.json" -- true 2>"$TMP/err" || true
assert_contains "$TMP/err" "the folder $TMP/missing does not exist"
"$NUPP_BPF" record -o "$TMP/ro/p.json" -- true 2>"$TMP/err" || true
assert_contains "$TMP/err" "Read-only file system"

# 5. A closed pipe: stdout's output ends with a message, the file is written, status 1,
# no death by SIGPIPE.
set +o pipefail
"$NUPP_BPF" record -F 499 -o - -o "$TMP/p.json" -- "$NUPP_LUAJIT" "$DATA/states.lua" 1 2>"$TMP/err" | true
st=${PIPESTATUS[0]}
set -o pipefail
assert_eq "$st" 1 "status with a closed pipe"
assert_contains "$TMP/err" "cannot write stdout: the reading end of the pipe was closed"
assert_contains "$TMP/err" "wrote $TMP/p.json; FAILED to write stdout"
assert_profile "$TMP/p.json"

# 6. A second Ctrl-C once the outputs are written: says so, exits 0, and the command
# (which a first SIGINT does not stop: a compiled loop) is stopped too.
"$NUPP_BPF" record -F 499 -o "$TMP/i.json" -- "$NUPP_LUAJIT" "$DATA/spin.lua" 2>"$TMP/i.err" &
rec=$!
wait_for "$TMP/i.err" "recording command"
child=$(sed -n 's/.*recording command, PID \([0-9]*\) .*/\1/p' "$TMP/i.err")
sleep 1
kill -INT "$rec"
wait_for "$TMP/i.err" "waiting for"
assert_profile "$TMP/i.json"
kill -0 "$child" 2>/dev/null || fail "the command stopped on the first SIGINT: this case tests nothing"
kill -INT "$rec"
st=0; wait "$rec" || st=$?
assert_eq "$st" 0 "status after a second Ctrl-C"
assert_contains "$TMP/i.err" "interrupted again: the outputs were already written"
for i in $(seq 100); do kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$child" 2>/dev/null || fail "the command still runs after the second Ctrl-C"

# 7. The status line: on a terminal (script(1) gives one), not with --quiet, not when
# stderr is a file.
script -qfec "$NUPP_BPF record -F 499 -o $TMP/t.json -- $NUPP_LUAJIT $DATA/states.lua 2.5" "$TMP/tty.log" >/dev/null
grep -qa $'\r\e\\[Knupp-bpf: [0-9]* s, [0-9]* samples, [0-9]* lost, [0-9]* trace aborts' "$TMP/tty.log" ||
  { cat -v "$TMP/tty.log"; fail "no status line on a terminal"; }
script -qfec "$NUPP_BPF record -q -F 499 -o $TMP/t.json -- $NUPP_LUAJIT $DATA/states.lua 2.5" "$TMP/tty.log" >/dev/null
! grep -qa 'samples' "$TMP/tty.log" || { cat -v "$TMP/tty.log"; fail "a status line with --quiet"; }
"$NUPP_BPF" record -F 499 -o "$TMP/t.json" -- "$NUPP_LUAJIT" "$DATA/states.lua" 2.5 2>"$TMP/err"
! grep -qa $'\e\\[K' "$TMP/err" || fail "a status line when stderr is not a terminal"
echo "PASS: record outputs"
