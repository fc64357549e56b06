#!/usr/bin/env bash
# The README's "The two commands" and "Quick start" sections, run as written, so the
# README cannot drift from the tool: the two commands name executable scripts; every
# command line of the quick start's sh blocks runs (in a folder whose build/ is this
# build, app.lua the demo workload) and must exit 0 and leave every -o FILE it names;
# the Lua block runs in our LuaJIT (bpf backend, no LUA_PATH) and leaves its output.
# Stand-ins: sudo is the command itself (root runs this), pgrep -n luajit names the
# app this test started, xdg-open opens the SVG in headless Chromium (render_png.mjs).
. "$(dirname "$0")/../support/lib.sh"
need_root

README="$NUPP_SOURCE_DIR/README.md"
export NUPP_NODE_MODULES="$NUPP_BINARY_DIR/node/node_modules"
[ -e "$NUPP_NODE_MODULES/playwright-core" ] || fail "playwright-core is missing: run scripts/bootstrap"

# The fenced blocks of language $2 in section $1 ("## $1" up to the next "## "), each
# block's lines followed by a line "@@".
blocks() {
  awk -v sec="## $1" -v lang="$2" '
    /^## / { on = ($0 == sec) }
    on && /^```/ { if (inb) { print "@@"; inb = 0 } else if ($0 == "```" lang) inb = 1; next }
    on && inb { print }' "$README"
}

# The two commands: each names a script of the tree that can run.
blocks "The two commands" sh | grep -v '^@@' >"$TMP/two"
assert_eq "$(awk '{print $1}' "$TMP/two" | tr '\n' ' ')" "scripts/demo/run scripts/test " "the two commands"
while read -r cmd _; do
  [ -x "$NUPP_SOURCE_DIR/$cmd" ] || fail "the README's $cmd is not an executable script"
done <"$TMP/two"

blocks "Quick start" sh >"$TMP/sh"
blocks "Quick start" lua >"$TMP/lua"
[ "$(grep -c '^@@' "$TMP/sh")" -ge 2 ] || { cat "$TMP/sh"; fail "the quick start has fewer than 2 sh blocks"; }
[ "$(grep -c '^@@' "$TMP/lua")" = 1 ] || { cat "$TMP/lua"; fail "the quick start has no Lua block"; }

# The folder the commands run in: build/ is this build, app.lua the demo workload
# (APP_SECONDS of CPU, 2 by default).
qs="$TMP/qs"
mkdir -p "$qs"
cd "$qs"
ln -s "$NUPP_BINARY_DIR" build
[ -x build/nupp-bpf ] && [ -x build/luajit/bin/luajit ] || fail "no build/nupp-bpf or build/luajit/bin/luajit in $NUPP_BINARY_DIR"
printf 'arg = { os.getenv("APP_SECONDS") or "2" }\ndofile("%s")\n' "$NUPP_SOURCE_DIR/scripts/demo/workload.lua" >app.lua

# The running process the first command attaches to.
APP_SECONDS=60 build/luajit/bin/luajit app.lua >/dev/null 2>&1 &
APP_PID=$!
trap 'kill "$APP_PID" 2>/dev/null || true; rm -rf "$TMP"' EXIT
wait_luajit "$APP_PID"

sudo() { "$@"; }
pgrep() { [ "$*" = "-n luajit" ] || fail "pgrep $*: not the README's pgrep -n luajit"; echo "$APP_PID"; }
xdg-open() {
  [ -s "$1" ] || fail "xdg-open $1: no such file"
  node "$NUPP_SOURCE_DIR/tests/format/render_png.mjs" "$1" "$TMP/opened.png" || fail "xdg-open $1: it does not render"
}

# Runs each command line; $line is one line of the README.
ran=0
while IFS= read -r line; do
  case $line in '@@' | '' | '#'*) continue ;; esac
  words=($line)
  [ "${words[0]}" = sudo ] && words=("${words[@]:1}")
  case ${words[0]} in
    build/nupp-bpf | xdg-open) ;;
    *) fail "the quick start runs [${words[0]}]: teach this test to run it ($line)" ;;
  esac
  # diff compares two profiles: the base and the change, here the same recording.
  if [ "${words[1]:-}" = diff ]; then cp app.json base.json; cp app.json new.json; fi
  outs=()
  for ((i = 0; i < ${#words[@]} - 1; i++)); do
    [ "${words[i]}" = -o ] && outs+=("${words[i + 1]}")
  done
  rm -f "${outs[@]}"
  st=0
  eval "$line" >"$TMP/out" 2>"$TMP/err" </dev/null || st=$?
  [ "$st" = 0 ] || { cat "$TMP/out" "$TMP/err"; fail "exit $st: $line"; }
  for o in "${outs[@]}"; do
    [ -s "$o" ] || { cat "$TMP/err"; fail "no $o after: $line"; }
  done
  case $line in
    *"record -p"*)
      python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["meta"]; assert m["samples"] > 100, m' app.json ||
        fail "the -p recording has too few samples"
      kill "$APP_PID" ;;
    *"--top 15"*)
      n=$(sed -nE 's/^Top ([0-9]+) functions of .*/\1/p' "$TMP/err")
      [ -n "$n" ] && [ "$n" -le 15 ] || { cat "$TMP/err"; fail "no top table of at most 15 rows on stderr"; }
      grep -q 'workload.lua:layout$' "$TMP/err" || { cat "$TMP/err"; fail "the top table misses the workload"; } ;;
  esac
  echo "ran: $line"
  ran=$((ran + 1))
done <"$TMP/sh"
[ "$ran" -ge 5 ] || fail "only $ran quick-start commands ran"

# The Lua block, with a render() that does the demo's work, in our LuaJIT as found.
{
  printf 'function render()\n  arg = { "1" }\n  dofile("%s")\nend\n' "$NUPP_SOURCE_DIR/scripts/demo/workload.lua"
  grep -v '^@@' "$TMP/lua"
  printf 'assert(report.backend == "bpf", "backend " .. tostring(report.backend))\n'
} >quick.lua
out=$(grep -o 'session:stop("[^"]*")' "$TMP/lua" | sed 's/.*("\(.*\)")/\1/')
[ -n "$out" ] || fail "the Lua block writes no file"
rm -f "$out"
env -u LUA_PATH -u LUA_CPATH build/luajit/bin/luajit quick.lua >"$TMP/out" 2>"$TMP/err" ||
  { cat "$TMP/out" "$TMP/err"; fail "the quick start's Lua block"; }
[ -s "$out" ] || fail "the Lua block left no $out"
grep -qE '^[^ ]*workload\.lua:layout [0-9]+$' "$out" || { head "$out"; fail "$out has no workload.lua:layout stack"; }
echo "ran: the Lua block (bpf backend), $out"
echo "PASS: the README's quick start, $ran commands and the Lua block"
