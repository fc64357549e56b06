-- A workload with a known split of VM states: interp() never compiles (jit.off),
-- comp() is the same loop compiled; each runs for the same CPU time (os.clock).
-- Usage: luajit states.lua SECONDS
local dur = tonumber(arg and arg[1]) or 2

local function interp(n)
  local s = 0
  for i = 1, n do s = s + i % 3 end
  return s
end
jit.off(interp)

local function comp(n)
  local s = 0
  for i = 1, n do s = s + i % 3 end
  return s
end

local spent = { 0, 0 }
local t0 = os.clock()
while os.clock() - t0 < dur do
  local t = os.clock()
  if spent[1] <= spent[2] then
    interp(20000)
    spent[1] = spent[1] + os.clock() - t
  else
    comp(200000)
    spent[2] = spent[2] + os.clock() - t
  end
end
io.stderr:write(string.format("states: interp %.2f s, comp %.2f s\n", spent[1], spent[2]))
