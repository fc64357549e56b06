-- Loops that leave their root trace, and an inner loop in a root trace (benign rows).
local s = 0
for j = 1, 3000 do for i = 1, 3 do s = s + i end end
for j = 1, 300 do
  local i = 0
  while true do i = i + 1; if i > j % 7 then break end end
  s = s + i
end
print(s)
