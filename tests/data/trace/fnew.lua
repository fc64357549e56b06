-- A closure created in a hot loop: "NYI: bytecode FNEW" (lj_record.c).
local t = {}
for i = 1, 2000 do t[i] = function() return i end end
print(#t)
