#!/usr/bin/env bash
# report and diff on inputs that are not profiles: truncated JSON, binary junk, a line
# without a count, a negative, a NaN, an overflowing and a fractional count, in nupp JSON
# and in collapsed stacks. Each exits 2 with the file and the position named, and writes nothing. A
# 100,000-frame stack is a valid collapsed profile: rendered whole, exit 0. No root.
. "$(dirname "$0")/../support/lib.sh"

printf 'main;work;f 30\nmain;g 10\n' >"$TMP/in.folded"
"$NUPP_BPF" report "$TMP/in.folded" -f json -o "$TMP/ok.json"
grep -q '"count": 30' "$TMP/ok.json" || fail "ok.json is not written as this test expects"

head -c 200 "$TMP/ok.json" >"$TMP/trunc.json"
# 3000 bytes of binary junk, the same each run, a NUL in its first line (a fresh draw of
# /dev/urandom met one of three right messages by chance: a test that failed at random).
python3 -c 'import random, sys; random.seed(26); b = bytearray(random.randrange(1, 256) for _ in range(3000)); b[:8] = b"\xff\xfe\x01\x00\x9c\x80\x02\x03"; sys.stdout.buffer.write(b)' >"$TMP/garbage.json"
printf 'main;a 3\n\001\002\377junk\n' >"$TMP/junk.folded"
sed 's/"count": 30/"count": -5/' "$TMP/ok.json" >"$TMP/neg.json"
sed 's/"count": 30/"count": NaN/' "$TMP/ok.json" >"$TMP/nan.json"
sed 's/"count": 30/"count": 1e400/' "$TMP/ok.json" >"$TMP/huge.json"
sed 's/"count": 30/"count": 2.5/' "$TMP/ok.json" >"$TMP/frac.json"
printf 'main;a 3\nmain;b -3\n' >"$TMP/neg.folded"
printf 'main;a 3\nmain;b nan\n' >"$TMP/nan.folded"

# Runs report and diff on one bad input; checks exit 2, the message, nothing written.
bad_input() {
  local f=$1 want=$2 st
  mkdir -p "$TMP/out"
  st=0
  "$NUPP_BPF" report "$TMP/$f" -o "$TMP/out/r.svg" -o "$TMP/out/r.json" 2>"$TMP/err" || st=$?
  assert_eq "$st" 2 "report $f"
  assert_contains "$TMP/err" "$TMP/$f"
  grep -qE -- "$want" "$TMP/err" || { cat "$TMP/err"; fail "report $f: no [$want] in the message"; }
  st=0
  "$NUPP_BPF" diff "$TMP/ok.json" "$TMP/$f" -o "$TMP/out/d.svg" 2>"$TMP/err" >/dev/null || st=$?
  assert_eq "$st" 2 "diff $f"
  assert_contains "$TMP/err" "cannot read NEW $TMP/$f"
  grep -qE -- "$want" "$TMP/err" || { cat "$TMP/err"; fail "diff $f: no [$want] in the message"; }
  assert_eq "$(ls -A "$TMP/out" | wc -l)" 0 "files written for $f"
}

bad_input trunc.json ':13:7: premature end of input .*\(byte 200 of 200\)'
bad_input garbage.json 'line 1: a NUL byte: not collapsed stacks text'
bad_input junk.folded 'line 2: expected "frame;frame;\.\.\. count"'
bad_input neg.json 'samples\[0\]\.count: expected a non-negative integer'
bad_input nan.json ":[0-9]+:[0-9]+: invalid token near 'NaN'"
bad_input huge.json ":[0-9]+:[0-9]+: real number overflow near '1e400'"
bad_input frac.json 'samples\[0\]\.count: expected a non-negative integer'
bad_input neg.folded 'line 2: the count is not a whole number of samples'
bad_input nan.folded 'line 2: '

# A 100,000-frame stack: valid, rendered; the leaf is in the flame graph and the profile.
python3 -c 'print(";".join("f%d" % i for i in range(100000)) + " 3")' >"$TMP/deep.folded"
"$NUPP_BPF" report "$TMP/deep.folded" -o "$TMP/deep.svg" -o "$TMP/deep.json"
python3 - "$TMP/deep.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["meta"]["samples"] == 3, d["meta"]
frames = d["samples"][0]["stack"].split(";")
assert len(frames) == 100000 and frames[0] == "f0" and frames[-1] == "f99999", len(frames)
PY
grep -q 'f99999' "$TMP/deep.svg" || fail "deep.svg lacks the leaf frame"

echo "ok: 9 bad inputs refused by report and diff with the position, nothing written; a 10^5-frame stack rendered"
