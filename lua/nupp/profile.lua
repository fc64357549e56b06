-- nupp.profile: in-app profiling sessions. profile.sample() counts where the time goes
-- (collapsed stacks by zone path), profile.trace() counts where the JIT gives up (abort
-- sites by severity). Two backends give the same reports:
--   bpf  nupp-bpf's BPF programs on this very process, through libnupp (our LuaJIT
--        build, root or CAP_BPF + CAP_PERFMON + CAP_SYS_ADMIN); nothing runs in the VM;
--   vm   LuaJIT's own jit.profile and jit.attach, in any LuaJIT 2.1, as any user.
-- options.backend picks one ("bpf" raises naming what is missing); by default bpf where
-- it can run, else vm. profile.available() says which can run here, and why not.

local zone = require("nupp.zone")

local type, pairs, ipairs, tostring, tonumber, error, setmetatable, rawget =
  type, pairs, ipairs, tostring, tonumber, error, setmetatable, rawget
local format, concat, sort, floor = string.format, table.concat, table.sort, math.floor

local profile = {}

-- -- Errors: every raise names the cause and the remedy ------------------------------

local function raise(fn, msg, level)
  error("nupp.profile." .. fn .. ": " .. msg, (level or 2) + 1)
end

-- -- The bpf backend: libnupp through the FFI ---------------------------------------

local ffi_ok, ffi = pcall(require, "ffi")
local C, lib, lib_why

-- The session section of include/nupp/nupp.h, as ffi.cdef reads it.
local CDEF = [[
struct nupp_session;
struct nupp_profile;
struct nupp_sampler;
struct nupp_trace;
struct nupp_session_opts {
	size_t sz;
	bool samples;
	bool aborts;
	int freq_hz;
	int depth;
	bool lines;
	bool include_benign;
	unsigned int max_stacks;
	unsigned int max_sites;
	const char *zone_filter;
	const char *root;
	int drain_ms;
	bool background;
	bool subprocesses;
	const char *command;
	const char *target;
};
struct nupp_session *nupp_session_open(const struct nupp_session_opts *opts, int *err);
int nupp_session_attach(struct nupp_session *s, int pid);
int nupp_session_start(struct nupp_session *s);
int nupp_session_pause(struct nupp_session *s, bool paused);
struct nupp_profile *nupp_session_snapshot(struct nupp_session *s, int *err);
struct nupp_profile *nupp_session_stop(struct nupp_session *s, int *err);
void nupp_session_profile_free(struct nupp_profile *p);
void nupp_session_close(struct nupp_session *s);
size_t nupp_profile_nsamples(const struct nupp_profile *p);
const char *nupp_profile_sample(const struct nupp_profile *p, size_t i, const char **zone_path, int *pid,
				unsigned long long counts[6]);
size_t nupp_profile_naborts(const struct nupp_profile *p);
const char *nupp_profile_abort(const struct nupp_profile *p, size_t i, const char **severity,
			       unsigned long long *count, const char **location, const char **zone_path);
void nupp_profile_totals(const struct nupp_profile *p, unsigned long long totals[9]);
int nupp_profile_write_json(const struct nupp_profile *p, const char *path);
int nupp_available(int pid, char *why, size_t size);
const char *nupp_errmsg(void);
int getpid(void);
]]
profile._CDEF = CDEF

-- Loads libnupp once; returns it, or nil and why not.
local function libnupp()
  if lib or lib_why then return lib, lib_why end
  if not ffi_ok then
    lib_why = "this Lua has no FFI (LuaJIT's ffi module): use the vm backend"
    return nil, lib_why
  end
  local okc, cfg = pcall(require, "nupp.config")
  local path = okc and type(cfg) == "table" and cfg.libnupp or nil
  if not path then
    lib_why = "nupp.config names no libnupp (nupp.profile was installed without nupp-bpf, e.g. by "
      .. "luarocks): build and install nupp-bpf (cmake --install) for the bpf backend"
    return nil, lib_why
  end
  local okd, e = pcall(ffi.cdef, CDEF)
  if not okd and not tostring(e):find("redefine") then
    lib_why = "cannot declare libnupp's API: " .. tostring(e)
    return nil, lib_why
  end
  local okl, l = pcall(ffi.load, path)
  if not okl then
    lib_why = "cannot load " .. path .. ": " .. tostring(l) .. " (rebuild or reinstall nupp-bpf)"
    return nil, lib_why
  end
  lib, C = l, ffi.C
  return lib
end

-- Why the bpf backend cannot run in this process (nil when it can).
local function bpf_why()
  local l, why = libnupp()
  if not l then return why end
  local buf = ffi.new("char[1024]")
  if l.nupp_available(0, buf, 1024) ~= 0 then return ffi.string(buf) end
  return nil
end

-- The rows of a profile returned by libnupp, as the seed's tables.
local function bpf_rows(p)
  local zp, pid, counts = ffi.new("const char *[1]"), ffi.new("int[1]"), ffi.new("unsigned long long[6]")
  local rows = {}
  for i = 0, tonumber(lib.nupp_profile_nsamples(p)) - 1 do
    local st = lib.nupp_profile_sample(p, i, zp, pid, counts)
    rows[#rows + 1] = {
      zonePath = ffi.string(zp[0]), stack = ffi.string(st), count = tonumber(counts[0]),
      compiled = tonumber(counts[1]), interpreted = tonumber(counts[2]), cCode = tonumber(counts[3]),
      collecting = tonumber(counts[4]), compiling = tonumber(counts[5]),
    }
  end
  return rows
end

-- The abort rows and totals of a profile returned by libnupp.
local function bpf_aborts(p)
  local sev, cnt, loc, zp = ffi.new("const char *[1]"), ffi.new("unsigned long long[1]"),
    ffi.new("const char *[1]"), ffi.new("const char *[1]")
  local rows = {}
  for i = 0, tonumber(lib.nupp_profile_naborts(p)) - 1 do
    local reason = lib.nupp_profile_abort(p, i, sev, cnt, loc, zp)
    rows[#rows + 1] = {
      severity = ffi.string(sev[0]), count = tonumber(cnt[0]), reason = ffi.string(reason),
      location = ffi.string(loc[0]), zonePath = ffi.string(zp[0]),
    }
  end
  local t = ffi.new("unsigned long long[9]")
  lib.nupp_profile_totals(p, t)
  return rows, tonumber(t[1]), tonumber(t[2]), tonumber(t[0])
end

-- Opens a libnupp session on this process; returns it, or raises from fn.
local function bpf_open(fn, o)
  local why = bpf_why()
  if why then raise(fn, "the bpf backend cannot run here: " .. why, 3) end
  local opts = ffi.new("struct nupp_session_opts")
  opts.sz = ffi.sizeof(opts)
  opts.samples = o.samples or false
  opts.aborts = o.aborts or false
  opts.freq_hz = o.freq_hz or 0
  opts.depth = o.depth or 0
  opts.include_benign = o.include_benign or false
  opts.background = o.samples or false
  local keep = { o.zone, o.root, "nupp.profile (in-app)" }
  opts.zone_filter = o.zone
  opts.root = o.root
  opts.command = keep[3]
  local err = ffi.new("int[1]")
  local s = lib.nupp_session_open(opts, err)
  if s == nil then raise(fn, "cannot start the bpf backend: " .. ffi.string(lib.nupp_errmsg()), 3) end
  if lib.nupp_session_attach(s, C.getpid()) ~= 0 then
    local m = ffi.string(lib.nupp_errmsg())
    lib.nupp_session_close(s)
    raise(fn, "cannot attach the bpf backend to this process: " .. m, 3)
  end
  if lib.nupp_session_start(s) ~= 0 then
    local m = ffi.string(lib.nupp_errmsg())
    lib.nupp_session_close(s)
    raise(fn, "cannot start the bpf backend: " .. m, 3)
  end
  return s, keep
end

-- -- The vm backend: jit.profile and jit.attach ---------------------------------------

local function vm_why()
  if type(jit) ~= "table" then return "this is not LuaJIT (jit.profile and jit.attach are LuaJIT's)" end
  local okp = pcall(require, "jit.profile")
  if not okp then return "this LuaJIT has no jit.profile (it was built without LJ_HASPROFILE)" end
  if type(jit.attach) ~= "function" then return "this LuaJIT has no jit.attach" end
  if not pcall(require, "jit.vmdef") or not pcall(require, "jit.util") then
    return "jit.vmdef and jit.util are not on package.path (they come with LuaJIT, in its "
      .. "share/luajit-2.1.0-beta3/jit/: keep LuaJIT's default path, e.g. end LUA_PATH with ;;)"
  end
  return nil
end

-- -- Availability -----------------------------------------------------------------

-- The backends that can run here, in the order of preference, and why the others cannot.
function profile.available()
  local list, why = {}, {}
  local b = bpf_why()
  if b then why.bpf = b else list[#list + 1] = "bpf" end
  local v = vm_why()
  if v then why.vm = v else list[#list + 1] = "vm" end
  return list, why
end

-- The backend to use for fn with options o (raises when the one asked for cannot run).
local function pick_backend(fn, want)
  if want ~= nil and want ~= "bpf" and want ~= "vm" then
    raise(fn, format("unknown backend %q: use \"bpf\", \"vm\", or leave it out to pick the first "
      .. "that can run (profile.available() lists them)", tostring(want)), 3)
  end
  if want == "vm" then
    local v = vm_why()
    if v then raise(fn, "the vm backend cannot run here: " .. v, 3) end
    return "vm"
  end
  local b = bpf_why()
  if not b then return "bpf" end
  if want == "bpf" then
    raise(fn, "the bpf backend cannot run here: " .. b .. " (leave options.backend out to fall back "
      .. "on the vm backend)", 3)
  end
  local v = vm_why()
  if v then raise(fn, "no backend can run here: bpf: " .. b .. "; vm: " .. v, 3) end
  return "vm"
end

-- -- Options --------------------------------------------------------------------------

local function check_options(fn, options, known)
  if options == nil then return {} end
  if type(options) ~= "table" then
    raise(fn, "options must be a table or nil, got a " .. type(options), 3)
  end
  for k in pairs(options) do
    if not known[k] then
      local names = {}
      for n in pairs(known) do names[#names + 1] = n end
      sort(names)
      raise(fn, format("unknown option %q (the options are %s)", tostring(k), concat(names, ", ")), 3)
    end
  end
  return options
end

local function check_int(fn, name, v, lo, hi, default)
  if v == nil then return default end
  if type(v) ~= "number" or v ~= floor(v) or v < lo or v > hi then
    raise(fn, format("options.%s must be an integer from %d to %d, got %s", name, lo, hi, tostring(v)), 3)
  end
  return v
end

local function check_str(fn, name, v)
  if v ~= nil and type(v) ~= "string" then
    raise(fn, format("options.%s must be a string or nil, got a %s", name, type(v)), 3)
  end
  return v
end

-- -- Reports --------------------------------------------------------------------------

-- The module of a frame "module:name": the part before the last ':'.
local function frame_module(f)
  return f:match("^(.*):[^:]*$") or f
end

-- The stack cut back to its outermost frame from module root (kept whole without one).
local function cut_root(stack, root)
  if not root then return stack end
  local pos = 1
  while true do
    local e = stack:find(";", pos, true)
    local f = stack:sub(pos, e and e - 1 or #stack)
    if frame_module(f) == root then return stack:sub(pos) end
    if not e then return stack end
    pos = e + 1
  end
end

local STATES = { "compiled", "interpreted", "cCode", "collecting", "compiling" }

local function new_sample(zp, stack)
  return { zonePath = zp, stack = stack, count = 0, compiled = 0, interpreted = 0, cCode = 0,
    collecting = 0, compiling = 0 }
end

local function add_sample(agg, r, zp, stack)
  local byz = agg[zp]
  if not byz then byz = {}; agg[zp] = byz end
  local s = byz[stack]
  if not s then s = new_sample(zp, stack); byz[stack] = s end
  s.count = s.count + r.count
  for _, k in ipairs(STATES) do s[k] = s[k] + r[k] end
end

local SampleReport = { __tostring = function(r) return r.text end }
SampleReport.__index = SampleReport

-- The report of rows (already filtered and cut): counts, distinct stacks, the text.
local function sample_report(rows, intervalMs, backend)
  local bystack, samples = {}, 0
  for _, r in ipairs(rows) do
    bystack[r.stack] = (bystack[r.stack] or 0) + r.count
    samples = samples + r.count
  end
  local list = {}
  for st, n in pairs(bystack) do list[#list + 1] = { st, n } end
  sort(list, function(a, b) if a[2] ~= b[2] then return a[2] > b[2] end return a[1] < b[1] end)
  local lines = {}
  for i, e in ipairs(list) do lines[i] = e[1] .. " " .. e[2] .. "\n" end
  return setmetatable({ intervalMs = intervalMs, samples = samples, stacks = #list,
    text = concat(lines), backend = backend }, SampleReport)
end

-- Writes text to filename, raising from fn when it cannot.
local function write_file(fn, filename, text)
  local f, e = io.open(filename, "wb")
  if not f then raise(fn, "cannot write " .. filename .. ": " .. tostring(e), 3) end
  local ok, e2 = f:write(text)
  f:close()
  if not ok then raise(fn, "cannot write " .. filename .. ": " .. tostring(e2), 3) end
end

-- A JSON string.
local function jstr(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    local m = { ['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }
    return m[c] or format("\\u%04x", c:byte())
  end) .. '"'
end

-- The nupp profile (version 1) of a vm-backend session, as record writes it.
local function profile_json(meta, rows, aborts)
  local out = { '{"version":1,"meta":{' }
  local m = {}
  for _, kv in ipairs(meta) do
    local v, js = kv[2], nil
    if kv[1] == "lost" then
      local l = {}
      for _, e in ipairs(v) do l[#l + 1] = jstr(e[1]) .. ":" .. e[2] end
      js = "{" .. concat(l, ",") .. "}"
    elseif v == nil then js = "null"
    elseif type(v) == "string" then js = jstr(v)
    elseif type(v) == "boolean" then js = tostring(v)
    elseif type(v) == "table" then js = "[" .. concat(v, ",") .. "]"
    elseif v == floor(v) then js = format("%d", v)
    else js = format("%.17g", v) end
    m[#m + 1] = jstr(kv[1]) .. ":" .. js
  end
  out[#out + 1] = concat(m, ",") .. '},"samples":['
  local s = {}
  for _, r in ipairs(rows) do
    s[#s + 1] = format('{"zonePath":%s,"stack":%s,"count":%d,"compiled":%d,"interpreted":%d,'
      .. '"cCode":%d,"collecting":%d,"compiling":%d}', jstr(r.zonePath), jstr(r.stack), r.count,
      r.compiled, r.interpreted, r.cCode, r.collecting, r.compiling)
  end
  out[#out + 1] = concat(s, ",") .. '],"aborts":['
  local a = {}
  for _, r in ipairs(aborts or {}) do
    a[#a + 1] = format('{"severity":%s,"count":%d,"reason":%s,"location":%s,"zonePath":%s}',
      jstr(r.severity), r.count, jstr(r.reason), jstr(r.location), jstr(r.zonePath))
  end
  out[#out + 1] = concat(a, ",") .. "]}\n"
  return concat(out)
end

local function is_json(filename) return filename:sub(-5) == ".json" end

-- -- Sample sessions ------------------------------------------------------------------

local sample_running = nil

local SampleSession = {}
SampleSession.__index = function(self, k)
  if k == "aggregate" then return SampleSession.live(self) end
  return SampleSession[k]
end

-- The aggregate so far: zone path -> stack -> Sample.
function SampleSession.live(self)
  local st = rawget(self, "_s")
  if st.backend == "vm" or self.stopped then return st.agg end
  local err = ffi.new("int[1]")
  local p = lib.nupp_session_snapshot(st.ses, err)
  if p == nil then raise("SampleSession.aggregate", "cannot read the samples: " .. ffi.string(lib.nupp_errmsg())) end
  local agg = {}
  for _, r in ipairs(bpf_rows(p)) do add_sample(agg, r, r.zonePath, r.stack) end
  lib.nupp_session_profile_free(p)
  return agg
end

local function not_stopped(self, fn)
  if self.stopped then
    raise("SampleSession." .. fn, "the session has stopped; a stopped session cannot be paused, "
      .. "resumed or stopped again (start a new one with profile.sample())", 3)
  end
end

-- Stops recording without ending the session (the timer keeps firing). Idempotent.
function SampleSession:pause()
  not_stopped(self, "pause")
  if self.paused then return end
  self.paused = true
  local st = rawget(self, "_s")
  if st.backend == "bpf" then lib.nupp_session_pause(st.ses, true) end
end

-- Resumes recording. Idempotent.
function SampleSession:resume()
  not_stopped(self, "resume")
  if not self.paused then return end
  self.paused = false
  local st = rawget(self, "_s")
  if st.backend == "bpf" then lib.nupp_session_pause(st.ses, false) end
end

-- Ends the session and reports what it saw (written to filename if given).
function SampleSession:stop(filename)
  not_stopped(self, "stop")
  if filename ~= nil and type(filename) ~= "string" then
    raise("SampleSession.stop", "filename must be a string or nil, got a " .. type(filename))
  end
  local st = rawget(self, "_s")
  local rows, report
  if st.backend == "bpf" then
    local err = ffi.new("int[1]")
    local p = lib.nupp_session_stop(st.ses, err)
    if p == nil then
      local m = ffi.string(lib.nupp_errmsg())
      lib.nupp_session_close(st.ses)
      self.stopped = true
      sample_running = nil
      raise("SampleSession.stop", "cannot read the samples: " .. m)
    end
    rows = bpf_rows(p)
    local agg = {}
    for _, r in ipairs(rows) do add_sample(agg, r, r.zonePath, r.stack) end
    st.agg = agg
    report = sample_report(rows, self.intervalMs, "bpf")
    if filename and is_json(filename) and lib.nupp_profile_write_json(p, filename) ~= 0 then
      local m = ffi.string(lib.nupp_errmsg())
      lib.nupp_session_profile_free(p)
      lib.nupp_session_close(st.ses)
      self.stopped, sample_running = true, nil
      raise("SampleSession.stop", m)
    end
    lib.nupp_session_profile_free(p)
    lib.nupp_session_close(st.ses)
  else
    require("jit.profile").stop()
    rows = {}
    local merged = {}
    local prefix = self.zoneFilter
    for zp, byz in pairs(st.agg) do
      if not prefix or zp:sub(1, #prefix) == prefix then
        for stack, r in pairs(byz) do add_sample(merged, r, zp, cut_root(stack, self.root)) end
      end
    end
    for _, byz in pairs(merged) do for _, r in pairs(byz) do rows[#rows + 1] = r end end
    sort(rows, function(a, b)
      if a.count ~= b.count then return a.count > b.count end
      if a.zonePath ~= b.zonePath then return a.zonePath < b.zonePath end
      return a.stack < b.stack
    end)
    report = sample_report(rows, self.intervalMs, "vm")
    if filename and is_json(filename) then
      local lost = { { "noVm", 0 }, { "readFault", 0 }, { "badFrame", 0 }, { "truncated", 0 },
        { "mapFull", 0 }, { "symbolize", 0 } }
      write_file("SampleSession.stop", filename, profile_json({
        { "tool", "nupp.profile" }, { "command", "nupp.profile (in-app)" }, { "target", nil },
        { "pids", { st.pid } }, { "backend", "vm" }, { "frequencyHz", floor(1000 / self.intervalMs + 0.5) },
        { "intervalMs", self.intervalMs }, { "depth", st.depth }, { "durationSec", os.clock() - st.t0 },
        { "samples", report.samples }, { "lost", lost }, { "zoneFilter", self.zoneFilter },
        { "root", self.root }, { "aborts", false }, { "includeBenign", false }, { "totalAborts", 0 },
        { "blacklisted", 0 }, { "luajit", jit and jit.version or _VERSION },
      }, rows, nil))
    end
  end
  self.stopped = true
  self.paused = false
  sample_running = nil
  if filename and not is_json(filename) then write_file("SampleSession.stop", filename, report.text) end
  return report
end

local SAMPLE_OPTIONS = { intervalMs = true, stackDepth = true, zone = true, root = true, backend = true }

-- Starts sampling.
function profile.sample(options)
  local o = check_options("sample", options, SAMPLE_OPTIONS)
  if sample_running then
    raise("sample", "a sample session is already running (one per process): stop it first with "
      .. "session:stop()")
  end
  local interval = check_int("sample", "intervalMs", o.intervalMs, 1, 60000, 10)
  local backend = pick_backend("sample", o.backend)
  local depth = check_int("sample", "stackDepth", o.stackDepth, 1, backend == "bpf" and 256 or 1000, 16)
  local zf = check_str("sample", "zone", o.zone)
  local root = check_str("sample", "root", o.root)
  local st = { backend = backend, depth = depth, agg = {}, t0 = os.clock() }
  local self = setmetatable({ intervalMs = interval, zoneFilter = zf, root = root, paused = false,
    stopped = false, backend = backend, _s = st }, SampleSession)
  if backend == "bpf" then
    st.ses, st.keep = bpf_open("sample", { samples = true, freq_hz = floor(1000 / interval + 0.5),
      depth = depth, zone = zf, root = root })
  else
    local jp = require("jit.profile")
    local dumpstack, zpath = jp.dumpstack, zone.path
    local agg = st.agg
    -- One frame more than asked: a deeper stack keeps its leaf-most stackDepth frames
    -- under a "[truncated]" root frame, as the bpf backend cuts it.
    local fmt, d = "F;", -(depth + 1)
    local key = { N = "compiled", I = "interpreted", C = "cCode", G = "collecting", J = "compiling" }
    local okp, pid = pcall(function() pcall(ffi.cdef, "int getpid(void);") return ffi.C.getpid() end)
    st.pid = okp and pid or 0
    jp.start("i" .. interval, function(th, n, vmstate)
      if self.paused then return end
      local stack = dumpstack(th, fmt, d):gsub(";$", "")
      if select(2, stack:gsub(";", ";")) >= depth then
        stack = "[truncated];" .. stack:match("^[^;]*;(.*)$")
      end
      local zp = zpath()
      local byz = agg[zp]
      if not byz then byz = {}; agg[zp] = byz end
      local s = byz[stack]
      if not s then s = new_sample(zp, stack); byz[stack] = s end
      s.count = s.count + n
      local k = key[vmstate] or "interpreted"
      s[k] = s[k] + n
    end)
  end
  sample_running = self
  return self
end

-- -- Trace sessions -------------------------------------------------------------------

local trace_running = nil

local SEV_ORDER = { blacklist = 0, warn = 1, info = 2 }

-- RFC 4180 field: quoted when it holds a comma, quote, CR or LF.
local function csv_field(s)
  s = tostring(s)
  if not s:find('[,"\r\n]') then return s end
  return '"' .. s:gsub('"', '""') .. '"'
end

local TraceReport = {}
TraceReport.__index = TraceReport
TraceReport.__tostring = function(r)
  local out = { "severity,count,reason,location,zonePath\r\n" }
  for _, s in ipairs(r.sites) do
    out[#out + 1] = concat({ csv_field(s.severity), csv_field(s.count), csv_field(s.reason),
      csv_field(s.location), csv_field(s.zonePath) }, ",") .. "\r\n"
  end
  return concat(out)
end

local function site_key(s)
  return s.severity .. "\t" .. s.reason .. "\t" .. s.location .. "\t" .. s.zonePath
end

local function sorted_sites(map)
  local list = {}
  for _, s in pairs(map) do list[#list + 1] = s end
  sort(list, function(a, b)
    if a.severity ~= b.severity then return SEV_ORDER[a.severity] < SEV_ORDER[b.severity] end
    if a.count ~= b.count then return a.count > b.count end
    if a.location ~= b.location then return a.location < b.location end
    if a.reason ~= b.reason then return a.reason < b.reason end
    return a.zonePath < b.zonePath
  end)
  return list
end

local TraceSession = {}
local LIVE = { sites = true, totalAborts = true, blacklisted = true }
TraceSession.__index = function(self, k)
  if LIVE[k] then
    local st = rawget(self, "_s")
    if st.backend == "bpf" and not rawget(self, "stopped") then TraceSession.refresh(self) end
    return st[k]
  end
  return TraceSession[k]
end

-- Reads the abort counts so far (bpf backend).
function TraceSession.refresh(self)
  local st = rawget(self, "_s")
  local err = ffi.new("int[1]")
  local p = lib.nupp_session_snapshot(st.ses, err)
  if p == nil then raise("TraceSession", "cannot read the aborts: " .. ffi.string(lib.nupp_errmsg()), 3) end
  local rows, total, bl = bpf_aborts(p)
  lib.nupp_session_profile_free(p)
  local sites = {}
  for _, r in ipairs(rows) do sites[site_key(r)] = r end
  st.sites, st.totalAborts, st.blacklisted = sites, total, bl
end

local function trace_not_stopped(self, fn)
  if rawget(self, "stopped") then
    raise("TraceSession." .. fn, "the session has stopped; a stopped session cannot be paused, "
      .. "resumed or stopped again (start a new one with profile.trace())", 3)
  end
end

-- Stops counting without ending the session (the hook stays attached). Idempotent.
function TraceSession:pause()
  trace_not_stopped(self, "pause")
  if rawget(self, "paused") then return end
  rawset(self, "paused", true)
  local st = rawget(self, "_s")
  if st.backend == "bpf" then lib.nupp_session_pause(st.ses, true) end
end

-- Resumes counting. Idempotent.
function TraceSession:resume()
  trace_not_stopped(self, "resume")
  if not rawget(self, "paused") then return end
  rawset(self, "paused", false)
  local st = rawget(self, "_s")
  if st.backend == "bpf" then lib.nupp_session_pause(st.ses, false) end
end

-- Ends the session and reports what it saw (CSV written to filename if given).
function TraceSession:stop(filename)
  trace_not_stopped(self, "stop")
  if filename ~= nil and type(filename) ~= "string" then
    raise("TraceSession.stop", "filename must be a string or nil, got a " .. type(filename))
  end
  local st = rawget(self, "_s")
  if st.backend == "bpf" then
    TraceSession.refresh(self)
    lib.nupp_session_close(st.ses)
  else
    jit.attach(st.handler)
  end
  rawset(self, "stopped", true)
  rawset(self, "paused", false)
  trace_running = nil
  local report = setmetatable({ durationSec = os.time() - self.startedAt, totalAborts = st.totalAborts,
    blacklisted = st.blacklisted, sites = sorted_sites(st.sites), backend = st.backend }, TraceReport)
  if filename then write_file("TraceSession.stop", filename, tostring(report)) end
  return report
end

-- The vm backend's jit.attach handler (classification as include/nupp/severity.h).
local function vm_trace_handler(self, st, include_benign)
  local jutil, vmdef, bit = require("jit.util"), require("jit.vmdef"), require("bit")
  local funcinfo, funcbc, traceinfo = jutil.funcinfo, jutil.funcbc, jutil.traceinfo
  local BENIGN = {
    ["trace too short"] = true, ["retry recording"] = true, ["leaving loop in root trace"] = true,
    ["inner loop in root trace"] = true, ["loop unroll limit reached"] = true,
    ["call unroll limit reached"] = true, ["down-recursion, restarting"] = true,
  }
  local function name6(t, n) return (t:sub(6 * n + 1, 6 * n + 6):gsub(" +$", "")) end
  local function opname(fn, pc)
    local ins = funcbc(fn, pc)
    return ins and name6(vmdef.bcnames, bit.band(ins, 0xff))
  end
  local function fmtfunc(fn, pc)
    local fi = funcinfo(fn, pc)
    if fi.loc then return fi.loc
    elseif fi.ffid then return vmdef.ffnames[fi.ffid]
    elseif fi.addr then return format("C:%x", fi.addr) end
    return "(?)"
  end
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
  local starts = {}
  return function(what, tr, fn, pc, otr, oex)
    if what == "start" then
      local s = { fn = fn, pc = pc, op = opname(fn, pc) }
      if oex == -1 then s.stitch_of, s.link = otr, traceinfo(otr) and traceinfo(otr).link end
      starts[tr] = s
    elseif what == "abort" then
      local s, sev = starts[tr], nil
      starts[tr] = nil
      if rawget(self, "paused") then return end
      if s and s.stitch_of then
        local ti = traceinfo(s.stitch_of)
        if ti and ti.link == s.stitch_of and s.link ~= s.stitch_of then sev = "blacklist" end
      elseif s then
        local after = opname(s.fn, s.pc)
        if s.op and after and (after == "I" .. s.op or (s.op == "ITERN" and after == "ITERC")) then
          sev = "blacklist"
        end
      end
      if not sev then
        sev = (type(otr) == "number" and BENIGN[vmdef.traceerr[otr]]) and "info" or "warn"
      end
      if sev == "info" and not include_benign then return end
      local site = { severity = sev, count = 0, reason = fmterr(otr, oex),
        location = funcinfo(fn, pc).loc or "", zonePath = zone.path() }
      local key = site_key(site)
      local r = st.sites[key]
      if not r then r = site; st.sites[key] = r end
      r.count = r.count + 1
      st.totalAborts = st.totalAborts + 1
      if sev == "blacklist" then st.blacklisted = st.blacklisted + 1 end
    end
  end
end

local TRACE_OPTIONS = { includeBenign = true, backend = true }

-- Starts collecting trace aborts.
function profile.trace(options)
  local o = check_options("trace", options, TRACE_OPTIONS)
  if trace_running then
    raise("trace", "a trace session is already running (one per process): stop it first with "
      .. "session:stop()")
  end
  if o.includeBenign ~= nil and type(o.includeBenign) ~= "boolean" then
    raise("trace", "options.includeBenign must be a boolean or nil, got a " .. type(o.includeBenign))
  end
  local backend = pick_backend("trace", o.backend)
  local st = { backend = backend, sites = {}, totalAborts = 0, blacklisted = 0 }
  local self = setmetatable({ includeBenign = o.includeBenign or false, startedAt = os.time(),
    paused = false, stopped = false, backend = backend, _s = st }, TraceSession)
  if backend == "bpf" then
    st.ses, st.keep = bpf_open("trace", { aborts = true, include_benign = o.includeBenign or false })
    -- Nothing to hand to jit.attach: the probes live in the kernel.
    self.callback = function() end
  else
    st.handler = vm_trace_handler(self, st, o.includeBenign or false)
    self.callback = st.handler
    jit.attach(st.handler, "trace")
  end
  trace_running = self
  return self
end

return profile
