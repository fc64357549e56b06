-- Aborts under three zone ids kept in a uint32 the collector reads at every abort:
-- prints "zone ADDR" and waits for a line (time to register ADDR), then aborts under
-- id 7 ("zone seven"), id 0 ("zone none") and id 9 ("zone nine").
local ffi = require("ffi")
local zone = ffi.new("uint32_t[1]")
io.stdout:write(string.format("zone %.0f\n", tonumber(ffi.cast("uintptr_t", zone))))
io.stdout:flush()
io.read("*l")
local src = "local s = 0 for i = 1, 3000 do s = s + (function() return i end)() end return s"
zone[0] = 7
assert(loadstring(src, "=zone seven"))()
zone[0] = 0
assert(loadstring(src, "=zone none"))()
zone[0] = 9
assert(loadstring(src, "=zone nine"))()
zone[0] = 0
