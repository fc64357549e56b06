-- Sampler test workload: a hot compiled loop with a function inlined into its trace.
-- stdin gates the start and the exit; stdout says when the work is done.
-- arg[1] = CPU seconds to run.
--
-- The loop is on one line on purpose: with LuaJIT's loop optimisation every snapshot of
-- the looping part of the trace has the PC of the loop's FORL (or of a guard), so a
-- snapshot can only place machine code on the lines of those bytecodes (see the report).
-- inner() has a guard (v > 1e9) after its frame was set up, so the trace has a snapshot inside it: that
-- code is attributed to inner's own (inlined) frame.
local seconds = tonumber(arg[1]) or 4

local function inner(t, i)
  local v = t[i % 64 + 1]
  if v > 1e9 then v = 0 end
  return v * 2
end

local function hot(n, t)
  local s = 0
  for i = 1, n do s = s + inner(t, i) end
  return s
end

io.read(1)
local t = {}
for i = 1, 64 do t[i] = i end
local t0 = os.clock()
while os.clock() - t0 < seconds do hot(3000000, t) end
print("done")
io.stdout:flush()
io.read("*a")
