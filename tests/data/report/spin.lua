-- Spins in one compiled loop until killed: a first SIGINT only arms LuaJIT's hook,
-- which compiled code does not check, so it does not stop.
local function f(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
while true do f(1e6) end
