-- Sampler test workload: a count hook on every instruction (debug.sethook with count 1),
-- so the interpreter calls lj_dispatch_ins before each one (vm_inshook stores L->base,
-- not SAVE_PC) and the hook's C side and the Lua hook run between any two instructions.
-- Call graph: main chunk -> outer -> inner, and the hook function above any of them.
-- arg[1] = CPU seconds to run (os.clock).
local seconds = tonumber(arg and arg[1]) or 4
local calls = 0
local function hook()
  calls = calls + 1
end

local function inner(n)
  local s = 0
  for i = 1, n do
    s = s + i % 7
  end
  return s
end

local function outer(n)
  return inner(n) + 1
end

local t0, total = os.clock(), 0
debug.sethook(hook, "", 1)
while os.clock() - t0 < seconds do
  total = total + outer(200)
end
debug.sethook()
print(total > 0, calls > 0)
