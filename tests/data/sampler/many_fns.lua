-- One trace that inlines 28 distinct functions: hot's loop calls f1 .. f28 in turn, each
-- small enough to be inlined, each with a guard of its own (x < 0, never true: x is the
-- previous call's result, so no guard is the same as another), so a snapshot inside its
-- frame names it. The work is the same in every function (an add and a modulo of its own
-- constants), so their samples are about equal. On exit it prints on stderr "fns N": the
-- most distinct functions among the constants of one trace (jit.attach, jit.util.tracek),
-- to show the trace holds more than the 16 an earlier sampler could name.
-- usage: luajit many_fns.lua SECONDS
local jutil = require("jit.util")
local maxfns = 0
jit.attach(function(what, tr)
  if what ~= "stop" then return end
  local info, seen, n = jutil.traceinfo(tr), {}, 0
  for k = -1, -info.nk, -1 do
    local v = jutil.tracek(tr, k)
    if type(v) == "function" and not seen[v] then seen[v] = true; n = n + 1 end
  end
  if n > maxfns then maxfns = n end
end, "trace")
local function f1(x, i) if x < 0 then error("never") end return (x + i * 1) % 1000005 end
local function f2(x, i) if x < 0 then error("never") end return (x + i * 2) % 1000007 end
local function f3(x, i) if x < 0 then error("never") end return (x + i * 3) % 1000009 end
local function f4(x, i) if x < 0 then error("never") end return (x + i * 4) % 1000011 end
local function f5(x, i) if x < 0 then error("never") end return (x + i * 5) % 1000013 end
local function f6(x, i) if x < 0 then error("never") end return (x + i * 6) % 1000015 end
local function f7(x, i) if x < 0 then error("never") end return (x + i * 7) % 1000017 end
local function f8(x, i) if x < 0 then error("never") end return (x + i * 8) % 1000019 end
local function f9(x, i) if x < 0 then error("never") end return (x + i * 9) % 1000021 end
local function f10(x, i) if x < 0 then error("never") end return (x + i * 10) % 1000023 end
local function f11(x, i) if x < 0 then error("never") end return (x + i * 11) % 1000025 end
local function f12(x, i) if x < 0 then error("never") end return (x + i * 12) % 1000027 end
local function f13(x, i) if x < 0 then error("never") end return (x + i * 13) % 1000029 end
local function f14(x, i) if x < 0 then error("never") end return (x + i * 14) % 1000031 end
local function f15(x, i) if x < 0 then error("never") end return (x + i * 15) % 1000033 end
local function f16(x, i) if x < 0 then error("never") end return (x + i * 16) % 1000035 end
local function f17(x, i) if x < 0 then error("never") end return (x + i * 17) % 1000037 end
local function f18(x, i) if x < 0 then error("never") end return (x + i * 18) % 1000039 end
local function f19(x, i) if x < 0 then error("never") end return (x + i * 19) % 1000041 end
local function f20(x, i) if x < 0 then error("never") end return (x + i * 20) % 1000043 end
local function f21(x, i) if x < 0 then error("never") end return (x + i * 21) % 1000045 end
local function f22(x, i) if x < 0 then error("never") end return (x + i * 22) % 1000047 end
local function f23(x, i) if x < 0 then error("never") end return (x + i * 23) % 1000049 end
local function f24(x, i) if x < 0 then error("never") end return (x + i * 24) % 1000051 end
local function f25(x, i) if x < 0 then error("never") end return (x + i * 25) % 1000053 end
local function f26(x, i) if x < 0 then error("never") end return (x + i * 26) % 1000055 end
local function f27(x, i) if x < 0 then error("never") end return (x + i * 27) % 1000057 end
local function f28(x, i) if x < 0 then error("never") end return (x + i * 28) % 1000059 end

local function hot(secs)
  local t0, x = os.clock(), 1
  while os.clock() - t0 < secs do
    for i = 1, 20000 do
      x = f1(x, i)
      x = f2(x, i)
      x = f3(x, i)
      x = f4(x, i)
      x = f5(x, i)
      x = f6(x, i)
      x = f7(x, i)
      x = f8(x, i)
      x = f9(x, i)
      x = f10(x, i)
      x = f11(x, i)
      x = f12(x, i)
      x = f13(x, i)
      x = f14(x, i)
      x = f15(x, i)
      x = f16(x, i)
      x = f17(x, i)
      x = f18(x, i)
      x = f19(x, i)
      x = f20(x, i)
      x = f21(x, i)
      x = f22(x, i)
      x = f23(x, i)
      x = f24(x, i)
      x = f25(x, i)
      x = f26(x, i)
      x = f27(x, i)
      x = f28(x, i)
    end
  end
  return x
end

io.write(hot(tonumber(arg[1]) or 2) >= 0 and "" or "none\n")
io.stderr:write(("fns %d\n"):format(maxfns))
