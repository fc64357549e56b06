-- Benchmark workload: a program that defines N distinct Lua functions (one prototype each,
-- loaded in chunks of PER, chunk "=manyK") and calls them along pseudo-random paths of
-- DEPTH frames, the leaf doing a little work, so nearly every sample is a stack never seen
-- before and the sampler's frame cache and stacks map meet thousands of hot functions.
-- RELOAD chunks a second are loaded again (their old prototypes freed by the GC), so the
-- prototype event stream never stops. JIT on. On exit it prints on stderr its wall time
-- ("elapsed S"), its own CPU time ("cpu S") and its voluntary context switches ("nvcsw N").
-- PER functions a chunk (PER >= N: all of them in one chunk, "=many0").
-- usage: luajit many_funcs.lua [N=5000] [CPU seconds=10] [DEPTH=12] [RELOAD=0] [PER=100]
local ffi = require("ffi")
local now = dofile((arg[0]:match("^(.*)/") or ".") .. "/clock.lua")
ffi.cdef [[
struct nupp_rusage { long utime_s, utime_us, stime_s, stime_us, maxrss, ixrss, idrss, isrss,
  minflt, majflt, nswap, inblock, oublock, msgsnd, msgrcv, nsignals, nvcsw, nivcsw; };
int getrusage(int who, struct nupp_rusage *r);
]]
local N = tonumber(arg[1]) or 5000
local secs = tonumber(arg[2]) or 10
local DEPTH = tonumber(arg[3]) or 12
local RELOAD = tonumber(arg[4]) or 0
local PER = tonumber(arg[5]) or 100
local F = {}

-- Chunk k defines functions k*PER+1 .. k*PER+PER into F: each calls a pseudo-random
-- function (a linear congruential step of r) until depth d is spent.
local function chunk(k)
  local src = { "local F, N = ...\n" }
  for i = k * PER + 1, math.min(N, k * PER + PER) do
    src[#src + 1] = ([[
F[%d] = function(d, r)
  if d <= 0 then
    local s = 0
    for j = 1, 200 + r %% 64 do s = s + j %% %d end
    return s
  end
  r = (r * 1103515245 + 12345) %% 2147483648
  return F[1 + r %% N](d - 1, r) + %d
end
]]):format(i, 3 + i % 5, i)
  end
  assert(load(table.concat(src), "=many" .. k))(F, N)
end

local nchunks = math.ceil(N / PER)
for k = 0, nchunks - 1 do chunk(k) end
local t0, sink, r, nextk = now(), 0, 1, 0
local c0 = os.clock()
local reload_every = RELOAD > 0 and 1 / RELOAD or math.huge
local next_reload = os.clock() + reload_every
while os.clock() - c0 < secs do
  for _ = 1, 100 do
    r = (r * 1103515245 + 12345) % 2147483648
    sink = sink + F[1 + r % N](DEPTH, r)
  end
  if os.clock() >= next_reload then
    chunk(nextk)
    nextk = (nextk + 1) % nchunks
    next_reload = next_reload + reload_every
  end
end
local ru = ffi.new("struct nupp_rusage")
ffi.C.getrusage(0, ru)
io.stderr:write(("elapsed %.4f\ncpu %.4f\nnvcsw %d\n"):format(now() - t0,
  tonumber(ru.utime_s) + tonumber(ru.utime_us) / 1e6 + tonumber(ru.stime_s) + tonumber(ru.stime_us) / 1e6,
  tonumber(ru.nvcsw)))
print(sink % 1000)
