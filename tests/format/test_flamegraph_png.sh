#!/usr/bin/env bash
# The README's picture: records the demo workload scripts/demo/run profiles (the same
# record line), renders its flame graph in headless Chromium to a PNG, and checks that
# the PNG decodes, has the SVG's size and is not blank (render_png.mjs). With
# NUPP_UPDATE_DOCS=1 it writes the picture to docs/flamegraph.png (kept under 200 KB).
. "$(dirname "$0")/../support/lib.sh"
need_root

FORMAT="$NUPP_SOURCE_DIR/tests/format"
DEMO="$NUPP_SOURCE_DIR/scripts/demo/run"
export NUPP_NODE_MODULES="$NUPP_BINARY_DIR/node/node_modules"
for need in /usr/bin/chromium "$NUPP_NODE_MODULES/playwright-core"; do
  [ -e "$need" ] || fail "$need is missing: run scripts/bootstrap (it installs chromium and scripts/npm-deps)"
done

# The demo's own record line, so the picture is of what scripts/demo/run shows.
line=$(grep -E '^"\$build/nupp-bpf" record ' "$DEMO") || fail "no record line in $DEMO"
grep -qF -- '-- "$build/luajit/bin/luajit" "$top/scripts/demo/workload.lua" 4' "$DEMO" ||
  fail "$DEMO no longer runs scripts/demo/workload.lua 4: update this test"
freq=$(sed -nE 's/.* -F ([0-9]+) .*/\1/p' <<<"$line")
[ -n "$freq" ] || fail "no -F in the demo's record line: $line"

# Run from a folder where build/ and scripts/ are the tree's, so the graph's title is
# the command as the README shows it, not this machine's paths.
cd "$TMP"
ln -s "$NUPP_BINARY_DIR" build
ln -s "$NUPP_SOURCE_DIR/scripts" scripts
build/nupp-bpf record -q -F "$freq" -o demo.json -o demo.svg -- build/luajit/bin/luajit scripts/demo/workload.lua 4 \
  >out 2>err || { cat out err; fail "record the demo workload"; }
[ -s demo.svg ] || fail "record left no demo.svg"
node "$FORMAT/render_png.mjs" demo.svg demo.png
size=$(stat -c %s demo.png)
[ "$size" -lt 204800 ] || fail "demo.png is $size bytes, over 200 KB"

if [ "${NUPP_UPDATE_DOCS:-}" = 1 ]; then
  cp demo.png "$NUPP_SOURCE_DIR/docs/flamegraph.png"
  # The checkout's owner keeps owning it when this runs as root under sudo.
  owner=$(stat -c %u:%g "$NUPP_SOURCE_DIR/docs")
  chown "$owner" "$NUPP_SOURCE_DIR/docs/flamegraph.png"
  echo "wrote docs/flamegraph.png ($size bytes)"
fi
# The committed picture is one this test made: a PNG of the same size, under 200 KB.
doc="$NUPP_SOURCE_DIR/docs/flamegraph.png"
[ -f "$doc" ] || fail "docs/flamegraph.png is missing: run this test with NUPP_UPDATE_DOCS=1"
[ "$(stat -c %s "$doc")" -lt 204800 ] || fail "docs/flamegraph.png is over 200 KB"
python3 - "$doc" demo.png <<'PY' || fail "docs/flamegraph.png is not a PNG of the demo's size: rerun with NUPP_UPDATE_DOCS=1"
import struct, sys
def size(p):
    b = open(p, "rb").read(24)
    assert b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR", p
    return struct.unpack(">II", b[16:24])
assert size(sys.argv[1]) == size(sys.argv[2]), (size(sys.argv[1]), size(sys.argv[2]))
PY
grep -qF '](docs/flamegraph.png)' "$NUPP_SOURCE_DIR/README.md" || fail "the README does not show docs/flamegraph.png"
echo "PASS: the demo's flame graph renders to a $size-byte PNG"
