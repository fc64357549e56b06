-- nupp/cdef.lua, the FFI declarations of the Lua modules, is generated from the headers:
-- the staged copy is exactly what scripts/gen-cdef.lua makes of include/nupp/ now; what
-- ffi.cdef makes of it has the sizes and offsets C gives the same structs
-- (tests/support/prog_abi_offsets); the layout struct is the size our LuaJIT exports; and
-- no Lua module declares a struct of its own (a copy that could drift from the header).
local ffi = require("ffi")
local cdef = require("nupp.cdef")
local src = assert(os.getenv("NUPP_SOURCE_DIR"), "run through ctest (NUPP_SOURCE_DIR unset)")
local bin = assert(os.getenv("NUPP_TEST_BIN"), "NUPP_TEST_BIN unset")
local luajit = assert(os.getenv("NUPP_LUAJIT"), "NUPP_LUAJIT unset")

local checks = 0
local function check(c, msg) checks = checks + 1 if not c then error("FAIL: " .. msg, 2) end end
local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

-- 1. The staged module is the generator's output for today's headers.
local staged = package.searchpath and package.searchpath("nupp.cdef", package.path)
if not staged then
  for dir in package.path:gmatch("[^;]+") do
    local p = dir:gsub("%?", "nupp/cdef")
    if io.open(p) then staged = p break end
  end
end
check(staged, "nupp/cdef.lua is on our LuaJIT's default path")
local tmp = os.tmpname()
local h = src .. "/include/nupp/"
local cmd = ("%s %s/scripts/gen-cdef.lua %s %s %snupp.h %slj_layout.h %szone_abi.h"):format(luajit, src, tmp,
  cdef.version, h, h, h)
check(os.execute(cmd) == 0, "gen-cdef.lua runs: " .. cmd)
check(slurp(tmp) == slurp(staged), staged .. " is not what scripts/gen-cdef.lua makes of include/nupp/ (rebuild)")
os.remove(tmp)
-- Every marked section made it, with its defines substituted and its types renamed.
for _, key in ipairs({ "nupp", "lj_layout", "zone_abi" }) do
  local text = cdef.sections[key]
  check(type(text) == "string" and #text > 100, "section " .. key)
  check(not text:find("NUPP_LJ_VMLIST_MAX") and not text:find("__u32"), "section " .. key .. " is FFI-readable")
  local header = slurp(h .. key .. ".h")
  local first = text:match("(struct [%w_]+ {)")
  check(first and header:find(first, 1, true), key .. ": " .. tostring(first) .. " comes from the header")
end
check(cdef.defines.NUPP_LJ_LAYOUT_VERSION == tonumber(slurp(h .. "lj_layout.h"):match("NUPP_LJ_LAYOUT_VERSION (%d+)")),
  "defines are the header's")

-- 2. ffi.cdef reads the structs as C lays them out.
for _, key in ipairs({ "nupp", "lj_layout", "zone_abi", "nupp" }) do
  local ok, e = cdef.declare(ffi, key)
  check(ok, "declare " .. key .. ": " .. tostring(e))
end
local p = assert(io.popen(bin .. "/prog_abi_offsets"))
local n = 0
for line in p:lines() do
  local s, f, v = line:match("^struct (%S+) (%S+) (%d+)$")
  check(s, "bad line " .. line)
  v = tonumber(v)
  local got = f == "sizeof" and ffi.sizeof("struct " .. s) or ffi.offsetof("struct " .. s, f)
  check(got == v, ("struct %s %s: ffi says %s, C says %d"):format(s, f, tostring(got), v))
  n = n + 1
end
check(p:close() and n >= 40, "prog_abi_offsets printed " .. n .. " lines")
ffi.cdef("extern const struct nupp_lj_layout luajit_bpf_layout;")
check(ffi.C.luajit_bpf_layout.size == ffi.sizeof("struct nupp_lj_layout"), "the layout is the size our LuaJIT exports")
check(ffi.C.luajit_bpf_layout.version == cdef.defines.NUPP_LJ_LAYOUT_VERSION, "and its version")

-- 3. The Lua modules keep no struct declaration of their own.
for _, m in ipairs({ "profile", "zone" }) do
  local text = slurp(src .. "/lua/nupp/" .. m .. ".lua")
  check(not text:find("struct%s+[%w_]+%s*{"), "lua/nupp/" .. m .. ".lua declares a struct itself")
end
print("PASS: nupp/cdef.lua (" .. checks .. " checks)")
