# Shared helpers for nupp-bpf's shell tests. Source it: . "$(dirname "$0")/../support/lib.sh"
set -euo pipefail

: "${NUPP_BPF:?run this test through ctest (NUPP_BPF unset)}"
: "${NUPP_LUAJIT:?run this test through ctest (NUPP_LUAJIT unset)}"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/nupp-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

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
