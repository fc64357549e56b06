-- The trace-abort oracle: runs a Lua program with a jit.attach(handler, "trace") handler
-- and writes the abort table LuaJIT itself reports, in nupp_write_abort_csv's format.
-- usage: luajit oracle.lua OUT_PREFIX prog.lua [args...]
--    or, in a process that runs its own code (nginx's init_worker_by_lua):
--        local o = dofile("oracle.lua"); o.start(); ...; o.stop(); o.write(OUT_PREFIX)
-- writes OUT_PREFIX.default.csv (warn and blacklist rows), OUT_PREFIX.benign.csv (all
-- rows, as with include_benign) and OUT_PREFIX.meta ("total_default N", ...).
-- A program may call ORACLE_RESET() to forget everything seen so far (attach tests).
local jutil = require("jit.util")
local vmdef = require("jit.vmdef")
local bit = require("bit")
local funcinfo, funcbc, traceinfo = jutil.funcinfo, jutil.funcbc, jutil.traceinfo
local format = string.format

-- Trace formation, by message (the same classification as include/nupp/severity.h).
local BENIGN = {
  ["trace too short"] = true, ["retry recording"] = true,
  ["leaving loop in root trace"] = true, ["inner loop in root trace"] = true,
  ["loop unroll limit reached"] = true, ["call unroll limit reached"] = true,
  ["down-recursion, restarting"] = true,
}

-- The trimmed name at index n (0-based) of a packed 6-character vmdef table.
local function name6(t, n) return (t:sub(6 * n + 1, 6 * n + 6):gsub(" +$", "")) end

-- The opcode name of bytecode pc of fn.
local function opname(fn, pc)
  local ins = funcbc(fn, pc)
  return ins and name6(vmdef.bcnames, bit.band(ins, 0xff))
end

-- jit/v.lua fmtfunc.
local function fmtfunc(fn, pc)
  local fi = funcinfo(fn, pc)
  if fi.loc then return fi.loc
  elseif fi.ffid then return vmdef.ffnames[fi.ffid]
  elseif fi.addr then return format("C:%x", fi.addr)
  else return "(?)" end
end

-- jit/v.lua fmterr, with bytecodes and IR ops by name.
local function fmterr(err, info)
  if type(err) == "string" then return err end
  if type(err) ~= "number" then return vmdef.traceerr[0] end
  local fmt = vmdef.traceerr[err]
  if fmt == "NYI: bytecode %d" and type(info) == "number" then
    return (fmt:gsub("%%d", name6(vmdef.bcnames, info)))
  elseif fmt == "NYI: cannot assemble IR instruction %d" and type(info) == "number" then
    return (fmt:gsub("%%d", name6(vmdef.irnames, info)))
  end
  if type(info) == "function" then info = fmtfunc(info) end
  return format(fmt, info)
end

local rows, starts, total_default, total_benign, blacklisted
-- Forgets everything seen so far; returns how many abort events that was.
function ORACLE_RESET()
  local n = total_benign or 0
  rows, starts, total_default, total_benign, blacklisted = {}, {}, 0, 0, 0
  return n
end
ORACLE_RESET()

-- LuaJIT's blacklist_pc (lj_trace.c:374-383): op -> I-op, ITERN -> ITERC.
local function was_blacklisted(before, after)
  if not before or not after then return false end
  return after == "I" .. before or (before == "ITERN" and after == "ITERC")
end

-- Where the Lua function being recorded is: LuaJIT's "abort" event names it, but
-- OpenResty's luajit2 names the innermost frame, a fast or C function when recording
-- stopped at one (no location); the Lua function under it is then the first Lua frame
-- below this handler, which runs on the recorded thread's stack.
local function lua_frame_loc()
  for level = 3, 200 do
    local i = debug.getinfo(level, "Sl")
    if not i then return nil end
    if i.what ~= "C" and i.currentline >= 0 then
      -- lj_debug_pushloc: a file chunk by its base name.
      local src = i.source:sub(1, 1) == "@" and i.source:match("[^/\\]*$") or i.short_src
      return src .. ":" .. i.currentline
    end
  end
end

local function handler(what, tr, fn, pc, otr, oex)
  if what == "start" then
    local s = { fn = fn, pc = pc, op = opname(fn, pc) }
    if oex == -1 then -- stitched trace: its abort self-links trace otr (lj_trace.c:596)
      s.stitch_of, s.link = otr, traceinfo(otr) and traceinfo(otr).link
    end
    starts[tr] = s
  elseif what == "abort" then
    local s, sev = starts[tr], nil
    if s and s.stitch_of then
      local ti = traceinfo(s.stitch_of)
      if ti and ti.link == s.stitch_of and s.link ~= s.stitch_of then sev = "blacklist" end
    elseif s and was_blacklisted(s.op, opname(s.fn, s.pc)) then
      sev = "blacklist"
    end
    local reason = fmterr(otr, oex)
    if not sev then
      sev = (type(otr) == "number" and BENIGN[vmdef.traceerr[otr]]) and "info" or "warn"
    end
    local loc = funcinfo(fn, pc).loc or lua_frame_loc() or ""
    local key = sev .. "\0" .. reason .. "\0" .. loc
    local r = rows[key]
    if not r then r = { sev = sev, reason = reason, loc = loc, count = 0 }; rows[key] = r end
    r.count = r.count + 1
    total_benign = total_benign + 1
    if sev ~= "info" then total_default = total_default + 1 end
    if sev == "blacklist" then blacklisted = blacklisted + 1 end
    starts[tr] = nil
  end
end

-- RFC 4180 field, quoted when it holds a comma, quote, CR or LF (report_csv.c).
local function field(s)
  if not s:find('[,"\r\n]') then return s end
  return '"' .. s:gsub('"', '""') .. '"'
end

local ORDER = { blacklist = 0, warn = 1, info = 2 }
local function write(path, with_info)
  local list = {}
  for _, r in pairs(rows) do
    if with_info or r.sev ~= "info" then list[#list + 1] = r end
  end
  -- user/core/aggregate.c agg_cmp_abort: severity, count desc, location, reason (zone all "").
  table.sort(list, function(a, b)
    if a.sev ~= b.sev then return ORDER[a.sev] < ORDER[b.sev] end
    if a.count ~= b.count then return a.count > b.count end
    if a.loc ~= b.loc then return a.loc < b.loc end
    return a.reason < b.reason
  end)
  local f = assert(io.open(path, "wb"))
  f:write("severity,count,reason,location,zonePath\r\n")
  for _, r in ipairs(list) do
    f:write(r.sev, ",", r.count, ",", field(r.reason), ",", field(r.loc), ",\r\n")
  end
  f:close()
end
local M = { reset = ORACLE_RESET }
function M.start() jit.attach(handler, "trace") end
function M.stop() jit.attach(handler) end
function M.write(prefix)
  write(prefix .. ".default.csv", false)
  write(prefix .. ".benign.csv", true)
  local f = assert(io.open(prefix .. ".meta", "w"))
  f:write(format("total_default %d\ntotal_benign %d\nblacklisted %d\n", total_default, total_benign, blacklisted))
  f:close()
end
-- Embedded (no arg[1]: nginx has no arg table), the caller runs its own code.
if type(arg) ~= "table" or not arg[1] then return M end

local prefix, progname = assert(arg[1], "usage: oracle.lua OUT_PREFIX prog.lua"), assert(arg[2])
local prog = assert(loadfile(progname))
M.start()
local args = {}
for i = 3, #arg do args[#args + 1] = arg[i] end
arg = { [0] = progname, unpack(args) }
prog(unpack(args))
M.stop()
jit.off()
M.write(prefix)
