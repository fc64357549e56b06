-- Benchmark workload: a hot loop at a fixed Lua stack depth, for the sampler's cost per
-- sample. usage: luajit depth.lua DEPTH SECONDS [interp|jit] [same|distinct|churn|many] [N]
-- A sample of the loop walks DEPTH frames: the luajit CLI's C function pmain, the main
-- chunk, DEPTH-3 Lua calls, and the loop function leaf on top. "same" recurses through
-- one function (one GCfunc, one call site); "distinct" goes through DEPTH-3 closures of
-- different prototypes (generated chunks f1, f2, ...); "churn" is "distinct" whose loop
-- also compiles a small chunk every 20,000 iterations and drops it, so prototypes are
-- freed all the time (a few thousand a second); "many" defines N (3000) prototypes g1..gN
-- and goes down random paths through them: each descent calls DEPTH-4 of them, each one
-- picked at random by the one above, then a short loop (about 50 us) at depth DEPTH.
-- "interp" runs everything in the interpreter; "jit" lets the loop become a trace (the
-- walk then starts at jit_base).
local usage = "usage: depth.lua DEPTH SECONDS [interp|jit] [same|distinct|churn|many] [N]"
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

-- The churn loop: leaf's, with a chunk compiled and dropped every 20,000 iterations (the
-- collector frees its prototype a little later).
local function churn_leaf()
  local stop, x, load = clock() + secs, 0, loadstring
  repeat
    for j = 1, 50 do
      for i = 1, 20000 do x = x + i % 7 end
      x = x + load("return " .. j)()
    end
  until clock() > stop
  return x
end

local first
if shape == "many" then
  -- N prototypes; each calls one picked at random, down to the short loop.
  local n, F, rnd = tonumber(arg[5]) or 3000, {}, math.random
  assert(depth >= 5, "DEPTH is at least 5 for many (pmain, main chunk, run, one g, leaf)")
  local function short()
    local x = 0
    for i = 1, 20000 do x = x + i % 7 end
    return x
  end
  for i = 1, n do
    local src = ("local F, short, rnd, n = ... return function(k) local r%d if k == 0 then " ..
      "r%d = short() else r%d = F[rnd(n)](k - 1) end return r%d end"):format(i, i, i, i)
    F[i] = assert(loadstring(src, "=g" .. i))(F, short, rnd, n)
  end
  first = function()
    local stop, x = clock() + secs, 0
    repeat
      for _ = 1, 10 do
        local r = F[rnd(n)](depth - 5) -- run, g x (DEPTH-4), short: DEPTH-2 Lua frames
        x = x + r
      end
    until clock() > stop
    return x
  end
elseif shape == "same" then
  -- One function and one call site: rec(n) .. rec(0), then leaf (no tail calls).
  local function rec(n)
    local r
    if n == 0 then r = leaf() else r = rec(n - 1) end
    return r
  end
  first = function() return rec(depth - 4) end -- a tail call: not a frame
else
  if shape == "churn" then leaf = churn_leaf end
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
