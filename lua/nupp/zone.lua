-- nupp.zone: a stack of open zones per VM, like LuaJIT's jit.zone, whose path
-- ("frame/render") every sample and every trace abort is attributed to.
--
--   local zone = require("nupp.zone")
--   zone("frame")        -- push
--   zone("render")
--   zone.path()          --> "frame/render"
--   zone:get()           --> "render"
--   zone()               --> "render" (pops)
--   zone:flush()         -- closes every zone
--
-- A push or a pop is a few table operations and one store: no system call, no probe.
-- In our LuaJIT build the store writes the id of the open path into this VM's slot
-- of luajit_bpf_vmlist (include/nupp/lj_layout.h), where the BPF programs read it at
-- every sample and abort, and the id -> path table lives in this process's memory
-- (include/nupp/zone_abi.h), where nupp-bpf reads it from outside: a profiler that
-- attaches later (nupp-bpf record -p PID) sees zones opened before it came.
-- In any other Lua or LuaJIT the stack works the same, for the vm backend of nupp.profile.

local type, error, setmetatable, tostring, tonumber = type, error, setmetatable, tostring, tonumber

-- -- The zone tree and the open stack ------------------------------------------

-- One node per distinct path: name, path, id, children by name.
local root = { path = "", id = 0, kids = {} }
local stack = { [0] = root }
local depth = 0
local cur = root

local nextn = 0     -- paths numbered so far
local idbase = 0    -- (vmlist slot + 1) << 24 when the ids are exported
local slotp = nil   -- uint32_t * to this VM's luajit_bpf_vmlist.zone[slot]
local tbl = nil     -- struct nupp_zone_table of this VM
local append = nil  -- appends a path to the table

local PATH_MAX = 1024
local N_MAX = 2 ^ 24 - 1

-- Creates the node of name under parent, with the next id.
local function newnode(parent, name)
  local path = parent == root and name or parent.path .. "/" .. name
  local id = 0
  if nextn < N_MAX then
    nextn = nextn + 1
    id = idbase + nextn
    if append then append(path) end
  end
  local node = { name = name, path = path, id = id, kids = {} }
  parent.kids[name] = node
  return node
end

-- -- The export to BPF and nupp-bpf (our LuaJIT build only) ----------------------

-- Finds this VM's slot in luajit_bpf_vmlist and publishes an id -> path table there.
do
  local ok, ffi, vlr, headr = pcall(function()
    local okf, ffi = pcall(require, "ffi")
    if not okf then return nil end
    local ok = pcall(ffi.cdef, [[
struct nupp_zone_lj_vmlist {
  uint32_t magic, count;
  uint64_t g[16];
  uint32_t zone[16];
  uint64_t zone_table[16];
};
struct nupp_zone_lj_layout_head {
  uint32_t magic, version, size;
  uint8_t gc64, fr2, dualnum, hasjit;
  int32_t gg_disp2g, gg_g2j, gg_g2l;
  uint32_t gg_size, g_vmstate, g_cur_L, g_jit_base, g_mainthref, g_hookmask;
  uint32_t L_size, L_gct, L_status, L_glref;
};
struct nupp_zone_table {
  uint32_t magic, version;
  uint64_t g, arena;
  uint32_t npaths, used, cap, slot;
  uint64_t nonce;
};
extern struct nupp_zone_lj_vmlist luajit_bpf_vmlist;
extern struct nupp_zone_lj_layout_head luajit_bpf_layout;
]])
    if not ok then return nil end
    local okv, vl = pcall(function() return ffi.C.luajit_bpf_vmlist end)
    local okl, lo = pcall(function() return ffi.C.luajit_bpf_layout end)
    if not okv or not okl then return nil end
    return ffi, vl, lo
  end)
  if ok and ffi and vlr and headr then
    local vl = ffi.cast("struct nupp_zone_lj_vmlist *", vlr)
    local lo = ffi.cast("struct nupp_zone_lj_layout_head *", headr)
    if lo.magic == 0x4c4a4250 and vl.magic == 0x4c4a4250 then
      -- This VM's global_State: the glref of one of its threads (tostring gives its address).
      local co = coroutine.create(function() end)
      local L = tonumber(tostring(co):match("0x(%x+)"), 16)
      local g = L and ffi.cast("uint64_t *", L + lo.L_glref)[0]
      local slot
      for i = 0, 15 do
        if g and vl.g[i] == g then slot = i break end
      end
      if slot then
        local ta = ffi.new("struct nupp_zone_table[1]")
        local t = ta[0]
        local cap = 4096
        local arena = ffi.new("uint8_t[?]", cap)
        local keep = { ta, arena } -- what the table points to stays allocated
        t.magic, t.version, t.g, t.slot, t.cap = 0x454e4f5a, 1, g, slot, cap
        t.arena = ffi.cast("uintptr_t", arena)
        t.nonce = ffi.cast("uint64_t", ffi.cast("uintptr_t", ta)) * 1000003ULL
          + ffi.cast("uint64_t", os.time()) * 65537ULL + ffi.cast("uint64_t", os.clock() * 1e6)
        append = function(path)
          local len = #path
          if len > PATH_MAX then path, len = path:sub(1, PATH_MAX), PATH_MAX end
          local need = t.used + 4 + len
          if need > t.cap then
            local ncap = t.cap
            while ncap < need do ncap = ncap * 2 end
            local na = ffi.new("uint8_t[?]", ncap)
            ffi.copy(na, arena, t.used)
            keep[#keep + 1] = na
            arena = na
            t.arena = ffi.cast("uintptr_t", na)
            t.cap = ncap
          end
          local at = arena + t.used
          ffi.cast("uint32_t *", at)[0] = len
          ffi.copy(at + 4, path, len)
          t.used = need
          t.npaths = t.npaths + 1
        end
        tbl = { t = t, keep = keep, slot = slot, g = g }
        idbase = (slot + 1) * 2 ^ 24
        slotp = ffi.cast("uint32_t *", vl.zone + slot)
        slotp[0] = 0
        vl.zone_table[slot] = ffi.cast("uintptr_t", ta)
      end
    end
  end
end

-- -- The stack ------------------------------------------------------------------

-- Opens zone name inside the current one.
local function push(name)
  local node = cur.kids[name]
  if node == nil then
    if type(name) ~= "string" then
      error("nupp.zone: a zone name must be a string, got a " .. type(name)
        .. " (call zone(\"name\") to open a zone, zone() to close it)", 3)
    end
    node = newnode(cur, name)
  end
  depth = depth + 1
  stack[depth] = node
  cur = node
  if slotp then slotp[0] = node.id end
end

-- Closes the innermost zone; returns its name.
local function pop()
  if depth == 0 then
    error("nupp.zone: zone() closes the innermost open zone, but no zone is open"
      .. " (each zone(\"name\") takes exactly one zone() after it)", 3)
  end
  local name = cur.name
  depth = depth - 1
  cur = stack[depth] -- (stack[depth + 1] stays until overwritten: a node is never freed)
  if slotp then slotp[0] = cur.id end
  return name
end

local zone = {}

-- The innermost open zone's name, or nil (zone:get(), as jit.zone).
function zone.get()
  return cur.name
end

-- The open path, names joined with "/" ("" when no zone is open).
function zone.path()
  return cur.path
end

-- Closes every open zone (zone:flush(), as jit.zone).
function zone.flush()
  for i = depth, 1, -1 do stack[i] = nil end
  depth = 0
  cur = root
  if slotp then slotp[0] = 0 end
end

-- Whether this VM's zone ids are readable from outside (our LuaJIT build), and its slot.
function zone.exported()
  return tbl ~= nil, tbl and tbl.slot
end

return setmetatable(zone, {
  __call = function(_, name)
    if name ~= nil then
      push(name)
    else
      return pop()
    end
  end,
})
