-- Code under jit.off called from a hot loop: "JIT compilation disabled for function".
local function g(x) return x + 1 end
jit.off(g)
local s = 0
for i = 1, 3000 do s = s + g(i) end
print(s)
