#!/usr/bin/env bash
# Every format nupp-bpf writes, read by a real consumer: the flame graph in headless
# Chromium (renders, VM-state colours of a workload with a known compiled and
# interpreted part, Ctrl-F search share, click zoom, screenshot), speedscope's own
# importer, go tool pprof and pprof-format; JSON -> every format -> the same totals;
# names that are not UTF-8 survive JSON -> report -> JSON byte for byte.
. "$(dirname "$0")/../support/lib.sh"
need_root

FORMAT="$NUPP_SOURCE_DIR/tests/format"
DATA="$NUPP_SOURCE_DIR/tests/data/report"
export NUPP_NODE_MODULES="$NUPP_BINARY_DIR/node/node_modules"
SHOTS="$NUPP_BINARY_DIR/tests/screenshots"
mkdir -p "$SHOTS"
for need in /usr/bin/chromium "$NUPP_NODE_MODULES/playwright-core" "$NUPP_NODE_MODULES/speedscope" \
            "$NUPP_NODE_MODULES/pprof-format"; do
  [ -e "$need" ] || fail "$need is missing: run scripts/bootstrap (it installs chromium and scripts/npm-deps)"
done
command -v go >/dev/null || fail "go is missing: run scripts/bootstrap (golang-go, for go tool pprof)"
export GOCACHE="$TMP/gocache" HOME="$TMP"

# Checks a profile through every format; $1 = the profile, then FRAME=STATE colour checks.
check_all() {
  local json=$1 base=${1%.json}; shift
  "$NUPP_BPF" report "$json" -o "$base.svg" -o "$base.speedscope.json" -o "$base.pb.gz" -o "$base.folded" \
    -o "$base.again.json" 2>"$TMP/err" || { cat "$TMP/err"; fail "report $json"; }
  "$NUPP_BPF" report "$json" -f top -o "$base.top.txt" --top 1000
  cmp "$json" "$base.again.json" || fail "JSON -> report -> JSON changed $json"
  local total
  total=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["meta"]["samples"])' "$json")
  [ "$total" -gt 50 ] || fail "$json has only $total samples"
  # collapsed: the counts add up; top: the self column adds up.
  assert_eq "$(awk '{s += $NF} END {print s}' "$base.folded")" "$total" "collapsed total"
  assert_eq "$(awk 'NR > 2 {s += $3} END {print s}' "$base.top.txt")" "$total" "top table self total"
  head -1 "$base.top.txt" | grep -q "of $total samples" || fail "top header: $(head -1 "$base.top.txt")"
  # pprof, read by go tool pprof: the samples/count column adds up.
  go tool pprof -raw "$base.pb.gz" >"$TMP/raw" 2>"$TMP/raw.err" || { cat "$TMP/raw.err"; fail "go tool pprof -raw"; }
  grep -q '^samples/count cpu/nanoseconds' "$TMP/raw" || { cat "$TMP/raw"; fail "pprof sample types"; }
  assert_eq "$(awk '/^Samples:/ {on=1; next} /^Locations/ {on=0} on && $2 ~ /^[0-9]+:$/ {s += $1} END {print s}' \
    "$TMP/raw")" "$total" "go tool pprof total"
  grep -q 'vmstate:\[' "$TMP/raw" || fail "no vmstate label in go tool pprof -raw"
  node "$FORMAT/check_pprof.mjs" "$json" "$base.pb.gz"
  node "$FORMAT/check_speedscope.mjs" "$json" "$base.speedscope.json" "$TMP"
  node "$FORMAT/check_svg.mjs" "$json" "$base.svg" "$SHOTS/$(basename "$base").png" "$@"
  python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$base.svg" || fail "$base.svg is not XML"
}

# A workload with a known compiled part (comp) and interpreted part (interp, jit.off).
before=$(date +%s.%N)
"$NUPP_BPF" record -q -F 499 -o "$TMP/states.json" -- "$NUPP_LUAJIT" "$DATA/states.lua" 1.5 2>"$TMP/rec.err" ||
  { cat "$TMP/rec.err"; fail "record states.lua"; }
after=$(date +%s.%N)
# meta.startTime: when recording began, as Unix time.
python3 -c 'import json,sys; t = json.load(open(sys.argv[1]))["meta"]["startTime"]
sys.exit(0 if float(sys.argv[2]) <= t <= float(sys.argv[3]) else "startTime %s not in [%s, %s]" % (t, sys.argv[2], sys.argv[3]))' \
  "$TMP/states.json" "$before" "$after"
check_all "$TMP/states.json" states.lua:comp=compiled states.lua:interp=interpreted

# Names that are not UTF-8 (a chunk "@caf\xE9.lua", a key "k\xFF"): JSON stays valid,
# reads back to the same bytes, collapsed output has the raw bytes, displays show \xE9.
"$NUPP_BPF" record -q -F 499 -o "$TMP/names.json" -o "$TMP/names.rec.folded" -- "$NUPP_LUAJIT" "$DATA/names.lua" 1 \
  2>"$TMP/rec.err" || { cat "$TMP/rec.err"; fail "record names.lua"; }
python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding="utf-8", errors="strict"))' "$TMP/names.json" ||
  fail "names.json is not valid UTF-8 JSON"
grep -qa $'caf\xe9.lua:k\xff ' "$TMP/names.rec.folded" || { cat -v "$TMP/names.rec.folded"; fail "raw bytes not in collapsed"; }
check_all "$TMP/names.json"
cmp "$TMP/names.rec.folded" "$TMP/names.folded" || fail "collapsed from JSON differs from collapsed at record time"
grep -q 'caf\\xE9.lua:k\\xFF' "$TMP/names.svg" || fail "the SVG does not show caf\\xE9.lua:k\\xFF"

# Two processes (record --subprocesses), the second with two threads; a row of a profile
# written before rows named their thread (no "tid") is thread 0: one speedscope profile
# per process and thread, named by the thread's name where known. A known start time
# and duration: pprof's time and duration.
cat >"$TMP/two.json" <<'J'
{"version":1,"meta":{"samples":9,"frequencyHz":99,"pids":[11,22],"durationSec":2.5,"startTime":1700000000.25,
 "threads":[{"pid":22,"tid":23,"name":"worker"}]},
 "samples":[
 {"pid":11,"zonePath":"","stack":"m:main;m:a","count":5,"compiled":5},
 {"pid":22,"tid":23,"zonePath":"","stack":"m:main;m:b","count":3,"interpreted":3},
 {"pid":22,"tid":24,"zonePath":"z","stack":"m:main","count":1,"cCode":1}]}
J
"$NUPP_BPF" report "$TMP/two.json" -o "$TMP/two.speedscope.json" -o "$TMP/two.pb.gz"
node "$FORMAT/check_speedscope.mjs" "$TMP/two.json" "$TMP/two.speedscope.json" "$TMP" | tee "$TMP/ss.out"
assert_contains "$TMP/ss.out" "3 profile(s)"
assert_contains "$TMP/ss.out" "profile PID 11: 5 samples"
assert_contains "$TMP/ss.out" "profile PID 22 thread 23 (worker): 3 samples"
assert_contains "$TMP/ss.out" "profile PID 22 thread 24: 1 samples"
node "$FORMAT/check_pprof.mjs" "$TMP/two.json" "$TMP/two.pb.gz"
go tool pprof -raw "$TMP/two.pb.gz" >"$TMP/raw" 2>"$TMP/raw.err" || { cat "$TMP/raw.err"; fail "go tool pprof -raw two"; }
assert_contains "$TMP/raw" "Time: 2023-11-14 22:13:20.25 +0000 UTC"
assert_contains "$TMP/raw" "Duration: 2.5s"

# An input that is not a profile: exit 2, the file and the position named.
head -c 200 "$TMP/states.json" >"$TMP/cut.json"
st=0; "$NUPP_BPF" report "$TMP/cut.json" -o "$TMP/cut.svg" 2>"$TMP/err" || st=$?
assert_eq "$st" 2 "status for a truncated profile"
assert_contains "$TMP/err" "$TMP/cut.json:"
assert_contains "$TMP/err" "(byte "
[ ! -e "$TMP/cut.svg" ] || fail "an output was written for a truncated input"
echo "PASS: report formats"
