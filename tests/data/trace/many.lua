-- Aborts at 600 distinct locations (more rows than one drain chunk of user/core/trace.c).
local src = "local s = 0 for i = 1, 300 do s = s + (function() return i end)() end return s"
local s = 0
for n = 1, 600 do s = s + assert(loadstring(src, "=site " .. n))() end
print(s)
