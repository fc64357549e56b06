-- nupp.zone's push/pop against LuaJIT's jit.zone, compiled and interpreted, in one process:
--   build/luajit/bin/luajit tests/bench/bench_zone.lua [pairs] [rounds]
-- Each round times `pairs` push/pop pairs of each module in turn (CPU time, os.clock),
-- alternating which goes first; the table gives the median ns per pair of the rounds and
-- their ratio, for a pair at depth 1 and for three nested pairs (per pair).
local nzone = require("nupp.zone")
local jzone = require("jit.zone")
local N = tonumber(arg[1]) or 1000000
local ROUNDS = tonumber(arg[2]) or 9
print("nupp.zone exports its ids (our LuaJIT): " .. tostring((nzone.exported())))

local function pair(z, n)
  local t0 = os.clock()
  for _ = 1, n do z("frame") z() end
  return (os.clock() - t0) / n * 1e9
end

local function nested(z, n)
  local t0 = os.clock()
  for _ = 1, n do z("frame") z("render") z("pass") z() z() z() end
  return (os.clock() - t0) / n / 3 * 1e9
end

local function median(t) table.sort(t) return t[math.ceil(#t / 2)] end

print("| mode | case | nupp.zone ns/pair | jit.zone ns/pair | ratio |")
print("|---|---|---|---|---|")
for _, mode in ipairs({ "compiled", "interpreted" }) do
  if mode == "interpreted" then jit.off() jit.flush() else jit.on() end
  for _, case in ipairs({ { "pair", pair }, { "3 nested", nested } }) do
    local f, a, b = case[2], {}, {}
    f(nzone, N / 10) f(jzone, N / 10) -- warm up (and compile)
    for r = 1, ROUNDS do
      if r % 2 == 1 then
        a[#a + 1] = f(nzone, N) b[#b + 1] = f(jzone, N)
      else
        b[#b + 1] = f(jzone, N) a[#a + 1] = f(nzone, N)
      end
    end
    print(string.format("| %s | %s | %.1f | %.1f | %.2f |", mode, case[1], median(a), median(b),
      median(a) / median(b)))
  end
end
