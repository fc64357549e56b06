#!/usr/bin/env bash
# A trace that calls a C function (tests/data/sampler/ffi_leaf.lua: mid's trace inlines
# leaf, which calls strlen through the FFI, where nearly all of the time goes): a sample
# inside strlen keeps the trace's inlined frames, named from the snapshot of the call
# site, as a sample on the call instruction itself would be. By construction, nearly all
# (measured: 92-95 %; 85 % asserted, losing the inlined frames gives about none) of
# the samples under mid end in leaf (the rest: mid's own code and the interpreter around
# it; leaf's samples include its interpreted FFI calls before the trace is made); with
# --lines, leaf's frame is at line 16 (the snapshot before the call: the
# string load after the store) or 17 (the call), under mid at line 21.
. "$(dirname "$0")/../support/lib.sh"
need_root

WL="$NUPP_TEST_DATA/sampler/ffi_leaf.lua"
"$NUPP_BPF" record -q -F 997 -o "$TMP/names.json" -- "$NUPP_LUAJIT" "$WL" 2 >/dev/null
"$NUPP_BPF" record -q --lines -F 997 -o "$TMP/lines.json" -- "$NUPP_LUAJIT" "$WL" 2 >/dev/null

python3 - "$TMP/names.json" "$TMP/lines.json" <<'PY'
import json, sys

names = json.load(open(sys.argv[1]))
under_mid = leaf = 0
for s in names["samples"]:
    f = s["stack"].split(";")
    if "ffi_leaf.lua:mid" in f:
        under_mid += s["count"]
        below = f[f.index("ffi_leaf.lua:mid") + 1:]
        # Before mid's trace exists, leaf runs interpreted: it looks strlen up in the C
        # library namespace (its __index metamethod), calls it through the FFI's __call
        # metamethod and converts the result with tonumber (builtins of their own).
        assert below in ([], ["ffi_leaf.lua:leaf"], ["ffi_leaf.lua:leaf", "ffi.meta.__call"],
                         ["ffi_leaf.lua:leaf", "ffi.clib.__index"], ["ffi_leaf.lua:leaf", "tonumber"]), s["stack"]
        if below:
            leaf += s["count"]
print(f"names: {under_mid} samples under mid, {leaf} in leaf")
# mid's share of the run moves with the machine's os.clock cost (477-573 of 2 s at 997 Hz)
assert under_mid >= 300, f"only {under_mid} samples under mid"
assert leaf * 100 >= under_mid * 85, f"leaf has {leaf} of mid's {under_mid} samples: inlined frames lost in strlen"

lines = json.load(open(sys.argv[2]))
n = mid_lines = 0
for s in lines["samples"]:
    f = s["stack"].split(";")
    if len(f) >= 4 and f[1] == "ffi_leaf.lua:34" and f[2] == "ffi_leaf.lua:28":
        mid_lines += s["count"]
    if len(f) == 5 and f[1] == "ffi_leaf.lua:34" and f[2] == "ffi_leaf.lua:28" and s["compiled"] == s["count"]:
        assert f[3] == "ffi_leaf.lua:21", s["stack"]
        assert f[4] in ("ffi_leaf.lua:16", "ffi_leaf.lua:17"), s["stack"]
        n += s["count"]
print(f"lines: {n} compiled samples in leaf under mid:21, of {mid_lines} under mid")
# Of the run's own samples under mid (each run has its own share of os.clock around it):
# those in leaf less its interpreted samples before the trace exists.
assert mid_lines >= 300, f"only {mid_lines} samples under mid"
assert n * 100 >= mid_lines * 85, f"only {n} of {mid_lines} samples under mid on leaf's lines"
PY
