#!/usr/bin/env bash
# record --subprocesses counts the trace aborts of a child that lives ~0.1 s and aborts
# in its first milliseconds, before userspace could attach probes to it: the abort probes
# are attached once for every process of the binary, and the kernel's map of followed
# processes (filled at fork) decides what counts. The abort table equals LuaJIT's own
# (the jit.attach oracle in each child, tests/data/trace/oracle.lua), summed over the
# children; the parent (JIT off) aborts nothing, nor counts an unrelated process of the
# same binary aborting all along; without --subprocesses the children's aborts are not
# counted.
. "$(dirname "$0")/../support/lib.sh"
need_root

D="$NUPP_TEST_DATA/trace"
cat >"$TMP/parent.lua" <<'LUA'
jit.off() -- the parent aborts nothing: every abort in the profile is a child's
local lj, oracle, child, out = arg[1], arg[2], arg[3], arg[4]
for i = 1, 3 do
  assert(os.execute(("%q %q %q %q"):format(lj, oracle, out .. "-" .. i, child)) == 0)
end
LUA

# Another process of the same binary, not followed, aborts thousands of times meanwhile:
# the probes fire there too, and the filter leaves it out.
"$NUPP_LUAJIT" "$NUPP_SOURCE_DIR/tests/bench/abort_loop.lua" 1000000 >/dev/null &
other=$!
"$NUPP_BPF" record -q -F 49 --subprocesses -o "$TMP/sub.json" --aborts "$TMP/sub.csv" -- \
  "$NUPP_LUAJIT" "$TMP/parent.lua" "$NUPP_LUAJIT" "$D/oracle.lua" "$D/short_child.lua" "$TMP/o" 2>"$TMP/err" ||
  { kill $other; cat "$TMP/err"; fail "record --subprocesses"; }
kill $other; wait $other 2>/dev/null || true
python3 - "$TMP/sub.json" "$TMP/sub.csv" "$TMP/o" <<'PY'
import csv, json, sys
doc = json.load(open(sys.argv[1]))
got = list(csv.DictReader(open(sys.argv[2], newline="")))
want, total, bl = {}, 0, 0
for i in (1, 2, 3):
    for r in csv.DictReader(open("%s-%d.default.csv" % (sys.argv[3], i), newline="")):
        k = (r["severity"], r["reason"], r["location"], r["zonePath"])
        want[k] = want.get(k, 0) + int(r["count"])
    meta = dict(l.split() for l in open("%s-%d.meta" % (sys.argv[3], i)) if l.strip())
    total += int(meta["total_default"])
    bl += int(meta["blacklisted"])
have = {(r["severity"], r["reason"], r["location"], r["zonePath"]): int(r["count"]) for r in got}
print("children's aborts (oracle):", total, "blacklisted", bl, "rows", want)
print("profile:", doc["meta"]["totalAborts"], "blacklisted", doc["meta"]["blacklisted"], "pids", doc["meta"]["pids"])
assert total > 0, "the children did not abort"
assert have == want, (have, want)
assert doc["meta"]["totalAborts"] == total and doc["meta"]["blacklisted"] == bl, doc["meta"]
assert len(doc["meta"]["pids"]) >= 4, doc["meta"]["pids"]
PY

# Without --subprocesses: the children are only named, their aborts are not counted.
"$NUPP_BPF" record -q -F 49 -o "$TMP/nosub.json" -- \
  "$NUPP_LUAJIT" "$TMP/parent.lua" "$NUPP_LUAJIT" "$D/oracle.lua" "$D/short_child.lua" "$TMP/n" 2>"$TMP/err2" ||
  { cat "$TMP/err2"; fail "record without --subprocesses"; }
python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["meta"]; assert m["totalAborts"] == 0, m' "$TMP/nosub.json"
echo "PASS: record --subprocesses counts a short-lived child's aborts"
