#!/usr/bin/env bash
# Runs tests/lua/profile_suite.lua (the nupp.profile API) one way:
#   bpf           our LuaJIT as root, the bpf backend demanded
#   vm            our LuaJIT, the vm backend demanded
#   unprivileged  our LuaJIT as nobody (setpriv): the module must fall back on vm itself
#   nosysadmin    our LuaJIT as nobody with CAP_BPF + CAP_PERFMON + CAP_SYS_PTRACE only: not
#                 enough for uprobes on this kernel, so vm, and why.bpf names CAP_SYS_ADMIN
#   debian        Debian's /usr/bin/luajit with the modules installed by `luarocks make`
#   unpatched     Debian's /usr/bin/luajit, as root, with our build's modules (whose config
#                 names libnupp): bpf refused because that LuaJIT has no probes, so vm
. "$(dirname "$0")/../support/lib.sh"
mode=${1:?usage: run_suite.sh bpf|vm|unprivileged|nosysadmin|debian|unpatched}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
chmod 1777 "$TMP"
export TMPDIR="$TMP"
case "$mode" in
  bpf) need_root; "$NUPP_LUAJIT" profile_suite.lua bpf ;;
  vm) "$NUPP_LUAJIT" profile_suite.lua vm ;;
  unprivileged)
    command -v setpriv >/dev/null || { echo "SKIP: setpriv is missing (util-linux)"; exit 77; }
    [ "$(id -u)" = 0 ] || { echo "SKIP: needs root to drop to nobody"; exit 77; }
    EXPECT=vm setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
      "$NUPP_LUAJIT" profile_suite.lua auto ;;
  nosysadmin)
    command -v setpriv >/dev/null || { echo "SKIP: setpriv is missing (util-linux)"; exit 77; }
    [ "$(id -u)" = 0 ] || { echo "SKIP: needs root to hand capabilities to nobody"; exit 77; }
    caps=-all,+bpf,+perfmon,+sys_ptrace
    EXPECT=vm EXPECT_WHY="missing CAP_SYS_ADMIN (this kernel wants it for uprobes: creating a uprobe|run as root (sudo), or grant" \
      setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=$caps --ambient-caps=$caps \
      "$NUPP_LUAJIT" profile_suite.lua auto ;;
  debian)
    command -v luarocks >/dev/null || fail "luarocks is missing: run scripts/bootstrap"
    [ -x /usr/bin/luajit ] || fail "/usr/bin/luajit is missing: run scripts/bootstrap"
    (cd "$NUPP_SOURCE_DIR" && luarocks make --tree "$TMP/rocks" nupp-bpf-scm-1.rockspec) >"$TMP/rocks.log" 2>&1 ||
      { cat "$TMP/rocks.log"; fail "luarocks make failed"; }
    [ -f "$TMP/rocks/share/lua/5.1/nupp/profile.lua" ] || fail "luarocks did not install nupp/profile.lua"
    eval "$(luarocks path --tree "$TMP/rocks")"
    export LUA_PATH="$LUA_PATH;;" # and LuaJIT's own jit/*.lua where Debian keeps them
    EXPECT=vm /usr/bin/luajit profile_suite.lua auto ;;
  unpatched)
    need_root
    [ -x /usr/bin/luajit ] || fail "/usr/bin/luajit is missing: run scripts/bootstrap"
    LUA_PATH="$NUPP_LUAJIT_PREFIX/share/lua/5.1/?.lua;;" EXPECT=vm \
      EXPECT_WHY="/usr/bin/luajit has no nupp-bpf probes and layout (an unpatched LuaJIT)|run the program with our build" \
      /usr/bin/luajit profile_suite.lua auto ;;
  *) fail "unknown mode $mode" ;;
esac
