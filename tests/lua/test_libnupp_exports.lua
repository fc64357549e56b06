-- libnupp.so exports its public API only: every dynamic symbol it defines is a nupp_*
-- name declared in include/nupp/*.h (what nupp/cdef.lua is generated from), so internals
-- (the zone reader, the session's helpers, the walker) stay local.
local bindir = assert(os.getenv("NUPP_BINARY_DIR"), "run through ctest (NUPP_BINARY_DIR unset)")
local src = assert(os.getenv("NUPP_SOURCE_DIR"), "run through ctest (NUPP_SOURCE_DIR unset)")
local lib = bindir .. "/libnupp.so"
local p = assert(io.popen("nm -D --defined-only " .. lib .. " 2>&1"))
local out = p:read("*a")
p:close()
local h = assert(io.popen("cat " .. src .. "/include/nupp/*.h"))
local htext = h:read("*a")
h:close()
local n, bad = 0, {}
for kind, name in out:gmatch("%x+ (%a) ([%w_@%.]+)") do
  name = name:gsub("@.*$", "")
  if kind ~= "A" then -- the version node NUPP_0.1
    n = n + 1
    if not name:find("^nupp_") or not htext:find("%f[%w_]" .. name .. "%f[^%w_]") then bad[#bad + 1] = name end
  end
end
if n < 20 then error("FAIL: nm found only " .. n .. " symbols in " .. lib .. ":\n" .. out) end
if #bad > 0 then error("FAIL: libnupp.so exports names outside its public headers: " .. table.concat(bad, ", ")) end
print(string.format("PASS: libnupp.so exports %d symbols, each a nupp_* name of include/nupp/*.h", n))
