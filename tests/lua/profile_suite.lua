-- The nupp.profile API, sentence by sentence of its reference, on one backend:
--   luajit profile_suite.lua BACKEND     (bpf | vm | auto: what the module picks itself)
-- with EXPECT=bpf|vm to check which one "auto" picked (and EXPECT_WHY, below, to check why
-- bpf could not). Exits non-zero on the first failure.
-- Runs in our LuaJIT and in any other LuaJIT 2.1 (Debian's, with the modules from luarocks).
local profile = require("nupp.profile")
local zone = require("nupp.zone")

local want = arg[1] or "auto"
local backend = want ~= "auto" and want or nil
local expect = os.getenv("EXPECT") or want
local TMP = os.getenv("TMPDIR") or "/tmp"
local checks = 0

local function fail(msg) io.stderr:write("FAIL: ", msg, "\n") os.exit(1) end
local function check(c, msg) checks = checks + 1 if not c then fail(msg) end end
local function eq(a, b, msg) check(a == b, (msg or "") .. ": expected [" .. tostring(b) .. "], got [" .. tostring(a) .. "]") end
-- Asserts that f raises, with a message containing every given fragment.
local function raises(f, ...)
  local ok, e = pcall(f)
  check(not ok, "expected an error")
  for _, frag in ipairs({ ... }) do
    check(tostring(e):find(frag, 1, true), "error [" .. tostring(e) .. "] lacks [" .. frag .. "]")
  end
  return e
end

-- -- Workloads: known call graphs, interpreted so every frame is a real frame --------

jit.off()
local function spin(t) local t0 = os.clock() while os.clock() - t0 < t do local s = 0 for i = 1, 200 do s = s + i end end end
local function work_a(t) spin(t) end
local function work_b(t) spin(t) end
local function work_c(t) spin(t) end
-- A module "rootmod" called from two different chunks (wrapA, wrapB).
local rootmod = assert(loadstring("local spin = ... return function(t) spin(t) end", "=rootmod"))(spin)
local wrapA = assert(loadstring("local f = ... return function(t) f(t) end", "=wrapA"))(rootmod)
local wrapB = assert(loadstring("local f = ... return function(t) f(t) end", "=wrapB"))(rootmod)

-- Lines of a collapsed text as {stack, count}, checking the format.
local function parse_text(text)
  local rows, sum, last = {}, 0, math.huge
  for line in text:gmatch("[^\n]*\n") do
    local st, n = line:match("^(%S+) (%d+)\n$")
    check(st, "bad collapsed line [" .. line .. "]")
    n = tonumber(n)
    check(n <= last, "lines not ordered by count descending")
    last = n
    rows[#rows + 1] = { st, n }
    sum = sum + n
  end
  check(#table.concat((function() local t = {} for _, r in ipairs(rows) do t[#t + 1] = r[1] .. " " .. r[2] .. "\n" end return t end)()) == #text,
    "text is not exactly its lines")
  return rows, sum
end

local function count_of(rows, pat)
  local n = 0
  for _, r in ipairs(rows) do if r[1]:find(pat) then n = n + r[2] end end
  return n
end

-- -- available() ---------------------------------------------------------------------

local av, why = profile.available()
check(type(av) == "table" and type(why) == "table", "available() returns two tables")
for _, b in ipairs(av) do check(b == "bpf" or b == "vm", "unknown backend " .. b) end
check(#av >= 1, "no backend available")
local has = {}
for _, b in ipairs(av) do has[b] = true end
for _, b in ipairs({ "bpf", "vm" }) do
  check(has[b] or (type(why[b]) == "string" and #why[b] > 10), "no reason why " .. b .. " cannot run")
end
if expect == "vm" and not backend then
  check(not has.bpf, "bpf should not be available here")
  print("bpf not available: " .. why.bpf)
end
-- EXPECT_WHY="A|B|...": why.bpf names each fragment, and so do the raises of both kinds of
-- session that demand bpf (e.g. CAP_SYS_ADMIN and its remedy, for a user with only
-- CAP_BPF + CAP_PERFMON + CAP_SYS_PTRACE).
if os.getenv("EXPECT_WHY") then
  local frags = {}
  for f in os.getenv("EXPECT_WHY"):gmatch("[^|]+") do frags[#frags + 1] = f end
  for _, f in ipairs(frags) do
    check(type(why.bpf) == "string" and why.bpf:find(f, 1, true), "why.bpf [" .. tostring(why.bpf) .. "] lacks [" .. f .. "]")
  end
  raises(function() profile.sample({ backend = "bpf" }) end, "nupp.profile.sample", "the bpf backend cannot run here", unpack(frags))
  raises(function() profile.trace({ backend = "bpf" }) end, "nupp.profile.trace", "the bpf backend cannot run here", unpack(frags))
end

-- -- profile.sample: defaults, fields, raises ------------------------------------------

local s = profile.sample({ backend = backend })
eq(s.backend, expect, "backend picked")
eq(s.intervalMs, 10, "default intervalMs")
eq(s.zoneFilter, nil, "default zoneFilter")
eq(s.root, nil, "default root")
eq(s.paused, false, "paused at start")
eq(s.stopped, false, "stopped at start")
raises(function() profile.sample({ backend = backend }) end, "nupp.profile.sample", "already running", "stop")
work_a(0.4)
-- the live aggregate shows what was sampled so far
local agg, live = s.aggregate, 0
check(type(agg) == "table", "aggregate is a table")
for zp, byz in pairs(agg) do
  for st, smp in pairs(byz) do
    eq(smp.zonePath, zp, "Sample.zonePath")
    eq(smp.stack, st, "Sample.stack")
    eq(smp.compiled + smp.interpreted + smp.cCode + smp.collecting + smp.compiling, smp.count, "five states sum to count")
    live = live + smp.count
  end
end
check(live > 0, "the live aggregate is empty after 0.4 s")
check(agg[""] ~= nil, "Sample.zonePath is \"\" when no zone was open")
for zp in pairs(agg) do eq(zp, "", "zone path of samples taken with no zone open") end
-- pause and resume are idempotent; what a pause leaves out is missing
s:pause() s:pause()
eq(s.paused, true, "paused after pause")
work_b(0.4)
s:resume() s:resume()
eq(s.paused, false, "not paused after resume")
work_c(0.4)
local r = s:stop()
eq(s.stopped, true, "stopped after stop")
eq(r.backend, expect, "report backend")
eq(r.intervalMs, 10, "report intervalMs")
eq(tostring(r), r.text, "tostring(report) is its text")
local rows, sum = parse_text(r.text)
eq(sum, r.samples, "report.samples is the sum of the text")
eq(#rows, r.stacks, "report.stacks is the number of lines")
check(count_of(rows, "work_a") > 10 and count_of(rows, "work_c") > 10, "work_a and work_c sampled")
eq(count_of(rows, "work_b"), 0, "samples taken while paused")
raises(function() s:stop() end, "SampleSession.stop", "stopped")
raises(function() s:pause() end, "SampleSession.pause", "stopped")
raises(function() s:resume() end, "SampleSession.resume", "stopped")

-- options and their checks
raises(function() profile.sample({ intervalMS = 5, backend = backend }) end, "unknown option", "intervalMs")
raises(function() profile.sample({ intervalMs = 0, backend = backend }) end, "intervalMs must be an integer")
raises(function() profile.sample({ stackDepth = "x", backend = backend }) end, "stackDepth")
raises(function() profile.sample({ backend = "gpu" }) end, "unknown backend", "profile.available()")
raises(function() profile.sample(5) end, "options must be a table")

-- intervalMs and stackDepth
s = profile.sample({ intervalMs = 5, stackDepth = 2, backend = backend })
eq(s.intervalMs, 5, "intervalMs option")
local c0 = os.clock() -- after the start: loading BPF programs costs this process CPU time
work_a(0.4)
local cpu = os.clock() - c0
r = s:stop()
eq(r.intervalMs, 5, "report of intervalMs")
rows = parse_text(r.text)
check(#rows > 0, "samples at 5 ms")
-- One sample per intervalMs of this process's CPU time (the ground truth: os.clock).
local want_n = cpu / 0.005
-- (jit.profile's itimer runs up to ~30 % fast here; 10 ms would give half.)
check(r.samples >= 0.7 * want_n and r.samples <= 1.45 * want_n,
  string.format("intervalMs 5: %d samples in %.3f s of CPU, expected about %d", r.samples, cpu, want_n))
-- A stack deeper than stackDepth keeps its leaf-most frames under a [truncated] root.
local cut = 0
for _, row in ipairs(rows) do
  local frames = row[1]:gsub("^%[truncated%];", function() cut = cut + 1 return "" end)
  local n = select(2, frames:gsub(";", ";")) + 1
  check(n <= 2, "stackDepth 2 gave " .. n .. " frames: " .. row[1])
  check(n == 2 or not row[1]:find("^%[truncated%]"), "a cut stack keeps 2 frames: " .. row[1])
end
check(cut > 0, "work_a runs 3 frames deep: its stacks are cut under [truncated]")

-- zones: the same stack in two zones is one line; the zone filter keeps a subtree
s = profile.sample({ backend = backend, zone = "frame" })
eq(s.zoneFilter, "frame", "zoneFilter field")
zone("frame") zone("render") work_a(0.3) zone() zone()
zone("io") work_a(0.3) zone()
local z_agg = s.aggregate
r = s:stop()
rows = parse_text(r.text)
check(count_of(rows, "work_a") > 0, "zone frame/render sampled")
local a_fr, a_io = 0, 0
for st, smp in pairs(z_agg["frame/render"] or {}) do if st:find("work_a") then a_fr = a_fr + smp.count end end
for st, smp in pairs(z_agg["io"] or {}) do if st:find("work_a") then a_io = a_io + smp.count end end
check(a_fr > 5 and a_io > 5, "aggregate by zone path: frame/render " .. a_fr .. ", io " .. a_io)
-- the filter: only frame/... samples are in the report
check(r.samples < a_fr + a_io and r.samples >= a_fr * 0.8, "zone filter: " .. r.samples .. " of " .. a_fr .. "+" .. a_io)
s = profile.sample({ backend = backend })
zone("x") work_a(0.2) zone() zone("y") work_a(0.2) zone()
r = s:stop()
rows = parse_text(r.text)
local lines_a = 0
for _, row in ipairs(rows) do if row[1]:find("work_a") and row[1]:find("spin") then lines_a = lines_a + 1 end end
check(lines_a <= 2, "a stack sampled in two zones is one line (got " .. lines_a .. " work_a lines)")
-- process-wide rather than per-coroutine: a coroutine's samples count too
s = profile.sample({ backend = backend })
coroutine.wrap(function() work_b(0.3) end)()
r = s:stop()
check(count_of(parse_text(r.text), "work_b") > 10, "samples taken in a coroutine")
s = profile.sample({ backend = backend, zone = "nomatch" })
work_a(0.2)
r = s:stop()
eq(r.text, "", "a zone prefix that matched nothing gives empty text")
eq(r.samples, 0, "and no samples")

-- root: stacks that differ only below the root merge; no frame from it: kept whole
s = profile.sample({ backend = backend, root = "rootmod" })
eq(s.root, "rootmod", "root field")
wrapA(0.3) wrapB(0.3) work_a(0.3)
r = s:stop()
rows = parse_text(r.text)
local cut, whole = 0, 0
for _, row in ipairs(rows) do
  if row[1]:find("^rootmod:") then cut = cut + 1 check(not row[1]:find("wrap"), "frames below the root kept: " .. row[1]) end
  if row[1]:find("work_a") then whole = whole + 1 check(row[1]:find(";", 1, true), "a stack without the root is kept whole") end
end
check(cut >= 1 and cut <= 2, "stacks through wrapA and wrapB merged under rootmod: " .. cut .. " lines")
check(whole >= 1, "work_a kept")

-- stop(filename): collapsed text, or the nupp profile for .json
s = profile.sample({ backend = backend })
zone("frame") work_a(0.3) zone()
local folded, json = TMP .. "/nupp-suite.folded", TMP .. "/nupp-suite.json"
r = s:stop(folded)
local f = assert(io.open(folded, "rb"))
eq(f:read("*a"), r.text, "stop(file) writes the collapsed text")
f:close()
s = profile.sample({ backend = backend })
zone("frame") work_a(0.3) zone()
r = s:stop(json)
local ffi = require("ffi")
pcall(ffi.cdef, "int getpid(void);")
-- spin's lines as LuaJIT itself gives them: the bpf backend's frame table (meta.frames,
-- made in its helper process) says where the function of frame "profile_suite.lua:spin" is.
local spin_info = debug.getinfo(spin, "S")
local py = io.popen("python3 - " .. json .. " " .. r.samples .. " " .. ffi.C.getpid() .. " " .. spin_info.linedefined
  .. " " .. spin_info.lastlinedefined .. [[ <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["version"] == 1
m = d["meta"]
# this process only: whatever drains the samples is never charged to the program
assert m["pids"] == [int(sys.argv[3])], (m["pids"], sys.argv[3])
assert m["samples"] == int(sys.argv[2]) == sum(s["count"] for s in d["samples"]), (m["samples"], sys.argv[2])
assert m["backend"] in ("bpf", "vm")
assert any(s["zonePath"] == "frame" for s in d["samples"])
for s in d["samples"]:
    assert s["count"] == s["compiled"] + s["interpreted"] + s["cCode"] + s["collecting"] + s["compiling"]
if m["backend"] == "bpf":
    spin = m["frames"].get("profile_suite.lua:spin")
    assert spin == [{"file": "profile_suite.lua", "firstLine": int(sys.argv[4]), "lastLine": int(sys.argv[5])}], spin
print("json ok", m["backend"])
PY]])
local out = py:read("*a")
py:close()
check(out:find("json ok " .. expect, 1, true), "the .json profile as python reads it: " .. out)
os.remove(folded) os.remove(json)

-- -- profile.trace ---------------------------------------------------------------------

jit.on()
jit.flush()
local FNEW = "local s = 0 for i = 1, 3000 do s = s + (function() return i end)() end return s"
local t0 = os.time()
local t = profile.trace({ backend = backend })
eq(t.backend, expect, "trace backend")
eq(t.includeBenign, false, "includeBenign default")
eq(t.paused, false, "paused")
eq(t.stopped, false, "stopped")
check(t.startedAt >= t0 and t.startedAt <= os.time(), "startedAt is os.time")
eq(type(t.callback), "function", "callback")
raises(function() profile.trace({ backend = backend }) end, "nupp.profile.trace", "already running")
zone("net") assert(loadstring(FNEW, "=abort_net"))() zone()
check(t.totalAborts > 0, "totalAborts live")
local key, site = next(t.sites)
check(key and site.zonePath == "net" and site.location == "abort_net:1", "sites live: " .. tostring(key))
-- An unrecordable bytecode is rendered with the opcode's name.
eq(site.reason, "NYI: bytecode FNEW", "AbortSite.reason of an FNEW abort")
t:pause() t:pause()
assert(loadstring(FNEW, "=abort_paused"))()
t:resume() t:resume()
assert(loadstring(FNEW, "=abort_after"))()
local tr = t:stop(TMP .. "/nupp-suite.csv")
eq(t.stopped, true, "trace stopped")
check(tr.durationSec >= 0 and tr.durationSec == math.floor(tr.durationSec), "durationSec whole seconds")
check(tr.totalAborts >= 2, "aborts counted")
local total = 0
for i, st in ipairs(tr.sites) do
  total = total + st.count
  check(st.location ~= "abort_paused:1", "an abort while paused was counted")
  if i > 1 then
    local o = { blacklist = 0, warn = 1, info = 2 }
    local p = tr.sites[i - 1]
    check(o[p.severity] < o[st.severity] or (p.severity == st.severity and p.count >= st.count), "sites order")
  end
end
eq(total, tr.totalAborts, "sites sum to totalAborts")
raises(function() t:stop() end, "TraceSession.stop", "stopped")
raises(function() t:pause() end, "stopped")
raises(function() t:resume() end, "TraceSession.resume", "stopped")
local after
for _, st in ipairs(tr.sites) do if st.location == "abort_after:1" then after = st end end
check(after, "abort after resume counted")
eq(after.zonePath, "", "AbortSite.zonePath is \"\" when no zone was open")
-- tostring is RFC 4180 CSV with a header, read back by python's csv module
local csvf = assert(io.open(TMP .. "/nupp-suite.csv", "rb"))
eq(csvf:read("*a"), tostring(tr), "stop(file) writes the CSV")
csvf:close()
py = io.popen("python3 -c 'import csv,sys; r=list(csv.reader(open(sys.argv[1], newline=\"\"))); print(r[0]); print(len(r)-1, sum(int(x[1]) for x in r[1:]))' " .. TMP .. "/nupp-suite.csv")
out = py:read("*a")
py:close()
check(out:find("['severity', 'count', 'reason', 'location', 'zonePath']", 1, true), "CSV header: " .. out)
check(out:find("\n" .. #tr.sites .. " " .. tr.totalAborts, 1, true), "CSV rows: " .. out)
os.remove(TMP .. "/nupp-suite.csv")
-- includeBenign counts trace formation too
-- An inner loop of two iterations gets hot first and its trace leaves it ("leaving loop
-- in root trace"): trace formation, which is benign, counted only with includeBenign.
local NESTED = "local s = 0 for i = 1, 1000 do for j = 1, 2 do s = s + j end end return s"
local function benign_rows(report)
  local n = 0
  for _, st in ipairs(report.sites) do
    if st.location:find("^benign") then
      eq(st.severity, "info", "severity of a trace-formation abort (" .. st.reason .. ")")
      n = n + st.count
    end
  end
  return n
end
jit.flush()
t = profile.trace({ backend = backend })
for i = 1, 3 do assert(loadstring(NESTED, "=benign" .. i))() end
tr = t:stop()
eq(benign_rows(tr), 0, "benign aborts counted without includeBenign")
for _, st in ipairs(tr.sites) do check(st.severity ~= "info", "an info row without includeBenign") end
jit.flush()
t = profile.trace({ backend = backend, includeBenign = true })
eq(t.includeBenign, true, "includeBenign option")
for i = 1, 3 do assert(loadstring(NESTED, "=benign" .. i))() end
tr = t:stop()
local nb = benign_rows(tr)
check(nb > 0, "includeBenign: no trace-formation abort counted")
local sum_all = 0
for _, st in ipairs(tr.sites) do sum_all = sum_all + st.count end
eq(tr.totalAborts, sum_all, "totalAborts includes the benign ones with includeBenign")
-- blacklist: a loop that aborts until LuaJIT blacklists it; first in the order, and
-- blacklisted counts those events.
jit.flush()
t = profile.trace({ backend = backend })
assert(loadstring("local s = 0 for i = 1, 300000 do s = s + (function() return i end)() end return s", "=blist"))()
tr = t:stop()
local nbl = 0
for _, st in ipairs(tr.sites) do
  if st.severity == "blacklist" then
    nbl = nbl + st.count
    eq(st.location, "blist:1", "location of the blacklisting")
    eq(st.reason, "NYI: bytecode FNEW", "reason of the blacklisting")
  end
end
check(nbl >= 1, "a loop aborting 300000 times was never blacklisted")
eq(tr.blacklisted, nbl, "TraceReport.blacklisted is the blacklist rows' count")
eq(tr.sites[1].severity, "blacklist", "blacklist rows come first")
-- vm: callback is the handler jit.attach was given; handing it back detaches it
if expect == "vm" then
  jit.flush()
  t = profile.trace({ backend = backend })
  jit.attach(t.callback)
  assert(loadstring(FNEW, "=detached"))()
  tr = t:stop()
  eq(tr.totalAborts, 0, "aborts counted after jit.attach(session.callback) detached it")
end
raises(function() profile.trace({ includeBenign = 1, backend = backend }) end, "includeBenign must be a boolean")

-- Dropping a handle without stop leaves its session running for the rest of the process
-- (no __gc stop): collected or not, the next session of its kind still raises.
do local _ = profile.sample({ backend = backend }) local _ = profile.trace({ backend = backend }) end
collectgarbage() collectgarbage()
raises(function() profile.sample({ backend = backend }) end, "nupp.profile.sample", "already running")
raises(function() profile.trace({ backend = backend }) end, "nupp.profile.trace", "already running")

print(string.format("PASS: nupp.profile suite, backend %s, %d checks", expect, checks))
