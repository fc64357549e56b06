#!/usr/bin/env bash
# nupp-bpf record on code made and collected without pause (tests/data/sampler/reload.lua:
# thousands of prototypes a second, two chunk names taking turns at the same addresses):
# no probe fires when a prototype is made, and only the prototypes a sample met are
# watched, so far fewer than were made are; yet every frame is named as the prototype
# it sampled (a frame of the program's call graph, known by construction), naming loses
# at most 0.5 % of the samples, and each chunk's share of the samples matches the CPU time the program
# measured in it (os.clock) within 3 percentage points.
. "$(dirname "$0")/../support/lib.sh"
need_root

"$NUPP_BPF" -v record -F 997 -o "$TMP/p.json" -- "$NUPP_LUAJIT" "$NUPP_TEST_DATA/sampler/reload.lua" 4 \
  >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "record exited with status $?"; }
grep -v '^drain:' "$TMP/err"
read -r made spent_a spent_b <"$TMP/out"
freed=$(awk '/^nupp-bpf: prototypes:/ {print $3}' "$TMP/err")
watched=$(awk '/^nupp-bpf: prototypes:/ {print $5}' "$TMP/err")
reported=$(sed -n 's/^nupp-bpf: prototypes: .*, \([0-9]*\) of their frees reported$/\1/p' "$TMP/err")
[ -n "$freed" ] && [ -n "$watched" ] && [ -n "$reported" ] || fail "no prototypes line in record -v's output"
echo "prototypes: $made made, $freed freed, $watched watched, $reported frees reported"
samples=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["meta"]; print(m["samples"] + sum(m["lost"].values()))' "$TMP/p.json")
[ -n "$samples" ] || fail "no sample count in the profile"
# The workload makes prototypes several times faster than they are sampled (how many
# depends on the machine's speed at compiling them), else this test shows nothing.
[ "$made" -ge $((samples * 4)) ] || fail "the workload made only $made prototypes for $samples samples"
# Every prototype the workload made dies before it exits (collected, or at lua_close):
# each is reported, the last batch too.
[ "$freed" -ge "$made" ] || fail "$freed prototypes reported freed of the $made the workload made"
[ "$watched" -ge 1 ] || fail "no prototype watched"
# A prototype is watched when a sample or a trace copy meets it, never at its birth: a
# sample meets at most one of the chunks' (new) prototypes here.
[ $((watched * 3)) -le "$made" ] || fail "$watched of $made prototypes watched: more than a third"
[ "$reported" -le "$watched" ] || fail "$reported frees reported for $watched prototypes watched"
# -v's own CPU line: total = user + system, the start a part of it.
awk '/^nupp-bpf: own CPU / {
       gsub(/[(),]/, ""); all = $4; u = $7; k = $10; start = $12; n++
       if (all <= 0 || start <= 0 || start > all || (u + k - all) ^ 2 > 0.000004) bad = 1 }
     END { exit (n != 1 || bad) }' "$TMP/err" || fail "record -v's own CPU line is missing or inconsistent"

python3 - "$TMP/p.json" "$spent_a" "$spent_b" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
m = d["meta"]
ok = re.compile(r"^(reload\.lua:(0|round)|chunk[AB]:([0-9]|1[0-9]|2[01])|loadstring|assert|os\.clock|"
                r"collectgarbage|string\.format|print)$")
a = b = bad = total = 0
for r in d["samples"]:
    fr = r["stack"].split(";")
    if fr[0] == "[host]":
        continue
    total += r["count"]
    # Under the main chunk, only the program's call graph; before it (the libraries
    # opened by pmain) nothing of the chunks.
    main = fr[:2] == ["pmain", "reload.lua:0"]
    # The main chunk's first statements: building the source text, reading arg[1].
    first = fr in (["pmain", "reload.lua:0", "table.concat"], ["pmain", "reload.lua:0", "tonumber"])
    if fr[0] != "pmain" or (main and not first and not all(ok.match(f) for f in fr[1:])) or \
            (not main and any(f.startswith("chunk") for f in fr)):
        bad += r["count"]
        print("misnamed:", r["stack"], r["count"], file=sys.stderr)
    if any(f.startswith("chunkA:") for f in fr):
        a += r["count"]
    elif any(f.startswith("chunkB:") for f in fr):
        b += r["count"]
lost = sum(m["lost"].values())
sa, sb = float(sys.argv[2]), float(sys.argv[3])
truth, got = 100 * sa / (sa + sb), 100 * a / max(a + b, 1)
print(f"{total} Lua samples, {bad} misnamed, {lost} lost (symbolize {m['lost']['symbolize']}); "
      f"chunkA {got:.2f} % of the chunks' samples ({a} vs {b}), measured {truth:.2f} %")
assert bad == 0, f"{bad} samples with a frame the program does not run there"
# The chunks' CPU time at 997 Hz, less what the sampler may miss (steal, start-up).
assert a + b >= 0.8 * 997 * (sa + sb), f"only {a + b} samples in the chunks for {sa + sb:.2f} s"
# (A trace sample whose snapshot PC lies outside its innermost frame is refused, not
# guessed: one in several thousand, whatever the prototypes do.)
assert m["lost"]["symbolize"] * 200 <= m["samples"], m["lost"]
assert lost * 100 <= m["samples"] + lost, m["lost"]
assert abs(got - truth) <= 3.0, f"chunkA: profile {got:.2f} % vs measured {truth:.2f} %"
PY
echo "PASS: prototypes watched only when sampled, every frame named, shares as measured"
