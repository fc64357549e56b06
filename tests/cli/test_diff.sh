#!/usr/bin/env bash
# nupp-bpf diff on profiles with known shares (written here as nupp profile JSON): exit
# 0 no regression, 1 regression, 2 error; the threshold and the noise guard as the
# user sees them; merged runs; new blacklist rows and --allow-aborts; what differs when
# profiles cannot be compared; --json, -o result.json and --format bmf read back by
# python's json; -o diff.svg opened by Chromium (red frames grew, blue shrank). No root.
. "$(dirname "$0")/../support/lib.sh"

# Writes a nupp profile: prof FILE 'stack=count[:I]' ... [-- key=json-value ...]
# (":I" makes those samples interpreted; meta keys after -- override the defaults).
prof() {
  python3 - "$@" <<'PY'
import json, sys
out, args = sys.argv[1], sys.argv[2:]
rows, meta, aborts = [], {}, []
while args:
    a = args.pop(0)
    if a == "--":
        for kv in args:
            k, v = kv.split("=", 1)
            if k == "abort":
                sev, cnt, reason, loc = v.split("|")
                aborts.append({"severity": sev, "count": int(cnt), "reason": reason, "location": loc, "zonePath": ""})
            else:
                meta[k] = json.loads(v)
        break
    stack, n = a.rsplit("=", 1)
    interp = n.endswith(":I")
    n = int(n.rstrip(":I"))
    rows.append({"zonePath": "", "stack": stack, "count": n, "compiled": 0 if interp else n,
                 "interpreted": n if interp else 0, "cCode": 0, "collecting": 0, "compiling": 0})
m = {"tool": "nupp-bpf 0.1.0", "command": "record", "target": "luajit app.lua", "pids": [1], "backend": "bpf",
     "frequencyHz": 99, "intervalMs": 10.1, "depth": 64, "durationSec": 10.0,
     "samples": sum(r["count"] for r in rows), "lost": {}, "zoneFilter": None, "root": None, "aborts": True,
     "includeBenign": False, "totalAborts": sum(a["count"] for a in aborts),
     "blacklisted": sum(a["count"] for a in aborts if a["severity"] == "blacklist"), "luajit": "x",
     "lines": False, "fullFilenames": False}
m.update(meta)
json.dump({"version": 1, "meta": m, "samples": rows, "aborts": aborts}, open(out, "w"))
PY
}

# Runs diff with the given arguments; checks the status; output in $TMP/out, $TMP/err.
diff_st() {
  local want=$1; shift
  local st=0
  "$NUPP_BPF" diff "$@" >"$TMP/out" 2>"$TMP/err" || st=$?
  [ "$st" = "$want" ] || { cat "$TMP/out" "$TMP/err"; fail "diff $*: status $st, want $want"; }
}

cd "$TMP"
# f from 40 % to 70 % of 1000 samples: it grew, g shrank.
prof base.json 'm.lua:main;m.lua:f=400' 'm.lua:main;m.lua:g=600'
prof grew.json 'm.lua:main;m.lua:f=700' 'm.lua:main;m.lua:g=300'
prof same.json 'm.lua:main;m.lua:f=401' 'm.lua:main;m.lua:g=599'
diff_st 0 base.json same.json
assert_contains out "nupp-bpf diff: no regression"
diff_st 1 base.json grew.json
grep -qE '^ +\+30\.00 +40\.00 +70\.00 .* m\.lua:f  \[grew\]$' out || { cat out; fail "no grew row for m.lua:f"; }
grep -qE '^ +-30\.00 .* m\.lua:g  \[shrank\]$' out || { cat out; fail "no shrank row for m.lua:g"; }
assert_contains out "nupp-bpf diff: 1 regression"
diff_st 1 -q base.json grew.json
assert_eq "$(cat out err)" "" "-q prints nothing"

# The noise guard: +3 points (10 % -> 13 %) on 200 samples is noise (z = 0.94); on
# 20,000 it is not (z = 9.4); a threshold of 5 points holds it back again.
prof n200a.json 'm.lua:f=20' 'm.lua:g=180'
prof n200b.json 'm.lua:f=26' 'm.lua:g=174'
prof n20ka.json 'm.lua:f=2000' 'm.lua:g=18000'
prof n20kb.json 'm.lua:f=2600' 'm.lua:g=17400'
diff_st 0 n200a.json n200b.json
diff_st 1 n20ka.json n20kb.json
grep -qE 'm\.lua:f  \[grew\]$' out || { cat out; fail "20,000 samples: m.lua:f not flagged"; }
diff_st 0 --threshold 5 n20ka.json n20kb.json
diff_st 0 --sigmas 10 n20ka.json n20kb.json
diff_st 1 --min-samples 2500 n20ka.json n20kb.json
diff_st 0 --min-samples 3000 n20ka.json n20kb.json

# --stacks: f's self share is 100 % on both sides, but its caller moved: by function no
# regression, by stack the path through a grew and the one through b shrank.
prof sb.json 'm.lua:main;m.lua:a;m.lua:f=500' 'm.lua:main;m.lua:b;m.lua:f=500'
prof sn.json 'm.lua:main;m.lua:a;m.lua:f=800' 'm.lua:main;m.lua:b;m.lua:f=200'
diff_st 0 sb.json sn.json
diff_st 1 --stacks sb.json sn.json
grep -qE '^ +\+30\.00 +50\.00 +80\.00 .* m\.lua:main;m\.lua:a;m\.lua:f  \[grew\]$' out || { cat out; fail "--stacks: no grew row"; }
grep -qE '^ +-30\.00 +50\.00 +20\.00 .* m\.lua:main;m\.lua:b;m\.lua:f  \[shrank\]$' out || { cat out; fail "--stacks: no shrank row"; }

# Several runs a side are merged: two runs of 200 samples each side.
diff_st 0 --base n200a.json --base n200a.json --new n200b.json --new n200b.json
assert_contains out "BASE: n200a.json, n200a.json: 2 runs, 400 samples"

# Went interpreted at the same share: a regression that says so.
prof interp.json 'm.lua:main;m.lua:f=400:I' 'm.lua:main;m.lua:g=600'
diff_st 1 base.json interp.json
grep -qE '0% -> 100% .* m\.lua:f  \[now interpreted\]$' out || { cat out; fail "no 'now interpreted' row"; }

# A new blacklist row is a regression, unless --allow-aborts; a new warn row is not.
prof ab0.json 'm.lua:f=500' 'm.lua:g=500' -- 'abort=warn|3|NYI: bytecode UCLO|m.lua:3'
prof ab1.json 'm.lua:f=500' 'm.lua:g=500' -- 'abort=warn|3|NYI: bytecode UCLO|m.lua:3' \
  'abort=blacklist|1|NYI: bytecode FNEW|m.lua:12' 'abort=warn|2|NYI: bytecode TNEW|m.lua:20'
diff_st 1 ab0.json ab1.json
assert_contains out "+ blacklist      0 -> 1      NYI: bytecode FNEW at m.lua:12  [new blacklisting]"
assert_contains out "+ warn           0 -> 2      NYI: bytecode TNEW at m.lua:20"
diff_st 0 --allow-aborts ab0.json ab1.json
diff_st 0 ab1.json ab0.json
assert_contains out "- blacklist      1 -> 0      NYI: bytecode FNEW at m.lua:12"

# Errors: exit 2 with what went wrong.
diff_st 2 base.json /nonexistent/new.json
assert_contains err "cannot read NEW /nonexistent/new.json"
printf '{"version": 1, "meta": {' >trunc.json
diff_st 2 trunc.json base.json
assert_contains err "cannot read BASE trunc.json: trunc.json:1:"
prof d32.json 'm.lua:f=500' -- 'depth=32'
diff_st 2 base.json d32.json
assert_contains err "cannot compare base.json and d32.json: recorded with different --depth (64 and 32 frames)"
prof lines.json 'm.lua:12=500' -- 'lines=true'
diff_st 2 base.json lines.json
assert_contains err "lines.json was recorded with --lines (frames are source lines) and base.json without"
diff_st 2 --lines base.json grew.json
assert_contains err "cannot compare by line: base.json was recorded without --lines"
prof noab.json 'm.lua:f=500' -- 'aborts=false'
diff_st 2 base.json noab.json
assert_contains err "noab.json was recorded with --no-aborts and base.json was not"
prof empty.json
diff_st 2 base.json empty.json
assert_contains err "empty.json has no samples"
diff_st 2 base.json
assert_contains err "diff needs a BASE and a NEW profile"
diff_st 2 --threshold -1 base.json grew.json
diff_st 2 -o diff.png base.json grew.json
assert_contains err "unknown output format for 'diff.png'"
diff_st 0 --help
assert_contains out "EXIT STATUS"

# --json and -o result.json: the same document, every row.
diff_st 1 --json base.json grew.json
cp out stdout.json
diff_st 1 -q -o result.json base.json grew.json
cmp stdout.json result.json || fail "--json and -o result.json differ"
python3 - result.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["regressions"] == 1, d["regressions"]
assert d["unit"] == "function" and d["threshold"] == 1.0 and d["sigmas"] == 3.0 and d["minSamples"] == 20
rows = {r["key"]: r for r in d["rows"]}
assert set(rows) == {"m.lua:main", "m.lua:f", "m.lua:g"}, set(rows)
f = rows["m.lua:f"]
assert f["regression"] and f["flags"] == ["grew"], f
assert abs(f["self"]["change"] - 30.0) < 1e-9 and f["base"]["self"] == 400 and f["new"]["self"] == 700
assert abs(rows["m.lua:main"]["total"]["base"] - 100.0) < 1e-9
assert d["base"]["samples"] == 1000 and d["base"]["runs"] == 1 and d["base"]["files"] == "base.json"
PY

# Bencher Metric Format: NEW's shares with bounds, and the run's totals.
diff_st 1 --format bmf base.json grew.json
python3 - out <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
f = d["m.lua:f"]["self-share"]
assert abs(f["value"] - 70.0) < 1e-9 and f["lower_value"] < 70.0 < f["upper_value"], f
assert abs(d["m.lua:g"]["total-share"]["value"] - 30.0) < 1e-9
assert d["m.lua:f"]["interpreted-share"]["value"] == 0.0
assert d["nupp-bpf"]["samples"]["value"] == 1000.0
assert "m.lua:main" not in d  # never a leaf
PY

# The differential flame graph, rendered by Chromium: widths from NEW, f (grew) red,
# g (shrank) blue, main (100 % on both sides) neutral; no script error.
diff_st 1 -q -o diff.svg base.json grew.json
python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' diff.svg || fail "diff.svg is not well-formed XML"
command -v chromium >/dev/null || fail "chromium is missing: run scripts/bootstrap"
timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-background-networking --no-first-run \
  --user-data-dir="$TMP/chrome" --enable-logging=stderr --v=0 --dump-dom "file://$TMP/diff.svg" \
  >dom.html 2>chrome.err || { tail chrome.err; fail "chromium could not render diff.svg"; }
grep -q 'Uncaught' chrome.err && { grep Uncaught chrome.err; fail "script error in diff.svg"; }
python3 - dom.html <<'PY'
import re, sys
dom = open(sys.argv[1]).read()
frames = {}
for g in re.finditer(r'<g class="f"[^>]*><rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"[^>]*fill="rgb\((\d+),(\d+),(\d+)\)"[^>]*>'
                     r'<text[^>]*>([^<]*)</text>', dom):
    frames[g.group(6)] = (float(g.group(2)), tuple(int(g.group(i)) for i in (3, 4, 5)))
assert {"m.lua:f", "m.lua:g", "m.lua:main"} <= set(frames), frames
wf, (r, g, b) = frames["m.lua:f"]
assert r == 255 and g < 60 and b < 60, ("f not red", frames["m.lua:f"])
wg, (r, g, b) = frames["m.lua:g"]
assert b == 255 and r < 60 and g < 60, ("g not blue", frames["m.lua:g"])
assert frames["m.lua:main"][1] == (235, 235, 235), frames["m.lua:main"]
assert abs(wf / (wf + wg) - 0.70) < 0.01, (wf, wg)  # widths from NEW: f 70 %
assert "share of the samples grew" in dom and "var D=[" in dom
PY
echo "PASS: diff"
