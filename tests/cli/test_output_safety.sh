#!/usr/bin/env bash
# Outputs written as root are safe in folders other users can write: a symbolic link
# another user planted (before the run, or during it) is never followed, and its target
# is left untouched; a folder swapped for such a link during recording is refused; our
# own links are followed; the other outputs are still written whole. Under sudo new
# outputs belong to the user who ran sudo. The same for report -o, diff -o, record -o and
# --aborts, and the in-app binding's session:stop(path), bpf and vm backends.
# The kernel's fs.protected_symlinks is switched off for the test where it can be, so
# the refusal seen is nupp-bpf's own.
. "$(dirname "$0")/../support/lib.sh"
need_root
id nobody >/dev/null 2>&1 || { echo "SKIP: no user nobody to plant links as"; exit 77; }
NOBODY=$(id -u nobody)
NOGROUP=$(id -g nobody)

old_protect=$(sysctl -n fs.protected_symlinks 2>/dev/null || echo)
cleanup() {
  [ -n "$old_protect" ] && sysctl -qw fs.protected_symlinks="$old_protect" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
sysctl -qw fs.protected_symlinks=0 2>/dev/null || true

# A sticky, world-writable folder like /tmp, and a root-only file elsewhere to protect.
chmod 755 "$TMP"
S=$TMP/shared
mkdir -m 1777 "$S"
mkdir -m 700 "$TMP/private"
VICTIM=$TMP/private/victim
echo "root's secret" >"$VICTIM"
chmod 600 "$VICTIM"
victim_intact() {
  assert_eq "$(cat "$VICTIM")" "root's secret" "the link's target after $1"
  assert_eq "$(stat -c '%U %a' "$VICTIM")" "root 600" "the target's owner and mode after $1"
}
plant() { runuser -u nobody -- ln -sfn "$1" "$2"; }
MSG_LINK="is a symbolic link owned by nobody (uid $NOBODY), another user: refusing to follow it (remove the link, or write elsewhere)"

printf 'main;work;f 30\nmain;work;g 10\nmain;h 5\n' >"$TMP/in.folded"
"$NUPP_BPF" report "$TMP/in.folded" -f json -o "$TMP/base.json"
BUSY='local t = os.clock() while os.clock() - t < (tonumber(arg[1]) or 3) do local s = 0 for i = 1, 1000 do s = s + i end end'
echo "$BUSY" >"$TMP/busy.lua"

# 1. report -o a planted link: exit 1, the link named with its owner, the target untouched,
# nothing left beside the link; the other -o is written.
plant "$VICTIM" "$S/planted.folded"
st=0
"$NUPP_BPF" report "$TMP/in.folded" -o "$S/planted.folded" 2>"$TMP/err" || st=$?
assert_eq "$st" 1 "report -o planted link"
assert_contains "$TMP/err" "cannot write $S/planted.folded: it $MSG_LINK"
victim_intact "report -o"
assert_eq "$(find "$S" -name '.*' -type f | wc -l)" 0 "temporary files left in $S"
assert_eq "$(readlink "$S/planted.folded")" "$VICTIM" "the planted link itself"

# 2. A folder on the way that is another user's link: refused, named.
mkdir "$TMP/private/d"
plant "$TMP/private/d" "$S/dlink"
st=0
"$NUPP_BPF" report "$TMP/in.folded" -o "$S/dlink/out.folded" 2>"$TMP/err" || st=$?
assert_eq "$st" 1 "report -o through a planted folder link"
assert_contains "$TMP/err" "cannot write $S/dlink/out.folded: $S/dlink $MSG_LINK"
[ ! -e "$TMP/private/d/out.folded" ] || fail "wrote through the planted folder link"

# 3. Our own links are followed (root's here): the target is replaced, the link stays.
ln -s "$TMP/private/mine.folded" "$S/mine.folded"
"$NUPP_BPF" report "$TMP/in.folded" -o "$S/mine.folded"
[ -L "$S/mine.folded" ] || fail "our own link was replaced instead of followed"
assert_eq "$(head -1 "$TMP/private/mine.folded")" "main;work;f 30" "our link's target"

# 4. diff -o a planted link: refused before comparing (exit 2), the target untouched.
plant "$VICTIM" "$S/planted.svg"
st=0
"$NUPP_BPF" diff "$TMP/base.json" "$TMP/base.json" -o "$S/planted.svg" 2>"$TMP/err" || st=$?
assert_eq "$st" 2 "diff -o planted link"
assert_contains "$TMP/err" "cannot write $S/planted.svg: it $MSG_LINK"
victim_intact "diff -o"

# 5. record --aborts planted before the run: refused before recording.
plant "$VICTIM" "$S/planted.csv"
st=0
"$NUPP_BPF" record -q -F 199 -o "$S/ok.json" --aborts "$S/planted.csv" -- \
  "$NUPP_LUAJIT" "$TMP/busy.lua" 1 2>"$TMP/err" || st=$?
assert_eq "$st" 1 "record --aborts planted link"
assert_contains "$TMP/err" "cannot write $S/planted.csv: it $MSG_LINK"
victim_intact "record --aborts"
[ ! -e "$S/ok.json" ] || fail "record wrote outputs although it refused to start"

# 6. Links planted and a folder swapped for a link while record runs: those outputs fail
# at the end (exit 1, each named), every other output is complete, nothing is written
# through the links.
runuser -u nobody -- mkdir "$S/sub"
"$NUPP_BPF" record -F 199 -o "$S/late.folded" -o "$S/sub/out.json" -o "$S/good.json" \
  --aborts "$S/good.csv" -- "$NUPP_LUAJIT" "$TMP/busy.lua" 4 2>"$TMP/rec.err" & rec=$!
wait_recording "$TMP/rec.err"
plant "$VICTIM" "$S/late.folded"
runuser -u nobody -- mv "$S/sub" "$S/sub.old"
plant "$TMP/private/d" "$S/sub"
st=0
wait "$rec" || st=$?
assert_eq "$st" 1 "record with outputs turned into links during the run"
assert_contains "$TMP/rec.err" "cannot write $S/late.folded: it $MSG_LINK"
assert_contains "$TMP/rec.err" "cannot write $S/sub/out.json: $S/sub $MSG_LINK"
victim_intact "record -o planted during the run"
[ ! -e "$TMP/private/d/out.json" ] || fail "record wrote through the swapped folder"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["meta"]["samples"] > 0 and d["meta"]["samples"] == sum(r["count"] for r in d["samples"]), d["meta"]' \
  "$S/good.json" || fail "good.json is not a complete profile"
head -1 "$S/good.csv" | grep -q '^severity,count,reason,location,zonePath' || fail "good.csv was not written"

# 7. Under sudo: new outputs belong to the sudo user, a rewrite keeps a trusted owner, and
# the sudo user's own link is followed.
export SUDO_UID=$NOBODY SUDO_GID=$NOGROUP
"$NUPP_BPF" report "$TMP/in.folded" -o "$S/sudo.svg" -o "$S/sudo.folded"
assert_eq "$(stat -c '%u:%g' "$S/sudo.svg")" "$NOBODY:$NOGROUP" "owner of a new output under sudo"
assert_eq "$(stat -c '%u:%g' "$S/sudo.folded")" "$NOBODY:$NOGROUP" "owner of a new output under sudo"
touch "$S/rootfile.folded"
chmod 640 "$S/rootfile.folded"
"$NUPP_BPF" report "$TMP/in.folded" -o "$S/rootfile.folded"
assert_eq "$(stat -c '%U %a' "$S/rootfile.folded")" "root 640" "a root-owned output rewritten under sudo"
runuser -u nobody -- mkdir "$S/nobodys"
plant "$S/nobodys/target.folded" "$S/sudo-link.folded"
"$NUPP_BPF" report "$TMP/in.folded" -o "$S/sudo-link.folded"
[ -L "$S/sudo-link.folded" ] || fail "the sudo user's link was replaced instead of followed"
assert_eq "$(stat -c '%u' "$S/nobodys/target.folded")" "$NOBODY" "owner of the sudo user's link target"
"$NUPP_BPF" record -q -F 199 -o "$S/sudo-rec.json" -- "$NUPP_LUAJIT" "$TMP/busy.lua" 1
assert_eq "$(stat -c '%u:%g' "$S/sudo-rec.json")" "$NOBODY:$NOGROUP" "owner of record's output under sudo"
unset SUDO_UID SUDO_GID
"$NUPP_BPF" report "$TMP/in.folded" -o "$S/plain.folded"
assert_eq "$(stat -c '%U' "$S/plain.folded")" "root" "owner of an output without sudo"

# 8. The binding: session:stop(path) at a planted link raises with the link named, on the
# bpf and the vm backends; the target is untouched.
for backend in bpf vm; do
  plant "$VICTIM" "$S/lua-$backend.json"
  cat >"$TMP/stop.lua" <<EOF
local profile = require("nupp.profile")
local s = profile.sample({ backend = "$backend", intervalMs = 5 })
local t = os.clock() while os.clock() - t < 0.3 do end
local ok, e = pcall(s.stop, s, "$S/lua-$backend.json")
assert(not ok, "stop(path) wrote through a planted link")
io.write(tostring(e), "\n")
EOF
  "$NUPP_LUAJIT" "$TMP/stop.lua" >"$TMP/lua.out" 2>&1 || { cat "$TMP/lua.out"; fail "binding $backend"; }
  assert_contains "$TMP/lua.out" "cannot write $S/lua-$backend.json: it $MSG_LINK"
  victim_intact "session:stop(path), $backend backend"
done
# ... and writes a path that is safe, the text report too.
cat >"$TMP/stop2.lua" <<EOF
local profile = require("nupp.profile")
local s = profile.sample({ backend = "vm", intervalMs = 5 })
local t = os.clock() while os.clock() - t < 0.3 do end
s:stop("$S/lua-ok.txt")
EOF
"$NUPP_LUAJIT" "$TMP/stop2.lua"
[ -s "$S/lua-ok.txt" ] || fail "session:stop(path) did not write $S/lua-ok.txt"

echo "ok: planted links refused and named, own and sudo links followed, sudo ownership, binding"
