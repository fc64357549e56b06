-- Sampler test workload: a hot compiled loop whose header and body are on different
-- lines, with a function inlined into its trace.
-- stdin gates the start and the exit; stdout says when the work is done.
-- arg[1] = CPU seconds to run.
--
-- A sample inside the trace names the snapshot whose machine code holds the IP (LuaJIT's
-- lj_trace_unwind rule); the code of a snapshot is what was recorded from it up to the
-- next one, so a line is exact when a snapshot starts it and its work stays on it:
--   line 29: starts the loop part of the trace (the loop snapshot's PC is the body's
--            first bytecode);
--   lines 30, 31, 32 and inner's line 22: start with a comparison guard, which takes a
--            snapshot (resuming at the branch not taken; nupp names the comparison);
-- each keeps its work (two dependent square roots, then a multiply that absorbs the
-- skid of the sample IP) on that line. The loop header (line 28) owns the FORL's
-- compare-and-branch; its increment is recorded before the FORL's snapshot and so
-- runs in line 32's code. math.sqrt is inlined (sqrtsd): no C helper is called.
-- tests/integration/test_sampler_hotloop.c names these lines: keep them in place.
local seconds = tonumber(arg[1]) or 4
local sqrt = math.sqrt

local function inner(a, s)
  if a < 0 then a = -a end; local r = sqrt(sqrt(a + s)); s = r * 0.5
  return s
end

local function hot(n, t)
  local s = 0.5
  for i = 1, n do
    local a = sqrt(sqrt(t[i % 64 + 1] + s)) * 0.5
    if a > 1e300 then a = 0 end; local b = sqrt(sqrt(a + 1.25)) * 0.5
    if b > 1e300 then b = 0 end; s = inner(b, s)
    if s > 1e300 then s = 0 end; s = sqrt(sqrt(s + 0.125)) * 0.5
  end
  return s
end

io.read(1)
local t = {}
for i = 1, 64 do t[i] = i end
local t0 = os.clock()
while os.clock() - t0 < seconds do hot(300000, t) end
print("done")
io.stdout:flush()
io.read("*a")
