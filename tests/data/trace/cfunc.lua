-- Unsupported fast function and C functions in loops: ffi.typeof of a non-cdata
-- ("NYI: unsupported variant of FastFunc ffi.typeof"), os.date (stitched), and a
-- stitched continuation that aborts (its stitch gets blacklisted, lj_trace.c:596).
local ffi = require("ffi")
local s = 0
for i = 1, 3000 do s = s + ffi.sizeof(ffi.typeof("int")) end
for i = 1, 3000 do s = s + #os.date("%Y") end
for i = 1, 3000 do local d = os.date("%Y"); s = s + (function() return #d end)() end
print(s)
