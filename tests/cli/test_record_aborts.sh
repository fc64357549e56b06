#!/usr/bin/env bash
# nupp-bpf record's abort table equals LuaJIT's own: each abort program runs under
# `record --aborts` with the jit.attach oracle in the same process
# (tests/data/trace/oracle.lua); the CSV record writes must equal the oracle's, byte
# for byte, by default and with --include-benign; the JSON profile carries the same
# rows and the totals; the stderr summary says aborts, blacklisted, distinct sites.
. "$(dirname "$0")/../support/lib.sh"
need_root

D="$NUPP_TEST_DATA/trace"
for prog in fnew uclo cfunc blacklist jitoff lleave mixtab; do
  for mode in default benign; do
    flags=(); [ "$mode" = benign ] && flags=(--include-benign)
    "$NUPP_BPF" record -F 49 "${flags[@]}" -o "$TMP/$prog.json" --aborts "$TMP/$prog.$mode.csv" \
      -- "$NUPP_LUAJIT" "$D/oracle.lua" "$TMP/o-$prog" "$D/$prog.lua" >/dev/null 2>"$TMP/stderr" ||
      { cat "$TMP/stderr"; fail "record $prog ($mode)"; }
    diff -u "$TMP/o-$prog.$mode.csv" "$TMP/$prog.$mode.csv" || fail "$prog ($mode): abort CSV differs from LuaJIT's own"
    # The JSON profile holds the same rows, in the same order, and the same totals.
    python3 - "$TMP/$prog.json" "$TMP/$prog.$mode.csv" "$TMP/o-$prog.meta" "$mode" <<'PY'
import csv, json, sys
doc = json.load(open(sys.argv[1]))
rows = list(csv.DictReader(open(sys.argv[2], newline="")))
meta = dict(l.split() for l in open(sys.argv[3]) if l.strip())
js = [{k: str(a[k]) for k in ("severity", "count", "reason", "location", "zonePath")} for a in doc["aborts"]]
assert js == rows, (js, rows)
m = doc["meta"]
want_total = int(meta["total_" + sys.argv[4]])
assert m["totalAborts"] == want_total, (m["totalAborts"], want_total)
assert m["blacklisted"] == int(meta["blacklisted"]), (m["blacklisted"], meta)
PY
    grep -qE "^nupp-bpf: [0-9]+ trace aborts, [0-9]+ blacklisted, [0-9]+ distinct sites" "$TMP/stderr" ||
      { cat "$TMP/stderr"; fail "no abort summary on stderr"; }
  done
done

# The blacklisting program: exactly one blacklist row, blacklisted = 1.
[ "$(grep -c '^blacklist,' "$TMP/blacklist.default.csv")" = 1 ] || fail "want one blacklist row"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["meta"]["blacklisted"] == 1' "$TMP/blacklist.json"

# --no-aborts: no trace channel, an empty abort array.
"$NUPP_BPF" record -q --no-aborts -o "$TMP/none.json" -- "$NUPP_LUAJIT" "$D/fnew.lua"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["aborts"] == [] and d["meta"]["aborts"] is False' "$TMP/none.json"
echo "PASS: record aborts equal LuaJIT's own"
