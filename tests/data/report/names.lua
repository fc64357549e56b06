-- Names a target can put in a profile that are not UTF-8: a chunk name and a table
-- key with bytes 0xE9 and 0xFF, and a valid UTF-8 name beside them.
-- Usage: luajit names.lua SECONDS
local dur = tonumber(arg and arg[1]) or 1
local code = [[
local t = {}
t["k\255"] = function(n) local s = 0 for i = 1, n do s = s + i % 5 end return s end
t["m\195\169thode"] = function(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
return t
]]
local t = assert(loadstring(code, "@caf\233.lua"))()
local t0 = os.clock()
while os.clock() - t0 < dur do
  t["k\255"](100000)
  t["m\195\169thode"](100000)
end
