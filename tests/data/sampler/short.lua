-- Sampler test workload: a program that runs for about 50 ms of CPU and exits. Its
-- frames are named from what the profiler copied while it lived: a global function
-- (named by a string constant of its caller), a local one (named by its caller's debug
-- information), a compiled loop and a builtin. Prints its CPU seconds on stderr.
local clock = os.clock
local t0 = clock()

local function mix(x, i)
  return (x * 31 + i) % 1000003
end

function churn(n)
  local x = 0
  for i = 1, n do
    x = mix(x, i)
  end
  return x
end

local s = 0
repeat
  s = s + churn(20000) + #tostring(s)
until clock() - t0 > 0.05
io.stderr:write(string.format("cpu %.6f\n", clock() - t0))
