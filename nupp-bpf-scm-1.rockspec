-- luarocks make installs nupp.profile and nupp.zone for any Lua 5.1 / LuaJIT 2.1. Without
-- nupp-bpf's libnupp (cmake --install) only the vm backend runs (jit.profile, jit.attach).
rockspec_format = "3.0"
package = "nupp-bpf"
version = "scm-1"
source = { url = "git+file:///nupp-bpf" }
description = {
  summary = "In-app profiling sessions for LuaJIT: where the time goes, and where the JIT gives up",
  detailed = [[
nupp.profile.sample() collects collapsed stacks by zone path; nupp.profile.trace() counts
JIT trace aborts by severity, reason, location and zone; nupp.zone opens zones as
jit.zone does. On nupp-bpf's LuaJIT with libnupp installed they run on BPF; elsewhere on
LuaJIT's own jit.profile and jit.attach.]],
  license = "GPL-2.0",
}
dependencies = { "lua >= 5.1" }
build = {
  type = "builtin",
  modules = {
    ["nupp.profile"] = "lua/nupp/profile.lua",
    ["nupp.zone"] = "lua/nupp/zone.lua",
  },
}
