-- Aborts in a loop, thousands of times a second, for bench_aborts.sh: a closure in a hot
-- loop aborts ("NYI: bytecode FNEW") and is penalized; jit.flush() clears the penalty
-- cache (lj_trace.c lj_trace_flushall) before the 11th abort would blacklist it.
-- usage: luajit abort_loop.lua [rounds]   (prints the number of abort events)
local rounds = tonumber(arg and arg[1]) or 2000
local aborts = 0
if os.getenv("ABORT_LOOP_COUNT") then
  jit.attach(function(what) if what == "abort" then aborts = aborts + 1 end end, "trace")
end
local s = 0
local function burst()
  for i = 1, 400 do s = s + (function() return i end)() end
end
for _ = 1, rounds do
  burst()
  jit.flush()
end
print(aborts)
