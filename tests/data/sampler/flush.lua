-- A program whose JIT fills its machine-code area and flushes every trace in a loop, as
-- a large program that compiles without pause does (luacheck): new functions made by
-- load() keep being compiled into a small machine-code area (maxmcode), which LuaJIT
-- flushes when it is full, and jit.flush() empties it again every 100 functions.
-- usage: luajit flush.lua [SECONDS]   (CPU seconds, os.clock)
jit.opt.start("maxmcode=256", "maxtrace=2000", "hotloop=4", "hotexit=2")
local secs = tonumber(arg and arg[1]) or 5
local t0, n, sum = os.clock(), 0, 0

-- The caller loop: compiled with each new callee inlined.
local function drive(f, k)
  local s = 0
  for i = 1, 300 do
    s = s + f(i, k)
  end
  return s
end

while os.clock() - t0 < secs do
  n = n + 1
  local src = ("return function(i, k)\n"
    .. "  local x = i * %d + k\n"
    .. "  if x %% 3 == 0 then return x / 2 end\n"
    .. "  return x - %d\n"
    .. "end\n"):format(n % 997 + 1, n % 13)
  local f = assert(load(src, "=gen" .. (n % 64)))()
  sum = sum + drive(f, n)
  if n % 100 == 0 then
    jit.flush()
  end
end
io.stderr:write(("functions %d\n"):format(n))
print(sum > 0)
