-- Sampler test workload: code made and collected without pause. Each round loads a chunk
-- of 21 functions (its main function and M.f1 .. M.f20, on lines 2 to 21) under the name
-- chunkA, runs its functions, then the same text under the name chunkB, running chunkB's
-- a third as long; the chunks are collected every 20 rounds, so new prototypes keep
-- taking the addresses of freed ones. The JIT compiles the hot loops of each round's
-- functions anew. Prints "MADE A B": the prototypes made (21 a chunk, by construction)
-- and the CPU seconds spent in each chunk's functions (os.clock).
-- arg[1] = CPU seconds to run.
local parts = { "local M = {}" }
for i = 1, 20 do
  parts[#parts + 1] = ("function M.f%d(n) local s = 0 for i = 1, n do s = s + (i * %d) %% 7 end return s end")
    :format(i, i)
end
parts[#parts + 1] = "return M"
local src = table.concat(parts, "\n")
local clock = os.clock
local spent, made, rounds = { A = 0, B = 0 }, 0, 0
local stop = clock() + (tonumber(arg[1]) or 3)

local function round(name, n)
  local M = assert(loadstring(src, "=chunk" .. name))()
  made = made + 21
  local t0 = clock()
  for i = 1, 20 do M["f" .. i](n) end
  spent[name] = spent[name] + clock() - t0
end

repeat
  round("A", 1500)
  round("B", 500)
  rounds = rounds + 1
  if rounds % 20 == 0 then collectgarbage() end
until clock() > stop
print(string.format("%d %.6f %.6f", made, spent.A, spent.B))
