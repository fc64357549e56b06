-- Sampler test workload: a compiled loop (var_user, lines 16-18) calling a vararg
-- function (sum3, lines 6-12) that the trace inlines; guards of the trace lie inside
-- sum3 (its branch on line 8), so sum3 is a frame of its own in the samples.
-- arg[1] = CPU seconds to run (os.clock).
local seconds = tonumber(arg and arg[1]) or 6
local function sum3(a, ...)
  local b, c = ...
  if b > 3 then
    return a * 0.5 + c
  end
  return a + b * 3 + c
end

local function var_user(n)
  local s = 0
  for i = 1, n do
    s = s + sum3(i, i % 5, 2)
  end
  return s
end

local t0, total = os.clock(), 0
while os.clock() - t0 < seconds do
  total = total + var_user(100000)
end
print(total > 0)
