-- Sampler test workload: three call paths whose CPU split the workload measures itself
-- with os.clock. stdin gates the start and the exit; stdout gets the measured seconds.
-- arg[1] = CPU seconds to run.
local seconds = tonumber(arg[1]) or 6
local clock = os.clock

local function path_interp(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
jit.off(path_interp)

local function path_jit(n)
  local s = 0
  for i = 1, n do s = s + (i * 3) % 7 end
  return s
end

local function path_mixed(n)
  local t = {}
  for i = 1, n do t[#t + 1] = tostring(i) end
  return #table.concat(t)
end

io.read(1)
local spent = { 0, 0, 0 }
local t0 = clock()
while clock() - t0 < seconds do
  local a = clock()
  path_interp(100000)
  local b = clock()
  path_jit(1000000)
  local c = clock()
  path_mixed(5000)
  local d = clock()
  spent[1], spent[2], spent[3] = spent[1] + (b - a), spent[2] + (c - b), spent[3] + (d - c)
end
print(string.format("%.6f %.6f %.6f", spent[1], spent[2], spent[3]))
io.stdout:flush()
io.read("*a")
