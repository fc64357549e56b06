-- Sampler test workload: short-lived prototypes at reused addresses. The same chunk text
-- is loaded under two names (each name a fresh string), run, dropped and collected, over
-- and over, so each new prototype, closure and chunk-name string reuses the memory of
-- the last ones, called from the same call site. chunkA runs 3 times as many iterations
-- as chunkB. A profiler that names frames from the target's memory after the fact names
-- one chunk's samples with the other's name, or with a recycled string. The workload
-- measures each chunk's CPU time with os.clock. Between rounds it calls table.remove, a
-- builtin written in Lua bytecode (lib_read_lfunc), named "remove" as jit.p names it.
-- stdin gates the start and the exit; stdout gets "A B": the seconds in chunkA and chunkB.
-- arg[1] = CPU seconds to run.
jit.off() -- interpreted: every sample's leaf is the chunk's own frame
local seconds = tonumber(arg[1]) or 4
local src = "local n = ... local x = 0 for i = 1, n do x = x + i % 7 end return x"
local clock = os.clock
local spent = { A = 0, B = 0 }

local function run(name, n)
  local f = assert(loadstring(src, "=chunk" .. name))
  local t0 = clock()
  f(n) -- the same call site for both chunks
  spent[name] = spent[name] + clock() - t0
end

io.read(1)
local stop = clock() + seconds
repeat
  run("A", 300000)
  run("B", 100000)
  collectgarbage() -- frees both prototypes and their names (luajit:proto_free)
  local t = {}
  for i = 1, 20000 do t[i] = i end
  for _ = 1, 20000 do table.remove(t) end
until clock() > stop
print(string.format("%.6f %.6f", spent.A, spent.B))
io.stdout:flush()
io.read("*a")
