-- Our LuaJIT build has the configuration nupp-bpf's layout and walker assume (x64,
-- GC64 with two-slot frames, JIT on with the default optimizations, FFI), and its jit.*
-- modules load with no environment variables.
local ffi = require("ffi")
local function check(cond, what) if not cond then error("FAIL: " .. what, 2) end end

check(jit.arch == "x64", "jit.arch is x64, got " .. tostring(jit.arch))
check(ffi.abi("gc64"), "GC64 mode (LJ_GC64 = 1, LJ_FR2 = 1)")
check(ffi.abi("64bit") and ffi.abi("le"), "64-bit little endian")
check(jit.version == "LuaJIT 2.1.0-beta3", "jit.version " .. jit.version)
local st = {jit.status()}
check(st[1] == true, "the JIT is on")
local flags = table.concat(st, " ", 2)
for _, f in ipairs({"fold", "cse", "dce", "fwd", "dse", "narrow", "loop", "abc", "sink", "fuse"}) do
  check(flags:find(f, 1, true), "jit.status has " .. f .. " (got: " .. flags .. ")")
end

-- The modules -jv/-jp/-jdump need.
for _, m in ipairs({"jit.v", "jit.p", "jit.dump", "jit.vmdef", "jit.util", "jit.profile", "jit.zone", "jit.bc"}) do
  check(pcall(require, m), "require('" .. m .. "')")
end
local vmdef = require("jit.vmdef")
check(vmdef.traceerr[7] == "NYI: bytecode %d", "traceerr[7]")
check(vmdef.bcnames:sub(6 * 51 + 1, 6 * 51 + 6) == "FNEW  ", "bytecode 51 is FNEW")

-- jit.util.funcinfo locations are what the trace channel reproduces.
local function f() return 1 end
local fi = require("jit.util").funcinfo(f)
check(fi.loc == "test_luajit_config.lua:" .. fi.linedefined, "funcinfo loc " .. tostring(fi.loc))
print("PASS: luajit config")
