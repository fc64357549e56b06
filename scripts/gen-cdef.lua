-- Generates nupp/cdef.lua: the C declarations the Lua modules give to LuaJIT's ffi.cdef,
-- copied from the headers (the text between their "/* ffi:begin */" and "/* ffi:end */"
-- markers), so the Lua binding never keeps a second copy of a struct that can drift.
-- __u8 .. __s64 become <stdint.h> names, the headers' integer #defines are substituted
-- (ffi.cdef has no preprocessor) and exported as numbers; every section is declared
-- once here, in a fresh ffi state, so a header the FFI cannot read fails the build.
-- usage: luajit scripts/gen-cdef.lua OUT.lua VERSION HEADER.h...
local ffi = require("ffi")
local out_path, version = assert(arg[1], "usage: gen-cdef.lua OUT.lua VERSION HEADER.h..."), assert(arg[2])
local headers = { select(3, unpack(arg)) }
assert(#headers > 0, "no header given")

local TYPES = { __u8 = "uint8_t", __s8 = "int8_t", __u16 = "uint16_t", __s16 = "int16_t",
  __u32 = "uint32_t", __s32 = "int32_t", __u64 = "uint64_t", __s64 = "int64_t" }

-- Reads a whole file.
local function slurp(path)
  local f = assert(io.open(path, "r"))
  local s = f:read("*a")
  f:close()
  return s
end

local defines, names, sections, types = {}, {}, {}, {}

-- The integer #defines of every header first (a section may use another header's).
local texts = {}
for i, path in ipairs(headers) do
  texts[i] = slurp(path)
  for name, value in texts[i]:gmatch("\n#define%s+(NUPP_[%w_]+)%s+([%dxXa-fA-F]+)[uU]?[%s/]") do
    local n = tonumber(value)
    if n then
      assert(defines[name] == nil or defines[name] == n, name .. " is defined twice, differently")
      if defines[name] == nil then names[#names + 1] = name end
      defines[name] = n
    end
  end
end
table.sort(names)

for i, path in ipairs(headers) do
  local key = path:match("([^/]+)%.h$")
  local parts, pos = {}, 1
  while true do
    local b, be = texts[i]:find("/* ffi:begin */", pos, true)
    if not b then break end
    local e, ee = texts[i]:find("/* ffi:end */", be, true)
    assert(e, path .. ": ffi:begin without ffi:end")
    parts[#parts + 1] = texts[i]:sub(be + 1, e - 1)
    pos = ee + 1
  end
  assert(#parts > 0, path .. " has no ffi:begin ... ffi:end section")
  local text = table.concat(parts, "\n")
  assert(not text:find("\n%s*#"), path .. ": a preprocessor line inside an ffi section")
  text = text:gsub("%f[%w_](__[us]%d+)%f[^%w_]", function(t) return assert(TYPES[t], "unknown type " .. t) end)
  text = text:gsub("%f[%w_](NUPP_[%w_]+)%f[^%w_]", function(n) return defines[n] and tostring(defines[n]) end)
  -- The first struct or enum the section defines: declared already if it is known.
  types[key] = text:match("\n(struct [%w_]+) {")
  local ok, err = pcall(ffi.cdef, text)
  assert(ok, path .. ": ffi.cdef cannot read its ffi section: " .. tostring(err))
  assert(not text:find("%]==%]"), path .. ": the section contains ]==]")
  sections[#sections + 1] = { key = key, path = path:match("include/.*$") or path, text = text }
end

local o = {}
o[#o + 1] = "-- nupp/cdef.lua: the C declarations of libnupp (include/nupp/nupp.h) and of the memory\n"
o[#o + 1] = "-- nupp.zone shares with BPF (lj_layout.h, zone_abi.h), as LuaJIT's ffi.cdef reads them.\n"
o[#o + 1] = "-- Generated at build time by scripts/gen-cdef.lua from the headers' ffi sections. DO NOT EDIT.\n"
o[#o + 1] = "local M = { version = \"" .. version .. "\", defines = {}, sections = {}, types = {} }\n\n"
for _, n in ipairs(names) do
  o[#o + 1] = ("M.defines.%s = %d\n"):format(n, defines[n])
end
for _, s in ipairs(sections) do
  o[#o + 1] = ("\n-- From %s.\nM.types.%s = %q\nM.sections.%s = [==[%s]==]\n"):format(s.path, s.key,
    types[s.key] or "", s.key, s.text)
end
o[#o + 1] = [[

-- Declares one section (nupp, lj_layout, zone_abi) in ffi once per process: ffi.cdef
-- refuses to define a struct twice, so a section whose first type is known is skipped.
-- Returns true, or false and ffi.cdef's error.
function M.declare(ffi, key)
  local t = M.types[key]
  if t and t ~= "" and pcall(ffi.typeof, t) then return true end
  local text = M.sections[key]
  if not text then return false, "no ffi section " .. tostring(key) end
  return pcall(ffi.cdef, text)
end

return M
]]
local tmp = out_path .. ".tmp"
local f = assert(io.open(tmp, "w"))
f:write(table.concat(o))
f:close()
assert(os.rename(tmp, out_path))
