-- Sampler test workload whose call graph is known by construction (see callgraph.expect).
-- arg[1] = role ("main"/"thread"), arg[2] = CPU seconds to run (os.clock).
local seconds = tonumber(arg[2]) or 3

local function leaf_interp(n)
  local s = 0
  for i = 1, n do s = s + i % 3 end
  return s
end
jit.off(leaf_interp)

local function hot_loop(n)
  local s = 0
  for i = 1, n do s = s + (i * 3) % 7 end
  return s
end

local function use_ff(n)
  local s = 0
  for i = 1, n do s = s + math.floor(i / 3) + #string.rep("x", 8) end
  return s
end
jit.off(use_ff) -- keep the builtins as frames (a trace would inline them)

local function cmp(a, b)
  return a < b
end

local function sorter(n)
  local t = {}
  for i = 1, n do t[i] = (i * 7919) % 1000 end
  table.sort(t, cmp)
  return t[1]
end

local function vararg_fn(...)
  local s = 0
  for i = 1, select("#", ...) do s = s + leaf_interp((select(i, ...))) end
  return s
end

local mt = { __index = function(t, k) return leaf_interp(k) end }

local function meta(n)
  local o = setmetatable({}, mt)
  return o[n]
end

local function protected(n)
  local ok, v = pcall(leaf_interp, n)
  return v
end

local gen = coroutine.wrap(function(n)
  while true do n = coroutine.yield(leaf_interp(n)) end
end)

-- No tail calls below: a tail call replaces the caller's frame (BC_CALLT), so the
-- caller would rightly be absent from the stack.
local function co(n)
  local r = gen(n)
  return r
end

local function c_call(n)
  local r = host.spin(n)
  return r
end

local function c_callback(n)
  local r = host.callback(leaf_interp, n)
  return r
end

local function step()
  leaf_interp(3000)
  hot_loop(30000)
  use_ff(300)
  sorter(300)
  vararg_fn(1000, 1000, 1000)
  meta(2000)
  protected(2000)
  co(2000)
  c_call(30000)
  c_callback(2000)
end

local t0 = os.clock()
while os.clock() - t0 < seconds do step() end
