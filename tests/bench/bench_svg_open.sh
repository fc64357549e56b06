#!/usr/bin/env bash
# How fast a flame graph of a large profile opens: a profile of N distinct stacks
# (default 10,000, depth 4-13) rendered by `nupp-bpf report`, opened RUNS times in
# headless Chromium. Prints the median time to the load event's end (parsed, drawn,
# script ready), to the first frame painted after it, and of a search and a zoom.
# Usage: tests/bench/bench_svg_open.sh [BUILD_DIR] [STACKS] [RUNS]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
stacks=${2:-10000} runs=${3:-5}
export NUPP_NODE_MODULES="$build/node/node_modules"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp/big.json" "$stacks" <<'PY'
import json, random, sys
random.seed(7)
rows = []
for i in range(int(sys.argv[2])):
    st = ";".join(["main"] + ["mod%d.lua:f%d" % (random.randint(0, 40), random.randint(0, 30))
                              for _ in range(random.randint(3, 12))] + ["leaf%d" % i])
    n = random.randint(1, 50)
    rows.append({"zonePath": "", "stack": st, "count": n, "interpreted": n // 2, "compiled": n - n // 2})
json.dump({"version": 1, "meta": {"samples": sum(r["count"] for r in rows), "frequencyHz": 999}, "samples": rows},
          open(sys.argv[1], "w"))
PY
t0=$(date +%s.%N)
"$build/nupp-bpf" report "$tmp/big.json" -o "$tmp/big.svg"
t1=$(date +%s.%N)
for i in $(seq "$runs"); do node "$top/tests/bench/svg_open.mjs" "$tmp/big.svg"; done >"$tmp/runs"
python3 - "$tmp/runs" "$stacks" "$(stat -c %s "$tmp/big.svg")" "$(echo "$t1 - $t0" | bc)" <<'PY'
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1])]
med = lambda k: statistics.median(x[k] for x in r)
print("| stacks | frames drawn | SVG size | report time | load (median) | first paint | search | zoom |")
print("|---|---|---|---|---|---|---|---|")
print("| %s | %d | %.1f MB | %.2f s | %.0f ms | %.0f ms | %.0f ms | %.0f ms |" % (
    sys.argv[2], r[0]["frames"], int(sys.argv[3]) / 1e6, float(sys.argv[4]), med("load"), med("paint"), med("search"), med("zoom")))
print("runs (load ms):", ", ".join("%.0f" % x["load"] for x in r))
PY
