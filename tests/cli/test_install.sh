#!/usr/bin/env bash
# cmake --install: into a temporary prefix P, the installed nupp-bpf runs, and our LuaJIT
# loads the installed nupp.profile (with LUA_PATH="P/share/lua/5.1/?.lua;;", as the README
# says for a prefix other than /usr/local), whose config.lua names P's libnupp, which is
# the library it then loads. With the default prefix (DESTDIR, so nothing touches the
# system) the modules land in /usr/local/share/lua/5.1/nupp, which is on our LuaJIT's
# default path, ahead of the build tree's staged copy.
. "$(dirname "$0")/../support/lib.sh"
: "${NUPP_BINARY_DIR:?run this test through ctest}"

P="$TMP/prefix"
cmake --install "$NUPP_BINARY_DIR" --prefix "$P" >"$TMP/install.log" 2>&1 ||
  { cat "$TMP/install.log"; fail "cmake --install --prefix $P failed"; }
for f in bin/nupp-bpf lib/libnupp.so lib/libnupp.a include/nupp/nupp.h include/nupp/zone_abi.h \
  share/lua/5.1/nupp/profile.lua share/lua/5.1/nupp/zone.lua share/lua/5.1/nupp/config.lua \
  share/lua/5.1/nupp/cdef.lua; do
  [ -e "$P/$f" ] || fail "cmake --install did not install $f"
done

# The installed CLI runs on its own.
"$P/bin/nupp-bpf" --help >"$TMP/help" 2>&1 || { cat "$TMP/help"; fail "installed nupp-bpf --help"; }
assert_contains "$TMP/help" "USAGE"
"$P/bin/nupp-bpf" --version >"$TMP/version" 2>&1 || fail "installed nupp-bpf --version"

# The installed generated declarations are the build's.
cmp "$P/share/lua/5.1/nupp/cdef.lua" "$NUPP_BINARY_DIR/lua/cdef.lua" || fail "installed cdef.lua differs from the build's"

# Our LuaJIT with the README's LUA_PATH for a non-default prefix: every nupp module comes
# from P, config.lua names P's libnupp, and that is the libnupp nupp.profile loads.
cat >"$TMP/check.lua" <<'LUA'
local P = assert(arg[1])
local dir = P .. "/share/lua/5.1/nupp/"
for _, m in ipairs({ "profile", "zone", "config", "cdef" }) do
  local found = package.searchpath("nupp." .. m, package.path)
  assert(found == dir .. m .. ".lua", "nupp." .. m .. " resolves to " .. tostring(found))
end
local profile = require("nupp.profile")
local cfg = require("nupp.config")
assert(cfg.libnupp == P .. "/lib/libnupp.so", "config.lua names " .. tostring(cfg.libnupp))
local av, why = profile.available()
-- libnupp loaded (whether BPF can run here is another matter: why.bpf then says so).
assert(not (why.bpf or ""):find("cannot load", 1, true) and not (why.bpf or ""):find("nupp.cdef", 1, true),
  "libnupp did not load: " .. tostring(why.bpf))
local maps = io.open("/proc/self/maps"):read("*a")
assert(maps:find(P .. "/lib/libnupp.so", 1, true), "the libnupp mapped is not P's")
assert(not maps:find(os.getenv("NUPP_BINARY_DIR") .. "/libnupp.so", 1, true), "the build tree's libnupp is mapped too")
print("installed nupp.profile loads " .. cfg.libnupp .. "; backends: " .. table.concat(av, ","))
LUA
LUA_PATH="$P/share/lua/5.1/?.lua;;" "$NUPP_LUAJIT" "$TMP/check.lua" "$P" || fail "our LuaJIT and the installed modules"

# Without LUA_PATH, P is not on our LuaJIT's path: it loads the build tree's staged copy.
found=$(env -u LUA_PATH "$NUPP_LUAJIT" -e 'print(package.searchpath("nupp.profile", package.path))')
assert_eq "$found" "$NUPP_LUAJIT_PREFIX/share/lua/5.1/nupp/profile.lua" "nupp.profile without LUA_PATH"

# The default prefix, staged under DESTDIR: /usr/local/share/lua/5.1 is on our LuaJIT's
# default path ahead of the staged copy, and config.lua names /usr/local's libnupp.
D="$TMP/dest"
DESTDIR="$D" cmake --install "$NUPP_BINARY_DIR" --prefix /usr/local >"$TMP/install2.log" 2>&1 ||
  { cat "$TMP/install2.log"; fail "cmake --install --prefix /usr/local with DESTDIR failed"; }
[ -f "$D/usr/local/share/lua/5.1/nupp/profile.lua" ] || fail "default prefix: no share/lua/5.1/nupp/profile.lua"
[ -f "$D/usr/local/bin/nupp-bpf" ] && [ -f "$D/usr/local/lib/libnupp.so" ] || fail "default prefix: nupp-bpf, libnupp"
assert_contains "$D/usr/local/share/lua/5.1/nupp/config.lua" 'libnupp = "/usr/local/lib/libnupp.so"'
env -u LUA_PATH "$NUPP_LUAJIT" -e '
  local p, i = package.path, 0
  local a = p:find("/usr/local/share/lua/5.1/?.lua", 1, true)
  local b = p:find(os.getenv("NUPP_LUAJIT_PREFIX") .. "/share/lua/5.1/?.lua", 1, true)
  assert(a and b and a < b, "default path: " .. p)' || fail "/usr/local/share/lua/5.1 is not on our LuaJIT's default path first"
echo "PASS: cmake --install into $P and into the default prefix"
