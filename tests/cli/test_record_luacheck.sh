#!/usr/bin/env bash
# A real program nobody here wrote, against its own clock: Debian's luacheck (lua-check)
# linting its own source files five times under record -F 4999 (no configuration file, one
# job), with each of its check stages timed by os.clock inside the target (tests/data/luacheck/stages.lua wraps
# every stage's run). Each stage's samples (those whose stack runs through the wrapper
# into that stage's file) are its CPU time within 5 %, give or take the timer's own
# spread: a stage run C times is C intervals of CPU time, each of which gets the ticks of
# its length give or take one by where the period falls (a spread of at most sqrt(C)/2
# samples; 4 of it are allowed: a check of the larger stages, those of a few samples pass
# with any count near 0). All stages together are within 2 %, the process's
# samples its whole CPU time within 5 %, and at most 1 % of samples are lost, none as
# mapFull; -v names a cause for every sample lost as symbolize.
. "$(dirname "$0")/../support/lib.sh"
need_root
[ -f /usr/share/lua/5.1/luacheck/main.lua ] ||
  { echo "SKIP: luacheck is not installed (Debian package lua-check; scripts/bootstrap installs it)"; exit 77; }
export LUA_PATH='/usr/share/lua/5.1/?.lua;/usr/share/lua/5.1/?/init.lua;;'
export LUA_CPATH='/usr/lib/x86_64-linux-gnu/lua/5.1/?.so;;'
FREQ=4999
find /usr/share/lua/5.1/luacheck -name '*.lua' | LC_ALL=C sort >"$TMP/files"
mapfile -t files <"$TMP/files"
[ "${#files[@]}" -ge 20 ] || fail "only ${#files[@]} luacheck source files to lint"

# record exits with the target's status: luacheck's is 1 when it found warnings.
rc=0
"$NUPP_BPF" -v record -F $FREQ -o "$TMP/p.json" -- "$NUPP_LUAJIT" "$NUPP_TEST_DATA/luacheck/stages.lua" --no-cache --no-config -j 1 \
  "${files[@]}" "${files[@]}" "${files[@]}" "${files[@]}" "${files[@]}" >/dev/null 2>"$TMP/err" || rc=$?
[ $rc -le 1 ] && grep -q "^nupp-bpf: wrote $TMP/p.json" "$TMP/err" ||
  { cat "$TMP/err" >&2; fail "record of luacheck failed (exit $rc)"; }

python3 - "$TMP/p.json" "$TMP/err" <<'PY'
import collections, json, re, sys

prof = json.load(open(sys.argv[1]))
err = open(sys.argv[2]).read()
stages = re.findall(r"^stage (\w+) ([\d.]+) (\d+)$", err, re.M)
spent = {m[0]: float(m[1]) for m in stages}
calls = {m[0]: int(m[2]) for m in stages}
cpu = float(re.search(r"^cpu ([\d.]+)$", err, re.M).group(1))
nstages = int(re.search(r"^stages (\d+)$", err, re.M).group(1))
assert nstages >= 10 and len(spent) == nstages, f"luacheck reported {len(spent)} of {nstages} stages: {err}"
freq = prof["meta"]["frequencyHz"]
assert freq == 4999, freq

# A stage's samples: the frame below the wrapper (stages.lua:run) and its pcall is the
# stage's run, in luacheck/stages/<stage>.lua.
got, total, elsewhere = collections.Counter(), 0, 0
for s in prof["samples"]:
    f = s["stack"].split(";")
    total += s["count"]
    if "stages.lua:run" not in f:
        continue
    below = [x for x in f[f.index("stages.lua:run") + 1:] if x != "pcall"]
    stage = below[0].split(":")[0].removesuffix(".lua") if below else None
    if stage in spent:
        got[stage] += s["count"]
    else:
        elsewhere += s["count"]
lost = prof["meta"]["lost"]
nlost = sum(lost.values())
print(f"{total} samples, {nlost} lost {lost}; cpu {cpu:.3f} s = {cpu * freq:.0f} samples; "
      f"{elsewhere} in the wrapper itself")
bad, worst = [], 0.0
for stage, t in sorted(spent.items(), key=lambda kv: -kv[1]):
    want, n = t * freq, got[stage]
    print(f"  {stage:30s} {t:7.3f} s {want:7.0f} want {n:6d} got {100 * (n - want) / max(want, 1):+6.2f} %")
    if abs(n - want) > 0.05 * want + 4 * calls[stage] ** 0.5 / 2:
        bad.append(stage)
    if want >= 300:
        worst = max(worst, abs(n - want) / want)
print(f"stages of 300 samples or more: at most {100 * worst:.2f} % off their own clock")
assert not bad, f"stages off their own clock: {bad}"
want_all, got_all = sum(spent.values()) * freq, sum(got.values())
assert abs(got_all - want_all) <= 0.02 * want_all, f"all stages: {got_all} samples for {want_all:.0f}"
assert abs(total + nlost - cpu * freq) <= 0.05 * cpu * freq, f"{total} + {nlost} samples for {cpu} s"
assert nlost * 100 <= total, f"{nlost} of {total} samples lost: {lost}"
assert lost.get("mapFull", 0) == 0, lost
# -v names the cause of every sample lost as symbolize.
causes = [(int(n), why) for n, why in re.findall(r"^nupp-bpf: lost as symbolize: (\d+) samples: (.+)$", err, re.M)]
assert sum(n for n, _ in causes) == lost["symbolize"], f"{lost['symbolize']} lost as symbolize, causes {causes}"
PY
