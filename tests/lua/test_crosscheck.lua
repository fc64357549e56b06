-- One workload profiled in-app with each backend: the top five functions' shares (of the
-- samples whose leaf frame is one of the workload's functions) agree within 5 points, and
-- each is within 4 of the shares known by construction (about 3 standard errors); and
-- one set of aborting loops traced with each gives the same rows (severity, reason and
-- location; the counts of the aborts before a blacklisting vary with LuaJIT's random
-- penalties, so the blacklist rows are compared by presence).
local profile = require("nupp.profile")
local av = profile.available()
local has = {}
for _, b in ipairs(av) do has[b] = true end
if not has.bpf then print("SKIP: the bpf backend cannot run here") os.exit(77) end

jit.off() -- every frame a real frame in both backends
local function spin(n) local s = 0 for i = 1, n do s = s + i end return s end
local w = {}
for i, n in ipairs({ 40, 25, 15, 10, 6, 4 }) do -- N below
  w[i] = assert(loadstring("local spin = ... return function() local r = spin(" .. n .. " * 100000) return r end", "=w" .. i))(spin)
end
-- Rounds of ~50 ms (w1 ~20 ms, w6 ~2 ms), the functions in a new random order each
-- round: a round as short as the sampling interval, or one order repeated in step with
-- it, would alias with the timer and bias the shares of whichever backend it locks on.
local function run(secs)
  local t0, order = os.clock(), {}
  for i = 1, #w do order[i] = i end
  while os.clock() - t0 < secs do
    for i = #order, 2, -1 do local j = math.random(i) order[i], order[j] = order[j], order[i] end
    for i = 1, #order do w[order[i]]() end
  end
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
-- The truth, by construction: w_i does N[i] of every 100 iterations of spin.
local N = { 40, 25, 15, 10, 6, 4 }
local worst, off = 0, 0
for i = 1, 5 do
  local k = "w" .. i
  local d = math.abs((b[k] or 0) - (v[k] or 0))
  print(string.format("%s truth %d%% bpf %.1f%% vm %.1f%% diff %.1f", k, N[i], b[k] or 0, v[k] or 0, d))
  worst = math.max(worst, d)
  off = math.max(off, math.abs((b[k] or 0) - N[i]), math.abs((v[k] or 0) - N[i]))
end
print(string.format("furthest from the truth: %.1f points", off))
if off > 4 then print("FAIL: a backend's share is more than 4 points from the truth") os.exit(1) end
print(string.format("samples: bpf %d, vm %d; worst difference %.1f points", nb, nv, worst))
if nb < 500 or nv < 200 then print("FAIL: too few samples") os.exit(1) end
if worst > 5 then print("FAIL: shares differ by more than 5 points") os.exit(1) end

-- Aborts: an FNEW loop run until blacklisted and one run too briefly for that, in two
-- zones; the same chunks, flushed, under each backend.
local zone = require("nupp.zone")
local CHUNKS = {
  { "blist", "local s = 0 for i = 1, 300000 do s = s + (function() return i end)() end return s", "hot" },
  { "few", "local s = 0 for i = 1, 200 do s = s + (function() return i end)() end return s", "cold/a" },
}
local function trace_rows(backend)
  jit.on() jit.flush()
  local t = profile.trace({ backend = backend })
  for _, c in ipairs(CHUNKS) do
    zone(c[3]) assert(loadstring(c[2], "=" .. c[1]))() zone()
  end
  local r = t:stop()
  local rows = {}
  for _, st in ipairs(r.sites) do
    rows[st.severity .. " | " .. st.reason .. " | " .. st.location .. " | " .. st.zonePath] = st.count
  end
  return rows, r
end
local tb, rb = trace_rows("bpf")
local tv, rv = trace_rows("vm")
local keys = {}
for k in pairs(tb) do keys[k] = true end
for k in pairs(tv) do keys[k] = true end
local differ = 0
for k in pairs(keys) do
  print(string.format("abort row %-70s bpf %s vm %s", k, tostring(tb[k]), tostring(tv[k])))
  if not tb[k] or not tv[k] then differ = differ + 1 end
end
if differ > 0 then print("FAIL: " .. differ .. " abort rows in one backend only") os.exit(1) end
if rb.blacklisted < 1 or rv.blacklisted < 1 then print("FAIL: the FNEW loop was not blacklisted") os.exit(1) end
print("PASS: backends agree")
