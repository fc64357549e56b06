-- Benchmark workload: a stack of N DISTINCT Lua functions (one prototype each, no
-- recursion), the leaf doing the work in a compiled loop, so every sample walks N
-- different frames. usage: luajit deep_distinct.lua [N=32] [CPU seconds=3]
local N, secs = tonumber(arg and arg[1]) or 32, tonumber(arg and arg[2]) or 3
local fs = {}
for i = N, 1, -1 do
  -- load() gives each level its own prototype, chunk "=deepI", function name "f".
  fs[i] = assert(load(([[
    local nxt = ...
    local function f(n)
      if nxt then return nxt(n) + %d end
      local s = 0
      for j = 1, n do s = s + j %% 7 end
      return s
    end
    return f]]):format(i), "=deep" .. i))(fs[i + 1])
end
local t0, sink = os.clock(), 0
while os.clock() - t0 < secs do sink = sink + fs[1](20000) end
print(sink % 1000)
