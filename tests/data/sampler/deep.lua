-- Sampler test workload: a Lua stack 100 frames deep (pmain, the main chunk, 97 frames of
-- rec, leaf), where leaf burns the CPU. jit.off: every frame is an interpreter frame.
-- stdin gates the start and the exit; stdout gets the CPU seconds spent in the loop.
-- arg[1] = CPU seconds to run.
jit.off()
local seconds = tonumber(arg[1]) or 2
local clock = os.clock

local function leaf(n)
  local x = 0
  for i = 1, n do
    x = x + i % 7
  end
  return x
end

local function rec(d, n)
  if d == 0 then
    local x = leaf(n)
    return x
  end
  local r = rec(d - 1, n)
  return r
end

io.read(1)
local t0 = clock()
repeat
  rec(96, 2000000)
until clock() - t0 > seconds
print(string.format("%.6f", clock() - t0))
io.stdout:flush()
io.read("*a")
