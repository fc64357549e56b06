#!/usr/bin/env bash
# The README's "Use in CI" job, run as written: the shell block between the ci-job
# markers runs in a git repository whose change (HEAD) slows one function of
# tests/data/ci/bench.lua against its base (HEAD~1); the job must fail (exit 1) naming
# that function and leave perf/diff.svg and perf/diff.json. The GitHub workflow between
# the ci-workflow markers must be valid YAML whose pull-request steps run the same lines.
. "$(dirname "$0")/../support/lib.sh"
need_root

README="$NUPP_SOURCE_DIR/README.md"
sed -n '/<!-- ci-job:begin -->/,/<!-- ci-job:end -->/p' "$README" | sed '1,2d;$d' | sed '$d' >"$TMP/job.sh"
sed -n '/<!-- ci-workflow:begin -->/,/<!-- ci-workflow:end -->/p' "$README" | sed '1,2d;$d' | sed '$d' >"$TMP/perf.yml"
grep -q 'nupp-bpf" diff\|"\$NUPP" diff' "$TMP/job.sh" || { cat "$TMP/job.sh"; fail "no job in the README"; }

# The workflow: valid YAML; each line of its pull-request and doctor steps is a line of the job.
python3 - "$TMP/perf.yml" "$TMP/job.sh" <<'PY'
import sys, yaml
wf = yaml.safe_load(open(sys.argv[1]))
job = [l.strip() for l in open(sys.argv[2])]
assert set(wf[True]) == {"push", "pull_request"}, wf[True]  # YAML 1.1 reads "on" as True
steps = wf["jobs"]["perf"]["steps"]
runs = [s for s in steps if "run" in s and ("pull_request" in s.get("if", "") or "if" not in s)]
assert len(runs) == 3, [s.get("name") for s in runs]
for s in runs:
    for line in s["run"].splitlines():
        assert line.strip() in job, ("workflow line not in the job", line)
uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
assert {u["with"]["name"] for u in uploads} == {"perf-${{ github.sha }}", "nupp-baseline"}, uploads
PY

# A repository: the base commit runs bench.lua as it is; the change gives beta 3x the work.
repo="$TMP/repo"
mkdir -p "$repo"
cd "$repo"
git init -q
cp "$NUPP_TEST_DATA/ci/bench.lua" bench.lua
git add bench.lua
git -c user.name=t -c user.email=t@example.com commit -qm base
python3 - bench.lua <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
head = "local function beta(n)\n  local s = 0\n  for i = 1, n do"
assert head in s
s = s.replace(head, "local function beta(n)\n  local s = 0\n  for i = 1, 3 * n do")
open(p, "w").write(s)
PY
git -c user.name=t -c user.email=t@example.com commit -qam "slow beta down"

# Root runs the job here: sudo is the command itself.
st=0
NUPP="$NUPP_BPF" LUAJIT="$NUPP_LUAJIT" BASE_REF=HEAD~1 RUNNER_TEMP="$TMP" BENCH_N=4e7 \
  bash -c 'sudo() { "$@"; }; . "$1"' job "$TMP/job.sh" >"$TMP/out" 2>"$TMP/err" || st=$?
[ "$st" = 1 ] || { cat "$TMP/out" "$TMP/err"; fail "the job's status on a change that slows beta: $st, want 1"; }
grep -qE ' bench\.lua:beta  \[grew\]$' "$TMP/out" || { cat "$TMP/out" "$TMP/err"; fail "the job does not name beta"; }
assert_contains "$TMP/out" "BASE: perf/base-1.json, perf/base-2.json, perf/base-3.json: 3 runs"
[ -s perf/diff.svg ] && [ -s perf/diff.json ] || fail "the job left no perf/diff.svg or perf/diff.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["regressions"] >= 1 and d["base"]["runs"] == 3' perf/diff.json
[ ! -e "$TMP/base" ] || fail "the job left its base worktree"
echo "PASS: the README's CI job"
