-- Sampler test workload: a Lua stack of N + 3 frames (pmain, the main chunk, f1 .. fN,
-- leaf) where every f is a prototype of its own, so a walk with a cold frame cache reads
-- and notes each of them; leaf burns the CPU. jit.off: every frame is an interpreter
-- frame. stdin gates the start and the exit; stdout gets the CPU seconds spent in the loop.
-- arg[1] = CPU seconds to run, arg[2] = N (default 200).
jit.off()
local seconds = tonumber(arg[1]) or 2
local n = tonumber(arg[2]) or 200
local clock = os.clock

local function leaf(k)
  local x = 0
  for i = 1, k do
    x = x + i % 7
  end
  return x
end

-- f1 .. fN, each a function of its own source line in one chunk: fI calls fI+1, fN leaf.
local src = { "local leaf = ...\nlocal f = {}\n" }
for i = n, 1, -1 do
  src[#src + 1] = ("f[%d] = function(k) local r = %s(k) return r end\n"):format(i, i == n and "leaf" or ("f[" .. (i + 1) .. "]"))
end
src[#src + 1] = "return f[1]\n"
local f1 = assert(load(table.concat(src), "=deep_distinct.lua"))(leaf)

io.read(1)
local t0 = clock()
repeat
  f1(2000000)
until clock() - t0 > seconds
print(string.format("%.6f", clock() - t0))
io.stdout:flush()
io.read("*a")
