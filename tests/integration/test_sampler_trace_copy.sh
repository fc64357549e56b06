#!/usr/bin/env bash
# Every trace that fits is copied by BPF at its first sample, with the functions of its
# frames named while it is alive, however many functions it inlines
# (tests/data/sampler/many_fns.lua: one trace inlining 28 distinct functions, each with a
# snapshot of its own): `-v` shows every trace copied and no refusal of any reason, and
# the samples of the trace are named from the copy: by construction each of f1 .. f28
# does the same work, so each holds about 1/28 of the samples under hot, and nearly all
# of hot's samples are in one of them. Each holds 0.5x .. 2x of their mean: a snapshot
# range named for the wrong function gives one of them about 0 and another about 2x. The
# bound is not tighter because runs of 2 s on these VMs have put one function at 1.55x
# (about 40 samples at once, once in tens of runs) while 40 runs in a row stayed within
# 0.67x .. 1.36x.
. "$(dirname "$0")/../support/lib.sh"
need_root

WL="$NUPP_TEST_DATA/sampler/many_fns.lua"
"$NUPP_BPF" -v record -F 997 -o "$TMP/p.json" -- "$NUPP_LUAJIT" "$WL" 2 >/dev/null 2>"$TMP/err" ||
  { cat "$TMP/err" >&2; fail "record failed"; }

python3 - "$TMP/p.json" "$TMP/err" <<'PY'
import json, re, sys

err = open(sys.argv[2]).read()
fns = int(re.search(r"^fns (\d+)$", err, re.M).group(1))
assert fns > 16, f"the workload's trace holds only {fns} functions"
m = re.search(r"traces sampled: (\d+) copied by bpf; not copied:((?: \w+ \d+)+)$", err, re.M)
assert m, err
copied = int(m.group(1))
refused = {k: int(v) for k, v in re.findall(r"(\w+) (\d+)", m.group(2))}
print(f"{fns} functions in a trace; {copied} traces copied, refused {refused}")
assert copied >= 1, err
assert set(refused) >= {"unwatched", "shape", "tooBig", "tooManyFns", "ringFull"}, refused
assert not any(refused.values()), f"traces not copied: {refused}"

prof = json.load(open(sys.argv[1]))
per, hot = {}, 0
for s in prof["samples"]:
    f = s["stack"].split(";")
    if "many_fns.lua:hot" not in f:
        continue
    hot += s["count"]
    below = f[f.index("many_fns.lua:hot") + 1:]
    if len(below) == 1 and re.fullmatch(r"many_fns\.lua:f\d+", below[0]):
        per[below[0]] = per.get(below[0], 0) + s["count"]
inl = sum(per.values())
print(f"{hot} samples under hot, {inl} in its 28 inlined functions: {sorted(per.values())}")
assert len(per) == 28, f"only {len(per)} of the 28 functions named: {per}"
assert inl >= 1000, f"only {inl} samples in the inlined functions"
assert inl * 100 >= hot * 95, f"{hot - inl} of hot's {hot} samples not in an inlined function"
mean = inl / 28
for k, v in per.items():
    assert 0.5 * mean <= v < 2 * mean, f"{k} has {v} samples, the mean is {mean:.0f}"
lost = prof["meta"]["lost"]
assert lost.get("symbolize", 0) * 100 <= hot, f"symbolize lost {lost}"
PY
