-- nupp.zone against LuaJIT's own jit.zone, and what it exports: a long random sequence of
-- pushes, pops and flushes (interpreted, then compiled) keeps get() equal to jit.zone's
-- and path() equal to its stack joined with "/"; after every step the number that
-- luajit_bpf_vmlist.zone_tv[slot] points to (what BPF reads) is the id whose record in
-- the exported table (what nupp-bpf reads) is path(). Names that are not strings raise,
-- numbers 1 .. 4 too (they index a node's fields), and so does a pop with no zone open.
local ffi = require("ffi")
local cdef = require("nupp.cdef")
local nzone = require("nupp.zone")
local jzone = require("jit.zone")

local checks = 0
local function check(c, msg) checks = checks + 1 if not c then error("FAIL: " .. msg, 2) end end

-- -- The export, read back the way the readers do -----------------------------------

local exported, slot = nzone.exported()
check(exported, "nupp.zone exports its ids in our LuaJIT")
assert(cdef.declare(ffi, "lj_layout") and cdef.declare(ffi, "zone_abi"))
ffi.cdef("extern struct nupp_lj_vmlist luajit_bpf_vmlist;")
local vl = ffi.C.luajit_bpf_vmlist
local D = cdef.defines
check(vl.zone_tv[slot] ~= 0 and vl.zone_table[slot] ~= 0, "the vmlist slot has both addresses")
local tv = ffi.cast("double *", vl.zone_tv[slot])
local h = ffi.cast("struct nupp_zone_table *", vl.zone_table[slot])
check(h.magic == D.NUPP_ZONE_MAGIC and h.version == D.NUPP_ZONE_VERSION and h.slot == slot, "table header")

-- The paths of the table, by number (as user/core/zones.c reads them).
local function paths()
  local arena, out, off = ffi.cast("uint8_t *", h.arena), {}, 0
  for i = 1, h.npaths do
    local len = ffi.cast("uint32_t *", arena + off)[0]
    out[i] = ffi.string(arena + off + 4, len)
    off = off + 4 + len
  end
  check(off == h.used, "records fill the used bytes")
  return out
end

-- What an outside reader sees now: the path of the id in box[1]. Never compiled: a trace
-- of it could forward an FFI load across the zone's table store (they cannot alias in
-- the JIT's view), which only an in-process reader like this one would notice.
local cache = {}
local function seen_path()
  local id = tv[0]
  check(id == math.floor(id) and id >= 0, "the exported number is an id: " .. tostring(id))
  if id == 0 then return "" end
  local n = id - (slot + 1) * 2 ^ D.NUPP_ZONE_SLOT_SHIFT
  check(n >= 1, "id " .. id .. " belongs to slot " .. slot)
  if not cache[n] then cache = paths() end
  return cache[n]
end
jit.off(seen_path) jit.off(paths)

-- -- Differential run against jit.zone -----------------------------------------------

local NAMES = { "frame", "render", "io", "frame", "a b", "", "x/y", "render" }
local function run(steps, seed)
  local state = seed
  local function rnd(n) state = (state * 1103515245 + 12345) % 2147483648 return state % n + 1 end
  nzone.flush() jzone:flush()
  for _ = 1, steps do
    local r = rnd(10)
    if r <= 5 and #jzone < 40 or #jzone == 0 then
      local name = NAMES[rnd(#NAMES)]
      nzone(name) jzone(name)
    elseif r <= 9 then
      check(nzone() == jzone(), "pop returns the popped name")
    else
      nzone:flush() jzone:flush()
    end
    check(nzone:get() == jzone:get(), "get() as jit.zone's")
    check(nzone.path() == table.concat(jzone, "/"), "path() is the stack joined: "
      .. nzone.path() .. " vs " .. table.concat(jzone, "/"))
    -- (the table keeps the first NUPP_ZONE_PATH_MAX bytes of a path)
    check(seen_path() == nzone.path():sub(1, D.NUPP_ZONE_PATH_MAX), "the exported id names path(): "
      .. seen_path() .. " vs " .. nzone.path())
  end
end
jit.off() jit.flush()
run(20000, 1)
jit.on()
run(20000, 2) -- zone()'s own function traces
-- Pushes and pops inlined in a hot loop's trace reach memory.
local function hot(n)
  for _ = 1, n do nzone("frame") nzone("render") nzone() nzone("io") nzone() end
end
nzone.flush() hot(1000)
check(#nzone.path() == 6 * 1000 - 1 and seen_path() == nzone.path():sub(1, D.NUPP_ZONE_PATH_MAX), "after a compiled loop")
for _ = 1, 1000 do nzone() end
check(seen_path() == "" and tv[0] == 0, "after the pops")
nzone.flush()
check(tv[0] == 0 and seen_path() == "", "flush exports id 0")
-- A path longer than the table keeps is cut there, and its id still names it.
for _ = 1, 300 do nzone("abcdefgh") end
check(#nzone.path() == 300 * 9 - 1 and seen_path() == nzone.path():sub(1, D.NUPP_ZONE_PATH_MAX), "a long path is cut")
nzone.flush()

-- -- Errors -----------------------------------------------------------------------------

for _, bad in ipairs({ 1, 2, 3, 4, 5, 0.5, true, false, {}, print }) do
  local ok, e = pcall(nzone, bad)
  check(not ok and tostring(e):find("a zone name must be a string", 1, true), "zone(" .. tostring(bad) .. ") raises: " .. tostring(e))
  check(nzone.path() == "" and tv[0] == 0, "a refused name leaves the stack alone")
end
nzone("frame")
for _, bad in ipairs({ 1, 2, 3, 4 }) do
  check(not pcall(nzone, bad), "zone(" .. bad .. ") raises inside a zone too")
  check(nzone.path() == "frame", "and leaves it open")
end
nzone()
local ok, e = pcall(function() nzone() end)
check(not ok and tostring(e):find("no zone is open", 1, true), "pop with none open raises: " .. tostring(e))
check(tostring(e):find("test_zone.lua:%d+: nupp.zone"), "the error points at the caller: " .. tostring(e))
ok, e = pcall(function() nzone(2) end)
check(not ok and tostring(e):find("test_zone.lua:%d+: nupp.zone: a zone name must be a string, got a number"),
  "a bad name's error points at the caller: " .. tostring(e))
print("PASS: nupp.zone (" .. checks .. " checks)")
