-- Benchmark workload: Debian's luacheck (package lua-check) linting the files named on the
-- command line, run in this VM (as /usr/bin/luacheck would under lua5.1). On exit it
-- prints on stderr its wall time ("elapsed S", CLOCK_MONOTONIC from its first line), its
-- own CPU time ("cpu S", user + system of the process, from getrusage) and its voluntary
-- context switches ("nvcsw N"), so a profiler's start-up and tear-down are not counted.
-- usage: LUA_PATH=... LUA_CPATH=... luajit luacheck_run.lua --no-cache FILE...
local ffi = require("ffi")
local now = dofile((arg[0]:match("^(.*)/") or ".") .. "/clock.lua")
ffi.cdef [[
struct nupp_rusage { long utime_s, utime_us, stime_s, stime_us, maxrss, ixrss, idrss, isrss,
  minflt, majflt, nswap, inblock, oublock, msgsnd, msgrcv, nsignals, nvcsw, nivcsw; };
int getrusage(int who, struct nupp_rusage *r);
]]
local t0 = now()
local function report()
  local r = ffi.new("struct nupp_rusage")
  ffi.C.getrusage(0, r)
  io.stderr:write(("elapsed %.4f\ncpu %.4f\nnvcsw %d\n"):format(now() - t0,
    tonumber(r.utime_s) + tonumber(r.utime_us) / 1e6 + tonumber(r.stime_s) + tonumber(r.stime_us) / 1e6,
    tonumber(r.nvcsw)))
end
-- luacheck ends with os.exit(status): report first.
local exit = os.exit
os.exit = function(...) report(); io.stdout:flush(); return exit(...) end
arg[0] = "luacheck"
require("luacheck.main")
report()
