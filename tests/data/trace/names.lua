-- Locations of every kind lj_debug_pushloc prints: "=name", "@path" (basename with a
-- comma and quotes), chunk text with a comma, a quote and a newline (printed quoted),
-- and a chunk name longer than 40 characters (printed as the proto's address, %p).
local s = 0
local src = "local s = 0 for i = 1, 3000 do s = s + (function() return i end)() end return s"
s = s + assert(loadstring(src, "=named chunk"))()
s = s + assert(loadstring(src, "@" .. string.rep("d", 50) .. "/long, \"odd\" name.lua"))()
s = s + assert(loadstring(src, 'a, "q"\nz'))()
s = s + assert(loadstring(src, string.rep("x", 60)))()
print(s)
