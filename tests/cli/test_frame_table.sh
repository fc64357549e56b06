#!/usr/bin/env bash
# The frame table (meta.frames: where each named Lua function is defined) from record,
# through report and diff, as real consumers read it: go tool pprof and pprof-format
# see every Lua function's start line; the flame graph in Chromium marks a trace abort
# only on the function whose lines hold it. Truth by construction: tests/data/report/
# frames.lua has aborts() on lines 5-11 (its loop aborts on line 8) and clean() on
# lines 13-19 (arithmetic that compiles); the main chunk's lines come from LuaJIT's own
# debug.getinfo. A profile written before the table still reads (start lines 0, marks
# by file as before). A handmade profile covers nested functions and a name that
# stands for two functions.
. "$(dirname "$0")/../support/lib.sh"
need_root

FORMAT="$NUPP_SOURCE_DIR/tests/format"
W="$NUPP_SOURCE_DIR/tests/data/report/frames.lua"
export NUPP_NODE_MODULES="$NUPP_BINARY_DIR/node/node_modules"
for need in /usr/bin/chromium "$NUPP_NODE_MODULES/playwright-core" "$NUPP_NODE_MODULES/pprof-format"; do
  [ -e "$need" ] || fail "$need is missing: run scripts/bootstrap (it installs chromium and scripts/npm-deps)"
done
command -v go >/dev/null || fail "go is missing: run scripts/bootstrap (golang-go, for go tool pprof)"
export GOCACHE="$TMP/gocache" HOME="$TMP"

# The workload's lines, as its source says (the construction the test relies on).
sed -n 5p "$W" | grep -q '^local function aborts(n) -- line 5$' || fail "frames.lua: aborts() is not on line 5"
sed -n 11p "$W" | grep -q '^end -- line 11$' || fail "frames.lua: aborts() does not end on line 11"
sed -n 8p "$W" | grep -q 't\[i + 0.5\] = i -- line 8$' || fail "frames.lua: the aborting store is not on line 8"
sed -n 13p "$W" | grep -q '^local function clean(n) -- line 13$' || fail "frames.lua: clean() is not on line 13"
sed -n 19p "$W" | grep -q '^end -- line 19$' || fail "frames.lua: clean() does not end on line 19"
main_last=$(W="$W" "$NUPP_LUAJIT" -e 'local i = debug.getinfo(assert(loadfile(os.getenv("W"))), "S")
io.write(i.linedefined, " ", i.lastlinedefined)')
main_last=${main_last#0 }

"$NUPP_BPF" record -q -F 499 -o "$TMP/f.json" -o "$TMP/f.pb.gz" -o "$TMP/f.svg" --aborts "$TMP/f.csv" \
  -- "$NUPP_LUAJIT" "$W" 1.5 >/dev/null 2>"$TMP/rec.err" || { cat "$TMP/rec.err"; fail "record frames.lua"; }

# meta.frames holds the three functions, with their lines.
python3 - "$TMP/f.json" "$main_last" <<'PY' || fail "meta.frames of the recorded profile"
import json, sys
fr = json.load(open(sys.argv[1]))["meta"]["frames"]
want = {"frames.lua:aborts": [5, 11], "frames.lua:clean": [13, 19], "frames.lua:0": [0, int(sys.argv[2])]}
for name, (a, b) in want.items():
    assert fr.get(name) == [{"file": "frames.lua", "firstLine": a, "lastLine": b}], (name, fr.get(name))
PY
# The construction holds: aborts on aborts()'s lines, none on clean()'s.
grep -q ',frames.lua:8,' "$TMP/f.csv" || { cat "$TMP/f.csv"; fail "no abort at frames.lua:8"; }
awk -F, 'NR > 1 { split($4, l, ":"); if (l[2] >= 13 && l[2] <= 19) bad = 1 } END { exit bad }' "$TMP/f.csv" ||
  { cat "$TMP/f.csv"; fail "an abort row in clean()"; }
# The main chunk aborts too only if a row is on none of the two functions' lines.
main_marked=$(awk -F, 'NR > 1 { split($4, l, ":"); if (l[2] < 5 || (l[2] > 11 && l[2] < 13) || l[2] > 19) m = "true" }
  END { print m ? m : "false" }' "$TMP/f.csv")

# Checks a profile's pprof file ($1) and flame graph ($2): start lines 5, 13 and 0
# (or all 0: $3 = old), abort marks on aborts() only (old: on every frame of the file).
check_outputs() {
  local pb=$1 svg=$2 mode=${3:-new} a=5 c=13
  [ "$mode" = old ] && { a=0; c=0; }
  go tool pprof -raw "$pb" >"$TMP/raw" 2>"$TMP/raw.err" || { cat "$TMP/raw.err"; fail "go tool pprof -raw $pb"; }
  assert_contains "$TMP/raw" " frames.lua:aborts frames.lua:0 s=$a"
  assert_contains "$TMP/raw" " frames.lua:clean frames.lua:0 s=$c"
  assert_contains "$TMP/raw" " frames.lua:0 frames.lua:0 s=0"
  node "$FORMAT/svg_marks.mjs" "$svg" >"$TMP/marks" || fail "svg_marks $svg"
  python3 - "$TMP/marks" "$mode" "$main_marked" <<'PY' || { cat "$TMP/marks"; fail "abort marks of $svg ($mode)"; }
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
mark = {r["name"]: r for r in rows}
old = sys.argv[2] == "old"
a, c, m = mark["frames.lua:aborts"], mark["frames.lua:clean"], mark["frames.lua:0"]
assert a["mark"] and "at frames.lua:8 (" in a["tip"], a
assert c["mark"] == old and ("JIT trace aborts" in c["tip"]) == old, c
assert m["mark"] == (old or sys.argv[3] == "true"), m
for r in rows:
    if not r["name"].startswith("frames.lua:"):
        assert not r["mark"], r
PY
}
check_outputs "$TMP/f.pb.gz" "$TMP/f.svg"
node "$FORMAT/check_pprof.mjs" "$TMP/f.json" "$TMP/f.pb.gz" >/dev/null

# report re-renders the recorded JSON with the table; JSON -> report -> JSON keeps it.
"$NUPP_BPF" report "$TMP/f.json" -o "$TMP/r.pb.gz" -o "$TMP/r.svg" -o "$TMP/r.json" 2>"$TMP/err" ||
  { cat "$TMP/err"; fail "report f.json"; }
cmp "$TMP/f.json" "$TMP/r.json" || fail "JSON -> report -> JSON changed the profile"
check_outputs "$TMP/r.pb.gz" "$TMP/r.svg"
node "$FORMAT/check_pprof.mjs" "$TMP/f.json" "$TMP/r.pb.gz" >/dev/null
# --root keeps the table for the frames left.
"$NUPP_BPF" report "$TMP/f.json" --root frames.lua -o "$TMP/root.pb.gz" -o "$TMP/root.svg" 2>"$TMP/err" ||
  { cat "$TMP/err"; fail "report --root"; }
check_outputs "$TMP/root.pb.gz" "$TMP/root.svg"

# diff's flame graph: the table of NEW marks its aborts.
st=0; "$NUPP_BPF" diff -q -o "$TMP/d.svg" "$TMP/f.json" "$TMP/f.json" >/dev/null 2>"$TMP/err" || st=$?
[ "$st" -le 1 ] || { cat "$TMP/err"; fail "diff: status $st"; }
node "$FORMAT/svg_marks.mjs" "$TMP/d.svg" >"$TMP/marks" || fail "svg_marks d.svg"
python3 -c 'import json, sys
m = {r["name"]: r["mark"] for r in map(json.loads, open(sys.argv[1]))}
assert m["frames.lua:aborts"] and not m["frames.lua:clean"], m' "$TMP/marks" || { cat "$TMP/marks"; fail "diff marks"; }

# A profile written before the frame table (no meta.frames) still reads.
python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); del d["meta"]["frames"]; json.dump(d, open(sys.argv[2], "w"))' \
  "$TMP/f.json" "$TMP/old.json"
"$NUPP_BPF" report "$TMP/old.json" -o "$TMP/old.pb.gz" -o "$TMP/old.svg" -o "$TMP/old.again.json" 2>"$TMP/err" ||
  { cat "$TMP/err"; fail "report of a profile without meta.frames"; }
python3 -c 'import json, sys; assert "frames" not in json.load(open(sys.argv[1]))["meta"]' "$TMP/old.again.json" ||
  fail "a table appeared in a profile that had none"
check_outputs "$TMP/old.pb.gz" "$TMP/old.svg" old

# Handmade: outer() 1-20 holds inner() 5-9 and a one-line closure f() on line 12;
# "m.lua:comp" names two functions (25-28 and 30-34). An abort on line 7 is inner()'s
# alone (outer() has no code inside inner()); one on line 12 may be f()'s or outer()'s
# (outer()'s FNEW of f is on that line): both marked; one on line 26 is comp's; one on
# line 40 is in no sampled function: nothing marked. pprof: comp starts on line 25.
cat >"$TMP/hand.json" <<'J'
{"version":1,"meta":{"samples":6,"frequencyHz":99,"aborts":true,
 "frames":{"m.lua:outer":[{"file":"m.lua","firstLine":1,"lastLine":20}],
  "m.lua:inner":[{"file":"m.lua","firstLine":5,"lastLine":9}],
  "m.lua:f":[{"file":"m.lua","firstLine":12,"lastLine":12}],
  "m.lua:comp":[{"file":"m.lua","firstLine":30,"lastLine":34},{"file":"m.lua","firstLine":25,"lastLine":28}]}},
 "samples":[
 {"zonePath":"","stack":"m.lua:outer;m.lua:inner","count":2,"interpreted":2},
 {"zonePath":"","stack":"m.lua:outer;m.lua:f","count":2,"interpreted":2},
 {"zonePath":"","stack":"m.lua:comp","count":2,"interpreted":2}],
 "aborts":[
 {"severity":"warn","count":1,"reason":"r7","location":"m.lua:7","zonePath":""},
 {"severity":"warn","count":1,"reason":"r12","location":"m.lua:12","zonePath":""},
 {"severity":"warn","count":1,"reason":"r26","location":"m.lua:26","zonePath":""},
 {"severity":"warn","count":1,"reason":"r40","location":"m.lua:40","zonePath":""}]}
J
"$NUPP_BPF" report "$TMP/hand.json" -o "$TMP/hand.svg" -o "$TMP/hand.pb.gz" -o "$TMP/hand.again.json" 2>"$TMP/err" ||
  { cat "$TMP/err"; fail "report hand.json"; }
"$NUPP_BPF" report "$TMP/hand.again.json" -o "$TMP/hand.again2.json"
cmp "$TMP/hand.again.json" "$TMP/hand.again2.json" || fail "hand.json: JSON -> report -> JSON is not stable"
go tool pprof -raw "$TMP/hand.pb.gz" >"$TMP/raw" 2>"$TMP/raw.err" || { cat "$TMP/raw.err"; fail "go tool pprof -raw hand"; }
for want in "m.lua:outer m.lua:0 s=1" "m.lua:inner m.lua:0 s=5" "m.lua:f m.lua:0 s=12" "m.lua:comp m.lua:0 s=25"; do
  assert_contains "$TMP/raw" " $want"
done
node "$FORMAT/check_pprof.mjs" "$TMP/hand.json" "$TMP/hand.pb.gz" >/dev/null
node "$FORMAT/svg_marks.mjs" "$TMP/hand.svg" >"$TMP/marks" || fail "svg_marks hand.svg"
python3 - "$TMP/marks" <<'PY' || { cat "$TMP/marks"; fail "abort marks of the handmade profile"; }
import json, re, sys
got = {}
for r in map(json.loads, open(sys.argv[1])):
    got[r["name"]] = sorted(re.findall(r"x (r\d+) at", r["tip"])) if r["mark"] else []
want = {"all": [], "m.lua:outer": ["r12"], "m.lua:inner": ["r7"], "m.lua:f": ["r12"], "m.lua:comp": ["r26"]}
assert got == want, got
PY

# A malformed table: exit 2, the place named.
sed 's/"firstLine":5,"lastLine":9/"firstLine":9,"lastLine":5/' "$TMP/hand.json" >"$TMP/bad.json"
st=0; "$NUPP_BPF" report "$TMP/bad.json" -o "$TMP/bad.svg" 2>"$TMP/err" || st=$?
assert_eq "$st" 2 "status for a bad frame table"
assert_contains "$TMP/err" 'meta.frames["m.lua:inner"][0]: expected 0 <= firstLine <= lastLine'
echo "PASS: frame table"
