-- A table with an array part indexed by non-integer numbers: "NYI: mixed sparse/dense table".
local t = { 1, 2, 3 }
for i = 1, 3000 do t[i + 0.5] = i end
local n = 0
for k in pairs(t) do n = n + 1 end
print(n)
