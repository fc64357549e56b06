-- A push/pop pair of nupp.zone against one of LuaJIT's jit.zone, compiled and interpreted:
--   build/luajit/bin/luajit tests/bench/bench_zone.lua [pairs]
-- Prints ns per pair, alternating the two five times (CPU time, os.clock), and the median.
local nzone = require("nupp.zone")
local jzone = require("jit.zone")
local N = tonumber(arg[1]) or 2000000
print("nupp.zone exports its ids (our LuaJIT): " .. tostring(nzone.exported()))

local function run(z, n)
  local t0 = os.clock()
  for _ = 1, n do z("frame") z() end
  return (os.clock() - t0) / n * 1e9
end

local function median(t) table.sort(t) return t[math.ceil(#t / 2)] end
for _, mode in ipairs({ "compiled", "interpreted" }) do
  if mode == "interpreted" then jit.off() jit.flush() else jit.on() end
  local a, b = {}, {}
  run(nzone, N / 10) run(jzone, N / 10) -- warm up
  for _ = 1, 5 do
    a[#a + 1] = run(nzone, N)
    b[#b + 1] = run(jzone, N)
  end
  print(string.format("%-12s nupp.zone %6.1f ns/pair   jit.zone %6.1f ns/pair   ratio %.2f", mode,
    median(a), median(b), median(a) / median(b)))
end
