-- Aborts before and after a point where it waits for a line on stdin, so a collector
-- can attach to it while it is running and already aborting. Under oracle.lua it prints
-- "ready N" (N = aborts the oracle saw before the wait) and forgets them after the wait.
local src = "local s = 0 for i = 1, 3000 do s = s + (function() return i end)() end return s"
local function burst(n)
  local s = 0
  for _ = 1, n do s = s + assert(loadstring(src, "=attach burst"))() end
  return s
end
burst(4)
local before = ORACLE_RESET and ORACLE_RESET() or 0
io.stdout:write("ready ", before, "\n")
io.stdout:flush()
io.read("*l")
burst(6)
