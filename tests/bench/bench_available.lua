-- How long profile.available() takes in a fresh process (the first call tries the
-- privileges and the kernel: a BPF program, CPU-clock events, a uprobe) and after that
-- (what was tried is reused):
--   [sudo] build/luajit/bin/luajit tests/bench/bench_available.lua [runs]
-- Runs itself `runs` times as a child process and prints the medians, in ms.
local ffi = require("ffi")
ffi.cdef [[ struct nupp_bench_ts { long s, ns; }; int clock_gettime(int, struct nupp_bench_ts *); ]]
local ts = ffi.new("struct nupp_bench_ts")
local function now() ffi.C.clock_gettime(1, ts) return tonumber(ts.s) + tonumber(ts.ns) / 1e9 end

if arg[1] == "--child" then
  local t0 = now()
  local profile = require("nupp.profile")
  local t1 = now()
  local av, why = profile.available()
  local t2 = now()
  profile.available()
  local t3 = now()
  print(("%.3f %.3f %.3f %s"):format((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3,
    table.concat(av, ",") .. (why.bpf and (" (bpf: " .. why.bpf .. ")") or "")))
  os.exit(0)
end

local runs = tonumber(arg[1]) or 9
local exe = arg[-1] or "luajit"
local cols, backends = { {}, {}, {} }, nil
for _ = 1, runs do
  local p = assert(io.popen(("%q %q --child"):format(exe, arg[0])))
  local line = p:read("*l")
  p:close()
  local a, b, c, rest = line:match("^(%S+) (%S+) (%S+) (.*)$")
  cols[1][#cols[1] + 1], cols[2][#cols[2] + 1], cols[3][#cols[3] + 1] = tonumber(a), tonumber(b), tonumber(c)
  backends = rest
end
local function median(t) table.sort(t) return t[math.ceil(#t / 2)] end
print("backends: " .. backends)
print("| require(\"nupp.profile\") | first available() | next available() |")
print("|---|---|---|")
print(("| %.1f ms | %.1f ms | %.3f ms |"):format(median(cols[1]), median(cols[2]), median(cols[3])))
