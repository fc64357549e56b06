-- Aborts under three zone paths of nupp.zone, whose ids the collector reads at every
-- abort: "frame/render" (pushed before the profiler attaches), none, and "io" (pushed
-- after). Prints "ready" and waits for a line (time to attach), aborts, prints "done"
-- and waits for a line again (time to read the zone tables while it lives).
local zone = require("nupp.zone")
assert(zone.exported(), "nupp.zone cannot export its ids in this LuaJIT")
local src = "local s = 0 for i = 1, 3000 do s = s + (function() return i end)() end return s"
zone("frame")
zone("render")
io.stdout:write("ready\n")
io.stdout:flush()
io.read("*l")
assert(loadstring(src, "=zone render"))()
zone()
zone()
assert(loadstring(src, "=zone none"))()
zone("io")
assert(loadstring(src, "=zone io"))()
zone()
io.stdout:write("done\n")
io.stdout:flush()
io.read("*l")
