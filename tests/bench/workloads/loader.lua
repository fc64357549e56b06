-- Benchmark workload: code loaded, run and collected over and over (templates, configs,
-- plugins compiled at run time), fixed work. Every chunk has 21 prototypes, each born
-- (luajit:proto_new) and freed (luajit:proto_free) once per round: the worst case for
-- the sampler's prototype lifetime programs.
local now = dofile((arg[0]:match("^(.*)/") or ".") .. "/clock.lua")
local t0, c0 = now(), os.clock()
local ROUNDS = tonumber(arg and arg[1]) or 4000
local parts = { "local M = {}" }
for i = 1, 20 do
  parts[#parts + 1] = ("function M.f%d(n) local s = 0 for i = 1, n do s = s + (i * %d) %% 7 end return s end"):format(i, i)
end
parts[#parts + 1] = "return M"
local src = table.concat(parts, "\n")
local total = 0
for r = 1, ROUNDS do
  local M = assert(loadstring(src, "=plugin" .. r % 10))()
  for i = 1, 20 do total = total + M["f" .. i](200) end
  if r % 100 == 0 then collectgarbage() end
end
print(total)
io.stderr:write(("elapsed %.4f\ncpu %.4f\n"):format(now() - t0, os.clock() - c0))
