-- Benchmark workload: a hot loop at a fixed Lua stack depth, for the sampler's cost per
-- sample. usage: luajit depth.lua DEPTH SECONDS [interp|jit] [same|distinct]
-- A sample of the loop walks DEPTH frames: the luajit CLI's C function pmain, the main
-- chunk, DEPTH-3 Lua calls, and the loop function leaf on top. "same" recurses through
-- one function (one GCfunc, one call site); "distinct" goes through DEPTH-3 closures of
-- different prototypes (generated chunks f1, f2, ...). "interp" runs everything in the
-- interpreter; "jit" lets the loop become a trace (the walk then starts at jit_base).
local usage = "usage: depth.lua DEPTH SECONDS [interp|jit] [same|distinct]"
local depth, secs = assert(tonumber(arg[1]), usage), assert(tonumber(arg[2]), usage)
local mode, shape = arg[3] or "interp", arg[4] or "same"
assert(depth >= 4, "DEPTH is at least 4 (pmain, main chunk, one call, leaf)")
if mode == "interp" then jit.off() else jit.on() end

-- The sampled loop: arithmetic only, the clock read once per million iterations.
local clock = os.clock
local function leaf()
  local stop, x = clock() + secs, 0
  repeat
    for i = 1, 1000000 do x = x + i % 7 end
  until clock() > stop
  return x
end

local first
if shape == "same" then
  -- One function and one call site: rec(n) .. rec(0), then leaf (no tail calls).
  local function rec(n)
    local r
    if n == 0 then r = leaf() else r = rec(n - 1) end
    return r
  end
  first = function() return rec(depth - 4) end -- a tail call: not a frame
else
  -- DEPTH-3 prototypes, f1 calls f2 ... the last calls leaf.
  local nxt = leaf
  for i = depth - 3, 1, -1 do
    local src = ("local nxt = ... return function() local r%d = nxt() return r%d end"):format(i, i)
    nxt = assert(loadstring(src, "=f" .. i))(nxt)
  end
  first = nxt
end
local r = first()
print(r)
