-- Sampler test workload: a hot compiled loop with multi-line `if`s, one never true, one
-- always true. stdin gates the start and the exit; stdout says when the work is done.
-- arg[1] = CPU seconds to run.
--
-- A comparison's snapshot resumes at the branch the trace does not take: line 19 for
-- the `if` on line 18, the loop's FORL (line 16) for the `if` on line 21; the code after
-- it runs the comparison. So no sample may name line 19, which never runs, and line 21
-- is not the loop header. Line 22 starts with a table load (guards) after the snapshot
-- taken where the trace enters the branch, so its work is its own. Lines are named by
-- tests/integration/test_sampler_hotloop.c.
local seconds = tonumber(arg[1]) or 4
local sqrt = math.sqrt

local function hot(n, t)
  local s = 0.5
  for i = 1, n do
    local a = sqrt(sqrt(t[i % 64 + 1] + s)) * 0.5
    if a > 1e300 then
      a = 0
    end
    if a < 1e300 then
      s = sqrt(sqrt(t[i % 32 + 1] + a)) * 0.5
    end
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
