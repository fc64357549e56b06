-- One workload profiled in-app with each backend: the top five functions' shares (of the
-- samples whose leaf frame is one of the workload's functions) agree within 5 points.
local profile = require("nupp.profile")
local av = profile.available()
local has = {}
for _, b in ipairs(av) do has[b] = true end
if not has.bpf then print("SKIP: the bpf backend cannot run here") os.exit(77) end

jit.off() -- every frame a real frame in both backends
local function spin(n) local s = 0 for i = 1, n do s = s + i end return s end
local w = {}
for i, n in ipairs({ 40, 25, 15, 10, 6, 4 }) do
  w[i] = assert(loadstring("local spin = ... return function() local r = spin(" .. n .. " * 1000) return r end", "=w" .. i))(spin)
end
local function run(secs)
  local t0 = os.clock()
  while os.clock() - t0 < secs do for i = 1, #w do w[i]() end end
end

local function shares(backend)
  local s = profile.sample({ backend = backend, intervalMs = 2 })
  run(5)
  local r = s:stop()
  local by, total = {}, 0
  for line in r.text:gmatch("[^\n]+") do
    local st, n = line:match("^(.*) (%d+)$")
    local fn = st:match(";(w%d+):[^;]*;[^;]*$") -- the workload function, calling spin
    if fn then by[fn] = (by[fn] or 0) + tonumber(n) total = total + tonumber(n) end
  end
  for k, v in pairs(by) do by[k] = 100 * v / total end
  return by, total
end

local b, nb = shares("bpf")
local v, nv = shares("vm")
local worst = 0
for i = 1, 5 do
  local k = "w" .. i
  local d = math.abs((b[k] or 0) - (v[k] or 0))
  print(string.format("%s bpf %.1f%% vm %.1f%% diff %.1f", k, b[k] or 0, v[k] or 0, d))
  worst = math.max(worst, d)
end
print(string.format("samples: bpf %d, vm %d; worst difference %.1f points", nb, nv, worst))
if nb < 500 or nv < 200 then print("FAIL: too few samples") os.exit(1) end
if worst > 5 then print("FAIL: shares differ by more than 5 points") os.exit(1) end
print("PASS: backends agree")
