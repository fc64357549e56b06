-- Upvalues closed in a loop: the block that captures x ends in UCLO ("NYI: bytecode UCLO").
local s, keep = 0, nil
for i = 1, 3000 do
  local x = i
  if i < 0 then keep = function() return x end end
  s = s + x
end
print(s, keep)
