#!/usr/bin/env bash
# A compiled loop calling a vararg function that its trace inlines
# (tests/data/sampler/vararg.lua): the snapshot holds two frames for the call (the
# call's and the vararg body's, FRAME_VARG); the profile must show the function once,
# as the interpreter walk does. Named and with --lines: >= 5,000 samples, 0 stacks
# with a repeated frame, every stack a path of the program's call graph, and the
# vararg function's own samples on its body lines.
. "$(dirname "$0")/../support/lib.sh"
need_root

WL="$NUPP_TEST_DATA/sampler/vararg.lua"
"$NUPP_BPF" record -q -F 997 -o "$TMP/names.json" -- "$NUPP_LUAJIT" "$WL" 6 >/dev/null
"$NUPP_BPF" record -q --lines -F 997 -o "$TMP/lines.json" -- "$NUPP_LUAJIT" "$WL" 6 >/dev/null

python3 - "$TMP/names.json" "$TMP/lines.json" <<'PY'
import json, sys

def load(path):
    doc = json.load(open(path))
    # Host code (the exec before LuaJIT runs, libc at exit) is on [host] rows of its own.
    rows = [(s["stack"].split(";"), s["count"]) for s in doc["samples"] if not s["stack"].startswith("[host];")]
    total = sum(c for _, c in rows)
    lost = sum(doc["meta"]["lost"].values())
    assert total >= 5000, f"{path}: {total} samples (want >= 5000)"
    assert lost * 200 <= total + lost, f"{path}: {lost} samples lost of {total + lost}"
    for frames, c in rows:
        for a, b in zip(frames, frames[1:]):
            assert a != b, f"{path}: repeated frame {a} in {';'.join(frames)} ({c})"
    return rows, total

# Names: the call graph is pmain -> main chunk -> var_user -> sum3 (and os.clock, tonumber
# of its argument at its first line, and print once at the end, which calls tostring on
# its boolean); at start-up pmain runs C functions of its own (luaopen_*).
rows, total = load(sys.argv[1])
paths = {("pmain",), ("pmain", "vararg.lua:0"), ("pmain", "vararg.lua:0", "os.clock"),
         ("pmain", "vararg.lua:0", "tonumber"),
         ("pmain", "vararg.lua:0", "print"), ("pmain", "vararg.lua:0", "print", "tostring"),
         ("pmain", "vararg.lua:0", "vararg.lua:var_user"),
         ("pmain", "vararg.lua:0", "vararg.lua:var_user", "vararg.lua:sum3")}
sum3 = 0
for frames, c in rows:
    startup = len(frames) == 2 and not frames[1].startswith("vararg.lua")
    assert tuple(frames) in paths or startup, f"not a path of the call graph: {';'.join(frames)} ({c})"
    if frames[-1] == "vararg.lua:sum3":
        sum3 += c
print(f"names: {total} samples, {sum3} in sum3, 0 repeated frames")
assert sum3 * 100 >= total, f"sum3 has {sum3} of {total} samples: its frames are not decoded"

# Lines: main chunk lines 5-26 outside the two function bodies (0: its first instruction; 5:
# arg read at start; 6/12 and 14/20: making the functions; 22-26: the loop and the final
# print), var_user 14-20 (its
# loop 16-18), sum3 7-11. Line 6 is sum3's FUNCV: the interpreter or the trace recorder can be caught on it (before the loop is compiled, after
# a trace exit), never compiled code, where it would be a second, unnamed copy of the frame.
doc = json.load(open(sys.argv[2]))
rows, total = load(sys.argv[2])
for s in doc["samples"]:
    if s["stack"].endswith(";vararg.lua:17;vararg.lua:6"):
        assert s["compiled"] == 0, f"compiled samples on sum3's FUNCV line: {s}"
        assert s["count"] * 100 <= total, f"too many samples on sum3's FUNCV line: {s}"
        print(f"lines: {s['count']} sample(s) on sum3's FUNCV, not compiled")
        rows = [(f, c) for f, c in rows if ";".join(f) != s["stack"]]
sum3 = 0
for frames, c in rows:
    s = ";".join(frames)
    assert frames[0] == "pmain" and len(frames) <= 4, s
    lines = [int(f.split(":")[1]) for f in frames[1:] if f.startswith("vararg.lua:")]
    if len(lines) >= 1:
        assert lines[0] in (0, 5, 6, 12, 14, 20) or 21 <= lines[0] <= 26, f"main chunk line in {s}"
    if len(lines) >= 2:
        assert 14 <= lines[1] <= 20, f"var_user line in {s}"
    if len(lines) == 3:
        assert lines[1] == 17, f"sum3 called from line 17: {s}"
        assert 7 <= lines[2] <= 11, f"sum3 line in {s}"
        sum3 += c
print(f"lines: {total} samples, {sum3} in sum3's body, 0 repeated frames")
assert sum3 * 100 >= total, f"sum3 has {sum3} of {total} samples"
PY
echo PASS
