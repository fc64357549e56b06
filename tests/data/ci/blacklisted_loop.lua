-- A hot loop the JIT blacklists, beside one it compiles: bad() creates a closure in
-- its loop (line 15), which LuaJIT cannot record ("NYI: bytecode FNEW"); after enough
-- aborts the loop's start is blacklisted and it runs interpreted. Fixed work.
local function work(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
-- work() ends more than three lines above bad(): its entry and return run interpreted
-- (nanoseconds a call), and a rare sample there must not join the loop's block of
-- interpreted lines in report --why.
local function bad(n)
  local s = 0
  for i = 1, n do
    local f = function() return i end
    s = s + f() % 7
  end
  return s
end

local rounds = tonumber(arg and arg[1]) or 600
local acc = 0
for _ = 1, rounds do
  acc = acc + work(100000) + bad(20000)
end
print(acc)
