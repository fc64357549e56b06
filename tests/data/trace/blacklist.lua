-- One hot loop that aborts at the same start bytecode (its FORL) until LuaJIT
-- blacklists it: each abort doubles the penalty and the 11th exceeds PENALTY_MAX
-- (lj_trace.c:371-408); after that the loop runs interpreted and never aborts again.
local s = 0
for i = 1, 200000 do s = s + (function() return i end)() end
print(s)
