-- A CI benchmark of three functions with a known cost each: alpha, beta and gamma run
-- the same compiled numeric loop for the same number of iterations, so each takes a
-- third of the samples. Arguments change one function:
--   slow=NAME     NAME runs 3x the iterations (its share goes from 1/3 to 3/5)
--   jitoff=NAME   NAME's loop runs interpreted (jit.off) for half the iterations,
--                 which takes about as long: its share stays near 1/3, its code stops
--                 compiling
-- usage: luajit bench.lua [slow=NAME] [jitoff=NAME]; BENCH_N sets the iterations.
local N = tonumber(os.getenv("BENCH_N")) or 2e8
local slow, off = {}, {}
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^(%w+)=(%w+)$")
  if k == "slow" then slow[v] = true elseif k == "jitoff" then off[v] = true end
end

local function alpha(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

local function beta(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

local function gamma(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

if off.alpha then jit.off(alpha) end
if off.beta then jit.off(beta) end
if off.gamma then jit.off(gamma) end

-- The iterations of one round of a function.
local function iters(name)
  local n = N / 10
  if slow[name] then n = n * 3 end
  if off[name] then n = n / 2 end
  return n
end

-- Ten rounds, so each function's samples are spread over the run. Called by name, so
-- frames read bench.lua:alpha (as jit.p names them).
local total = 0
for _ = 1, 10 do
  total = total + alpha(iters("alpha"))
  total = total + beta(iters("beta"))
  total = total + gamma(iters("gamma"))
end
print(total)
