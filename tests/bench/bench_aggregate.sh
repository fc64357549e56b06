#!/usr/bin/env bash
# Benchmark (not a test): aggregation, the final filter and the writers on N distinct
# synthetic stacks (tests/bench/aggregate.c; no root needed). Prints one line per step.
# usage: tests/bench/bench_aggregate.sh [N] [BUILD]   (default 100000, build/)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
N=${1:-100000}
BUILD=${2:-$SRC/build}
[ -f "$BUILD/libnupp.a" ] || { echo "bench_aggregate.sh: build first ($BUILD)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -O2 -o "$TMP/aggregate" "$SRC/tests/bench/aggregate.c" -I"$SRC/include" "$BUILD/libnupp.a" \
  $(pkg-config --libs --static libbpf libelf jansson) -lm
"$TMP/aggregate" "$N"
