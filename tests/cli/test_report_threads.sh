#!/usr/bin/env bash
# One speedscope profile per thread: a C host whose two threads take turns running Lua
# on one VM (tests/support/prog_host_threads.c handoff: thread A runs work_a, B work_b,
# each spins in C between turns) is recorded; rows carry their thread; the speedscope
# file, imported by the real speedscope app, has one profile per thread whose samples
# match that thread's own CLOCK_THREAD_CPUTIME_ID (within 5 %) and is named by the
# thread's name; collapsed output stays
# merged over threads.
. "$(dirname "$0")/../support/lib.sh"
need_root

FORMAT="$NUPP_SOURCE_DIR/tests/format"
export NUPP_NODE_MODULES="$NUPP_BINARY_DIR/node/node_modules"
for need in /usr/bin/chromium "$NUPP_NODE_MODULES/playwright-core" "$NUPP_NODE_MODULES/speedscope"; do
  [ -e "$need" ] || fail "$need is missing: run scripts/bootstrap (it installs chromium and scripts/npm-deps)"
done
HZ=499

NUPP_DONE_FD=3 "$NUPP_BPF" record -q -F $HZ -o "$TMP/th.json" -o "$TMP/th.speedscope.json" -o "$TMP/th.folded" \
  -- "$NUPP_TEST_BIN/prog_host_threads" handoff 1 3>"$TMP/cpu" 2>"$TMP/rec.err" ||
  { cat "$TMP/rec.err"; fail "record prog_host_threads handoff"; }
read -r lua_a lua_b c_a c_b <"$TMP/cpu" || fail "prog_host_threads printed no CPU times"

# The rows of each thread: work_a only on one thread, work_b only on another.
python3 - "$TMP/th.json" >"$TMP/tids" <<'P' || fail "rows by thread"
import json, sys
d = json.load(open(sys.argv[1]))
tids = {}
for r in d["samples"]:
    for fn in ("work_a", "work_b"):
        if ":" + fn + ";" in r["stack"] + ";":
            tids.setdefault(fn, set()).add(r["tid"])
assert set(tids) == {"work_a", "work_b"}, "work_a and work_b not both sampled: %s" % tids
assert len(tids["work_a"]) == 1 and len(tids["work_b"]) == 1, "a function on several threads: %s" % tids
a, b = tids["work_a"].pop(), tids["work_b"].pop()
assert a and b and a != b, "thread ids %s %s" % (a, b)
assert all(r["pid"] == d["meta"]["pids"][0] for r in d["samples"]), "a row of another process"
print(d["meta"]["pids"][0], a, b)
P
read -r pid tid_a tid_b <"$TMP/tids"

node "$FORMAT/check_speedscope.mjs" "$TMP/th.json" "$TMP/th.speedscope.json" "$TMP" >"$TMP/ss.out" ||
  { cat "$TMP/ss.out"; fail "speedscope import"; }
cat "$TMP/ss.out"
# Each thread's profile, as speedscope imported it, against the thread's CPU time.
# Profiles are named by the thread's name (pthread_setname_np: lua_a, lua_b).
for t in "a $tid_a $lua_a $c_a" "b $tid_b $lua_b $c_b"; do
  set -- $t
  n=$(sed -n "s/^profile PID $pid thread $2 (lua_$1): .*: \([0-9]*\) samples\$/\1/p" "$TMP/ss.out")
  [ -n "$n" ] || fail "no speedscope profile named PID $pid thread $2 (lua_$1)"
  python3 -c 'import sys; n, cpu, hz = int(sys.argv[1]), float(sys.argv[2]) + float(sys.argv[3]), int(sys.argv[4])
want = cpu * hz
print("thread %s: %d samples for %.3f s of CPU (%.0f): %+.1f %%" % (sys.argv[5], n, cpu, want, 100 * (n - want) / want))
sys.exit(0 if 0.95 * want <= n <= 1.05 * want else 1)' "$n" "$3" "$4" $HZ "$1" ||
    fail "thread $1's speedscope profile does not match its CPU time"
done
# Collapsed output: one line per stack, whatever thread ran it.
[ "$(cut -d' ' -f1 "$TMP/th.folded" | sort | uniq -d | wc -l)" = 0 ] || fail "a stack twice in th.folded"
echo "PASS: one speedscope profile per thread"
