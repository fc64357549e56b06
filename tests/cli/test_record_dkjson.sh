#!/usr/bin/env bash
# A real program nobody here wrote, with its traces: Debian's dkjson (lua-dkjson) encoding
# and decoding a document for 6 s of CPU time under record -F 997, JIT on. Its traces
# call builtins from compiled code and return below their start frame, snapshots the
# trace decoder once refused (1.6 % of the samples lost as 'symbolize'), and its stitched
# builtins return through the continuation dispatch, a window the walker once refused
# (0.8 % lost as 'badFrame'). At most 0.3 % of the samples are lost as 'symbolize' and
# 0.5 % in all; every stack runs from pmain through
# the workload's main chunk into dkjson's functions and the builtins it calls (or loads
# the libraries and dkjson: pmain alone, luaopen_*, require); each
# string.find leaf is under a dkjson function that calls string.find (or, through a tail
# call, is named by one that tail-calls such a function).
. "$(dirname "$0")/../support/lib.sh"
need_root
[ -f /usr/share/lua/5.1/dkjson.lua ] ||
  { echo "SKIP: dkjson is not installed (Debian package lua-dkjson; scripts/bootstrap installs it)"; exit 77; }
export LUA_PATH='/usr/share/lua/5.1/?.lua;;'
"$NUPP_BPF" record -F 997 -o "$TMP/p.json" -- "$NUPP_LUAJIT" "$NUPP_TEST_DATA/dkjson/roundtrip.lua" 6 \
  >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "record of dkjson failed"; }
grep -q "^nupp-bpf: wrote $TMP/p.json" "$TMP/err" || { cat "$TMP/err" >&2; fail "no profile written"; }
[ "$(cat "$TMP/out")" -gt 0 ] || fail "the workload did no round trip: $(cat "$TMP/out")"

python3 - "$TMP/p.json" <<'PY'
import json, sys

prof = json.load(open(sys.argv[1]))
meta = prof["meta"]
samples, lost = meta["samples"], meta["lost"]
nlost = sum(v for v in lost.values() if isinstance(v, int))
assert samples >= 0.8 * 6 * 997, f"{samples} samples for 6 s at 997 Hz"
assert lost["symbolize"] <= 0.003 * samples, f"{lost['symbolize']} of {samples} samples lost as symbolize: {lost}"
assert nlost <= 0.005 * samples, f"{nlost} of {samples} samples lost: {lost}"

# The builtins dkjson calls (its source's locals: string.*, table.*, math.*, and the base
# library).
builtins = {"string.find", "string.gsub", "string.sub", "string.byte", "string.char", "string.rep",
            "string.format", "string.match", "string.len", "table.concat", "table.sort", "math.floor",
            "math.huge", "tostring", "tonumber", "type", "pairs", "ipairs", "next", "select", "pcall",
            "error", "setmetatable", "getmetatable", "debug.getmetatable", "rawset",
            # the same under dkjson's local names (a call site can name its callee)
            "strrep", "gsub", "strsub", "strbyte", "strchar", "strfind", "strlen", "strformat",
            "strmatch", "concat", "floor"}
# What the workload's main chunk calls itself, and table.concat, which json.encode
# tail-calls (its frame takes encode's place).
own = {"string.rep", "tostring", "os.clock", "print", "table.concat"}
# The functions whose body calls string.find, and num2str, whose tail call to replace
# keeps its name.
finders = {"fsub", "quotestring", "replace", "loc", "scanwhite", "scanstring", "scanvalue", "num2str"}
main = ["pmain", "roundtrip.lua:0"]
lua, finds, bad = 0, 0, []
for s in prof["samples"]:
    f = s["stack"].split(";")
    if f[0] == "[host]":
        continue
    lua += s["count"]
    # Loading: pmain before the main chunk and while it opens the libraries, require.
    if f == ["pmain"] or len(f) == 2 and f[0] == "pmain" and f[1].startswith("luaopen_") or \
            len(f) >= 3 and f[:2] == main and f[2] in ("require", "lj_cf_package_require"):
        continue
    ok = f[:2] == main and (len(f) == 2 or f[2] in ("dkjson.lua:decode", "dkjson.lua:encode") or
                            len(f) == 3 and f[2] in own)
    for i, fr in enumerate(f[2:], 2):
        if not (fr.startswith("dkjson.lua:") or (i == 2 and fr in own and i == len(f) - 1) or
                (fr in builtins and (i == len(f) - 1 or f[i + 1] in builtins))):
            ok = False
    if f[-1] in ("string.find", "strfind"):
        finds += s["count"]
        if f[-2].split(":")[-1] not in finders:
            ok = False
    if not ok:
        bad.append((s["count"], s["stack"]))
assert lua >= 0.9 * samples, f"{lua} of {samples} samples in Lua"
assert not bad, f"{sum(c for c, _ in bad)} samples off dkjson's call graph: {sorted(bad, reverse=True)[:5]}"
assert finds > 0, "no sample in string.find, which dkjson's traces call"
print(f"{samples} samples, {lua} in Lua, {finds} in string.find, lost {lost}")
PY
