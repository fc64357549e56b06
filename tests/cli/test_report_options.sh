#!/usr/bin/env bash
# The options that shape reports: --full-filenames (frames name the chunk's path),
# --top on record and report, --lines (the table per source line), --zone and --root
# on report, --inverted (an icicle graph), and a 10,000-stack profile whose flame
# graph merges what is too narrow to see.
. "$(dirname "$0")/../support/lib.sh"
need_root
DATA="$NUPP_SOURCE_DIR/tests/data/report"

# --full-filenames: the chunk's full path; the default stays jit.p's basename.
"$NUPP_BPF" record -q -F 499 --full-filenames -o "$TMP/full.folded" -- "$NUPP_LUAJIT" "$DATA/states.lua" 0.5
grep -q "^pmain;$DATA/states.lua:0;$DATA/states.lua:comp " "$TMP/full.folded" || { cat "$TMP/full.folded"; fail "no full path"; }
# --top on record: the table after the summary, on stderr.
"$NUPP_BPF" record -F 499 --top 2 -o "$TMP/s.json" -- "$NUPP_LUAJIT" "$DATA/states.lua" 1 2>"$TMP/err"
grep -q "^pmain;states.lua:0;states.lua:comp " <("$NUPP_BPF" report "$TMP/s.json" -f collapsed) || fail "basename frames"
assert_contains "$TMP/err" "Top 2 functions of "
grep -Eq '^ +[0-9.]+% +[0-9.]+% +[0-9]+ +[0-9]+ +[0-9.]+% .* states\.lua:(comp|interp)$' "$TMP/err" ||
  { cat "$TMP/err"; fail "no table row for comp or interp"; }
assert_eq "$(grep -c '%  ' "$TMP/err")" 2 "rows of --top 2"

# --lines: the table per source line, each line in its VM state (states.lua: the loop
# of interp is line 8, of comp line 15).
"$NUPP_BPF" record -q -F 499 --lines -o "$TMP/l.json" -- "$NUPP_LUAJIT" "$DATA/states.lua" 1.5
"$NUPP_BPF" report "$TMP/l.json" --top 3 --lines >"$TMP/lines.txt"
assert_contains "$TMP/lines.txt" "source lines of"
awk '$NF == "states.lua:15" { exit !($5 + 0 >= 90) }' "$TMP/lines.txt" || { cat "$TMP/lines.txt"; fail "line 15 not compiled"; }
awk '$NF == "states.lua:8" { exit !($6 + 0 >= 90) }' "$TMP/lines.txt" || { cat "$TMP/lines.txt"; fail "line 8 not interpreted"; }
grep -q "states.lua:15$" "$TMP/lines.txt" && grep -q 'states.lua:8$' "$TMP/lines.txt" || fail "lines 8 and 15 not in the table"
st=0; "$NUPP_BPF" report "$TMP/s.json" --top 3 --lines 2>"$TMP/err" || st=$?
assert_eq "$st" 2 "--lines on a profile of functions"
assert_contains "$TMP/err" "record it with --lines"

# --root on report cuts stacks below the module; --zone keeps a zone's rows.
"$NUPP_BPF" report "$TMP/s.json" --root states.lua -f collapsed >"$TMP/root.folded"
# A stack with a states.lua frame starts with it; one without (a sample in pmain before
# the chunk ran) is kept whole.
! grep 'states\.lua:' "$TMP/root.folded" | grep -v '^states.lua:' || fail "--root left frames above states.lua"
grep -q '^states.lua:' "$TMP/root.folded" || fail "--root kept no states.lua stack"
cat >"$TMP/z.json" <<'J'
{"version":1,"meta":{"samples":10,"frequencyHz":99},"samples":[
 {"zonePath":"frame/render","stack":"m:main;m:draw","count":6,"compiled":6},
 {"zonePath":"frame/update","stack":"m:main;m:step","count":3,"interpreted":3},
 {"zonePath":"","stack":"m:main","count":1,"cCode":1}]}
J
assert_eq "$("$NUPP_BPF" report "$TMP/z.json" --zone frame/render -f collapsed)" "m:main;m:draw 6" "--zone"
assert_eq "$("$NUPP_BPF" report "$TMP/z.json" --zone frame -f collapsed | wc -l)" 2 "--zone prefix"
"$NUPP_BPF" report "$TMP/z.json" --zone frame/render -o "$TMP/z2.json"
grep -q '"zoneFilter": "frame/render"' "$TMP/z2.json" || fail "the filter is not in the meta"

# --inverted: roots at the top.
"$NUPP_BPF" report "$TMP/z.json" --inverted -o "$TMP/ice.svg"
python3 - "$TMP/ice.svg" <<'PY' || fail "--inverted did not put the root above its children"
import re, sys
svg = open(sys.argv[1]).read()
y = {m.group(2): float(m.group(1)) for m in re.finditer(r'<rect x="[^"]*" y="([^"]*)"[^>]*/><text[^>]*>([^<]*)</text>', svg)}
assert y["all"] < y["m:main"] < y["m:draw"], y
PY
st=0; "$NUPP_BPF" report "$TMP/z.json" --inverted -o "$TMP/x.json" 2>"$TMP/err" || st=$?
assert_eq "$st" 2 "--inverted without an SVG output"

# A 10,000-stack profile: every stack distinct; narrow frames are merged, so the
# graph stays a few thousand elements whatever the profile's size.
python3 - "$TMP/big.json" <<'PY'
import json, random, sys
random.seed(7)
rows = []
for i in range(10000):
    depth = random.randint(3, 12)
    st = ";".join(["main"] + ["mod%d.lua:f%d" % (random.randint(0, 40), random.randint(0, 30)) for _ in range(depth)] + ["leaf%d" % i])
    n = random.randint(1, 50)
    rows.append({"zonePath": "", "stack": st, "count": n, "compiled": n})
json.dump({"version": 1, "meta": {"samples": sum(r["count"] for r in rows), "frequencyHz": 999}, "samples": rows},
          open(sys.argv[1], "w"))
PY
"$NUPP_BPF" report "$TMP/big.json" -o "$TMP/big.svg"
frames=$(grep -c '<g class="f' "$TMP/big.svg")
merged=$(grep -c '<g class="f m"' "$TMP/big.svg")
[ "$frames" -lt 6000 ] || fail "$frames frames drawn for 10,000 stacks: narrow frames are not merged"
[ "$merged" -gt 0 ] || fail "no merged frame in a 10,000-stack graph"
python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$TMP/big.svg" || fail "big.svg is not XML"
echo "PASS: report options ($frames frames, $merged merged, for 10,000 stacks)"
