-- Debian's dkjson (lua-dkjson, pure Lua), JIT on: a document of 200 records encoded and
-- decoded again for SECONDS of CPU time. Its hot traces inline dkjson's string helpers
-- and call builtins from compiled code (string.find, string.gsub), and return below the
-- frame they started in. usage: luajit roundtrip.lua [SECONDS=10]
local json = require("dkjson")
local secs = tonumber(arg[1]) or 10
local doc = { name = "nupp", list = {}, map = {} }
for i = 1, 200 do
  doc.list[i] = { id = i, label = "item " .. i, score = i * 1.5, tags = { "a", "b", tostring(i) }, ok = i % 2 == 0 }
  doc.map["k" .. i] = { nested = { deep = { value = i, s = ("x"):rep(i % 17) } } }
end
local stop, n = os.clock() + secs, 0
while os.clock() < stop do
  local s = json.encode(doc)
  local back = json.decode(s)
  n = n + #back.list
end
print(n)
