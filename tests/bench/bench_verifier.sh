#!/usr/bin/env bash
# Benchmark (not a test): what the kernel verifier costs when nupp-bpf loads its BPF
# programs, the largest part of the time from `record` to the first sample. The driver
# tests/bench/verifier_cost.c loads each object of BUILD_DIR/bpf (nothing is attached)
# with verifier log level 4 and prints, per program, the instructions the verifier
# processed, its states (total and peak) and its verification time; per object, the wall
# time of the whole load. Median of RUNS loads (min-max for the time). With
# BASE_BUILD_DIR (another tree's build, e.g. of main), its objects are loaded in turn
# with these (alternating, so both see the same load) and shown beside them.
# usage: sudo tests/bench/bench_verifier.sh [BUILD_DIR] [RUNS] [BASE_BUILD_DIR]
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$SRC/build}
RUNS=${2:-5}
BASE=${3:-}
OBJS="sampler trace follow vmwatch"

[ "$(id -u)" = 0 ] || { echo "bench_verifier.sh: needs root (BPF)" >&2; exit 77; }
[ -f "$BUILD/bpf/sampler.bpf.o" ] || { echo "bench_verifier.sh: build first ($BUILD)" >&2; exit 1; }
[ -z "$BASE" ] || [ -f "$BASE/bpf/sampler.bpf.o" ] || { echo "bench_verifier.sh: no $BASE/bpf/sampler.bpf.o" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -O2 -o "$TMP/verifier_cost" "$SRC/tests/bench/verifier_cost.c" $(pkg-config --libs --static libbpf libelf)

# Loads every object of build $1 once, appending the driver's lines to $2.
load_all() {
  local o
  for o in $OBJS; do
    "$TMP/verifier_cost" "$1/bpf/$o.bpf.o" | sed "s|^|obj=$o |" >>"$2"
  done
}

for _ in $(seq "$RUNS"); do
  load_all "$BUILD" "$TMP/new"
  [ -z "$BASE" ] || load_all "$BASE" "$TMP/base"
done

# Median (and min-max) of field $2 over the lines of file $1 that match $3.
med() { grep -E -- "$3" "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | sort -g |
  awk '{a[NR]=$1} END {if (!NR) {print "?"; exit} m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2;
  printf "%g %g %g\n", m, a[1], a[NR]}'; }

echo "BPF verification, median of $RUNS loads; $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
[ -z "$BASE" ] || echo "base: $BASE (loaded alternately with $BUILD)"
printf '%-8s %-28s %10s %8s %7s %11s' object program processed states peak "verify ms"
[ -z "$BASE" ] || printf ' %12s %13s' "base insns" "base verify"
echo
for o in $OBJS; do
  for p in $(grep "^obj=$o prog=" "$TMP/new" | sed 's/.* prog=\([^ ]*\).*/\1/' | sort -u); do
    sel="^obj=$o prog=$p "
    read -r ins _ _ < <(med "$TMP/new" processed "$sel")
    read -r st _ _ < <(med "$TMP/new" states "$sel")
    read -r pk _ _ < <(med "$TMP/new" peak "$sel")
    read -r us _ _ < <(med "$TMP/new" verify_us "$sel")
    printf '%-8s %-28s %10s %8s %7s %11.1f' "$o" "$p" "$ins" "$st" "$pk" "$(awk -v u="$us" 'BEGIN {print u / 1000}')"
    if [ -n "$BASE" ]; then
      read -r bins _ _ < <(med "$TMP/base" processed "$sel")
      read -r bus _ _ < <(med "$TMP/base" verify_us "$sel")
      printf ' %12s %13.1f' "$bins" "$(awk -v u="$bus" 'BEGIN {print u == "?" ? 0 : u / 1000}')"
    fi
    echo
  done
  read -r ms lo hi < <(med "$TMP/new" load_ms "^obj=$o object=")
  printf '%-8s %-28s %10s %8s %7s %11s' "$o" "(whole load, wall)" "" "" "" "$ms ($lo-$hi)"
  if [ -n "$BASE" ]; then
    read -r bms blo bhi < <(med "$TMP/base" load_ms "^obj=$o object=")
    printf ' %12s %13s' "" "$bms ($blo-$bhi)"
  fi
  echo
done
