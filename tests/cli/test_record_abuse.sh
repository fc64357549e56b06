#!/usr/bin/env bash
# record under abuse: two records on one PID at once (each a whole profile), the target
# stopped (SIGSTOP) for 5 s (not sampled while stopped, the profile written), a -p target
# that exits while record attaches (a profile or a clear error, never a hang), kill -9 of
# record (every BPF link and program released; the -- CMD child gets SIGTERM), a command
# that forks 100 children, with and without --subprocesses.
. "$(dirname "$0")/../support/lib.sh"
need_root

BUSY='local t = os.clock() while os.clock() - t < (tonumber(arg[1]) or 30) do local s = 0 for i = 1, 1000 do s = s + i end end'
echo "$BUSY" >"$TMP/busy.lua"
samples() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); m=d["meta"]; assert m["samples"] == sum(r["count"] for r in d["samples"]); print(m["samples"])' "$1"; }

"$NUPP_LUAJIT" "$TMP/busy.lua" 60 & target=$!
trap 'kill "$target" 2>/dev/null; rm -rf "$TMP"' EXIT
wait_luajit "$target"

# 1. Two records of one PID at once: both complete, each with its own samples of the
# same seconds (3 s at 199 Hz of a busy thread: within a fifth of 597).
"$NUPP_BPF" record -q -F 199 -d 3 -o "$TMP/a.json" -p "$target" 2>"$TMP/ea" & a=$!
"$NUPP_BPF" record -q -F 199 -d 3 -o "$TMP/b.json" -p "$target" 2>"$TMP/eb" & b=$!
st=0; wait "$a" || st=$?; assert_eq "$st" 0 "first of two records"
st=0; wait "$b" || st=$?; assert_eq "$st" 0 "second of two records"
for f in a b; do
  n=$(samples "$TMP/$f.json")
  [ "$n" -ge 478 ] && [ "$n" -le 716 ] || fail "$f.json: $n samples, expected about 597"
done

# 2. The target stopped for 5 s of a 7 s record: about 2 s of samples, exit 0, none lost
# to the stop (its memory stays readable, its VM known, the maps drained). This loop loses
# about 1 in 5000 samples as badFrame or symbolize whether stopped or not (a sample in the
# VM's transition around os.clock): at most 2 of these ~400 are allowed for that.
"$NUPP_BPF" record -F 199 -d 7 -o "$TMP/s.json" -p "$target" 2>"$TMP/es" & rec=$!
wait_recording "$TMP/es"
kill -STOP "$target"; sleep 5; kill -CONT "$target"
st=0; wait "$rec" || st=$?
assert_eq "$st" 0 "record of a target stopped for 5 s"
n=$(samples "$TMP/s.json")
[ "$n" -ge 150 ] && [ "$n" -le 700 ] || fail "s.json: $n samples for about 1.5-2.5 s running"
python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["meta"]["lost"]; assert l["noVm"] + l["readFault"] + l["truncated"] + l["mapFull"] == 0 and l["badFrame"] + l["symbolize"] <= 2, l' "$TMP/s.json" ||
  fail "samples lost around SIGSTOP"

# 3. A -p target that exits while record attaches: record ends by itself (no hang), with a
# written profile (exit 0) or the reason it found no process (exit 1).
"$NUPP_LUAJIT" -e 'local t = os.clock() while os.clock() - t < 0.3 do end' & short=$!
sleep 0.1
st=0
timeout 60 "$NUPP_BPF" record -q -F 199 -o "$TMP/q.json" -p "$short" 2>"$TMP/eq" || st=$?
case $st in
  0) samples "$TMP/q.json" >/dev/null ;;
  1) grep -qiE 'no such process|exited|not running|no LuaJIT' "$TMP/eq" || { cat "$TMP/eq"; fail "exit 1 without the reason"; } ;;
  *) cat "$TMP/eq"; fail "record -p of an exiting process: status $st" ;;
esac

# 4. kill -9 of record: its closer releases every BPF link and program it held, and the
# -- CMD child is sent SIGTERM rather than left running unprofiled.
"$NUPP_BPF" record -F 199 -o "$TMP/k.json" -- "$NUPP_LUAJIT" "$TMP/busy.lua" 60 2>"$TMP/ek" & rec=$!
wait_recording "$TMP/ek"
child=$(pgrep -P "$rec" -f busy.lua | head -1)
[ -n "$child" ] || fail "no -- CMD child under record $rec"
held_bpf "$rec" >"$TMP/held"
[ -s "$TMP/held" ] || fail "record $rec holds no BPF link or program"
kill -9 "$rec"
wait "$rec" 2>/dev/null || true
wait_released "$TMP/held"
for i in $(seq 100); do kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
kill -0 "$child" 2>/dev/null && { kill "$child"; fail "the -- CMD child kept running after kill -9 of record"; }

# 5. A command that forks 100 children without exec (tests/data/cli/forks.lua: 4 alive at
# once, 0.1 s of CPU each in child_work; the parent 0.5 s in parent_work), each writing
# its PID and CPU seconds. With --subprocesses every child is profiled under its own PID
# from its fork, as its own clock says; without, only the parent is, and the 100
# children are said to be not followed.
forks() { # $1: profile, $2: the program's stdout, $3: "follow" or "alone"
  python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m, follow = d["meta"], sys.argv[3] == "follow"
procs = {}
for line in open(sys.argv[2]):
    kind, pid, secs = line.split()
    procs[int(pid)] = (kind, float(secs))
parent = [p for p, (k, _) in procs.items() if k == "parent"]
children = {p: s for p, (k, s) in procs.items() if k == "child"}
assert len(parent) == 1 and len(children) == 100, f"{len(parent)} parent, {len(children)} children"
parent = parent[0]
want = {parent} | (set(children) if follow else set())
assert set(m["pids"]) == want, f"meta.pids: {len(m['pids'])} pids, want {len(want)}"
got = {p: 0 for p in want}
for r in d["samples"]:
    fr = r["stack"].split(";")
    assert r["pid"] in want, f"a row of PID {r['pid']}, not profiled"
    if "forks.lua:child_work" in fr:
        assert r["pid"] in children, f"child_work under PID {r['pid']}: {r['stack']}"
        got[r["pid"]] += r["count"]
    if "forks.lua:parent_work" in fr:
        assert r["pid"] == parent, f"parent_work under child PID {r['pid']}"
        got[parent] += r["count"]
hz = m["frequencyHz"]
ptruth = procs[parent][1] * hz
assert abs(got[parent] - ptruth) <= 0.15 * ptruth, f"parent_work: {got[parent]} samples, its clock says {ptruth:.0f}"
named = sum(got[p] for p in children if p in got)
truth = sum(children.values()) * hz
lost = m["lost"]["symbolize"] + m["lost"]["readFault"] + m["lost"]["badFrame"]
if follow:
    # Named, or counted as lost (a child gone before its last samples were named).
    assert named >= 0.8 * truth, f"child_work: {named} samples named, the children's clocks say {truth:.0f}"
    assert 0.85 * truth <= named + lost <= 1.1 * truth, f"children: {named} named + {lost} lost, clocks {truth:.0f}"
    # A child's rows are named from its memory at a drain while it runs; one that lived
    # between two drains (the machine busy) has its samples counted lost, not named.
    withs = sum(1 for p in children if got[p] > 0)
    assert withs >= 75, f"only {withs} of 100 children with a child_work sample named"
print(f"{'follow' if follow else 'alone'}: parent {got[parent]} samples ({ptruth:.0f} by its clock), "
      f"{sum(1 for p in children if got.get(p))} children named, "
      f"children {named} named + {lost} lost ({truth:.0f} by their clocks), {len(m['pids'])} pids")
PY
}
"$NUPP_BPF" record --subprocesses -F 997 -o "$TMP/f.json" -- "$NUPP_LUAJIT" "$NUPP_TEST_DATA/cli/forks.lua" \
  100 4 0.1 >"$TMP/f.out" 2>"$TMP/ef" || { cat "$TMP/ef"; fail "record --subprocesses of 100 forks: status $?"; }
forks "$TMP/f.json" "$TMP/f.out" follow || { cat "$TMP/ef"; fail "100 forks, --subprocesses"; }
grep -q "not profiled\|not followed" "$TMP/ef" && { cat "$TMP/ef"; fail "a child said not profiled under --subprocesses"; }
"$NUPP_BPF" record -F 997 -o "$TMP/g.json" -- "$NUPP_LUAJIT" "$NUPP_TEST_DATA/cli/forks.lua" \
  100 4 0.1 >"$TMP/g.out" 2>"$TMP/eg" || { cat "$TMP/eg"; fail "record of 100 forks: status $?"; }
forks "$TMP/g.json" "$TMP/g.out" alone || { cat "$TMP/eg"; fail "100 forks, without --subprocesses"; }
assert_contains "$TMP/eg" "warning: 100 forked child processes ran the Lua VM of their parent and were not followed (--subprocesses follows them)"

echo "ok: two records, SIGSTOP, exit during attach, kill -9, 100 forks with and without --subprocesses"
