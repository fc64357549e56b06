-- A short-lived child for record --subprocesses: a closure in a hot loop aborts at once
-- ("NYI: bytecode FNEW", until the loop is blacklisted), then it spins to 0.1 s of CPU
-- and exits. Run under oracle.lua, which counts its aborts as LuaJIT reports them.
local t = {}
for i = 1, 2000 do t[i] = function() return i end end
local t0 = os.clock()
while os.clock() - t0 < 0.1 do end
