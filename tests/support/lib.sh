# Shared helpers for nupp-bpf's shell tests. Source it: . "$(dirname "$0")/../support/lib.sh"
set -euo pipefail

: "${NUPP_BPF:?run this test through ctest (NUPP_BPF unset)}"
: "${NUPP_LUAJIT:?run this test through ctest (NUPP_LUAJIT unset)}"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/nupp-test.XXXXXX")
# Background processes a test adds to PIDS are killed at exit, whatever ends the test.
PIDS=()
nupp_cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap nupp_cleanup EXIT

# Exits 77 (CTest skip) with the reason unless running as root with BTF.
need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root (CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE) to load BPF programs"
    exit 77
  fi
  [ -e /sys/kernel/btf/vmlinux ] || { echo "SKIP: kernel has no BTF"; exit 77; }
}

# Fails the test with a message.
fail() { echo "FAIL: $*" >&2; exit 1; }

# Asserts two strings are equal.
assert_eq() { [ "$1" = "$2" ] || fail "${3:-values differ}: expected [$2], got [$1]"; }

# Asserts that a file contains a fixed string.
assert_contains() { grep -qF -- "$2" "$1" || { cat "$1" >&2; fail "$1 does not contain [$2]"; }; }

# Waits until record (stderr in $1) says it is recording: BPF loading takes seconds on a
# busy machine, and a signal must reach it after the attach.
wait_recording() {
  local i
  for i in $(seq 600); do
    grep -q "recording" "$1" 2>/dev/null && { sleep 0.5; return 0; }
    sleep 0.1
  done
  cat "$1" >&2; fail "record did not start within 60 s"
}

# Waits until the background target $1 has exec'ed our LuaJIT (bash forks first: a
# record -p started before the exec finds no LuaJIT in the process, and says so).
wait_luajit() {
  local i
  for i in $(seq 300); do
    grep -q 'luajit' "/proc/$1/maps" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "target $1 did not start LuaJIT within 30 s"
}

# The ids of the BPF links, programs and maps process $1 holds (its fdinfo).
held_bpf() { grep -hE '^(link_id|prog_id|map_id):' /proc/"$1"/fdinfo/* 2>/dev/null | awk '{print $1, $2}' | sort -u; }

# Waits until none of the BPF links, programs and maps listed in file $1 exists any more:
# they are released after record exits (by its closer process), never left attached.
wait_released() {
  local i left
  for i in $(seq 200); do
    left=$( { bpftool -j link show; echo; bpftool -j prog show; echo; bpftool -j map show; } | python3 -c '
import json, sys
want = set(l.strip() for l in open(sys.argv[1]) if l.strip())
docs = [json.loads(d) for d in sys.stdin.read().split("\n") if d.strip()]
alive = {"%s_id: %d" % (kind, x["id"]) for kind, doc in zip(("link", "prog", "map"), docs) for x in doc or []}
print(" ".join(sorted(want & alive)))' "$1")
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  fail "still in the kernel 20 s after its holder exited: $left"
}
