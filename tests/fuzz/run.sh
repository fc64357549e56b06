#!/usr/bin/env bash
# Runs a libFuzzer target for SECONDS on a copy of its corpus (the corpus in tests/
# is only read); fails on any crash, leak or sanitizer report, and keeps the input
# that found it in build/tests/fuzz-artifacts/.
# Usage: run.sh FUZZER CORPUS_DIR SECONDS
set -euo pipefail
fuzzer=$1 corpus=$2 secs=${3:-20}
work=$(mktemp -d "${TMPDIR:-/tmp}/nupp-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
art="$(dirname "$fuzzer")/fuzz-artifacts/"
mkdir -p "$art"
# New inputs go to $work (first dir); the kept corpus is read only.
"$fuzzer" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
  -artifact_prefix="$art" "$work" "$corpus" 2>"$work/log" || { tail -60 "$work/log"; echo "FAIL: $(basename "$fuzzer") found a bug (input in $art)"; exit 1; }
grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' "$work/log" | tail -2
echo "PASS: $(basename "$fuzzer") ran ${secs}s, no crash"
