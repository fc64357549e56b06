-- Monotonic wall clock for the benchmark workloads (clock_gettime through the FFI), so
-- a workload reports its own run time, free of the profiler's start-up and tear-down.
local ffi = require("ffi")
ffi.cdef [[
struct nupp_bench_ts { long sec, nsec; };
int clock_gettime(int clk, struct nupp_bench_ts *ts);
]]
local ts = ffi.new("struct nupp_bench_ts")
return function()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.sec) + tonumber(ts.nsec) * 1e-9
end
