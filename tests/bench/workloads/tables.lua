-- Benchmark workload: allocation, GC, strings and C library calls (binary trees,
local now = dofile((arg[0]:match("^(.*)/") or ".") .. "/clock.lua")
local t0, c0 = now(), os.clock()
-- string building, table.sort), fixed work.
local N = tonumber(arg and arg[1]) or 16
local function make(d) if d == 0 then return {} end return {make(d - 1), make(d - 1)} end
local function check(t) if not t[1] then return 1 end return 1 + check(t[1]) + check(t[2]) end
local total = 0
for d = 4, N, 2 do
  for _ = 1, 2 ^ (N - d + 4) do total = total + check(make(d)) end
end
local parts = {}
for i = 1, 200000 do parts[i] = tostring((i * 7919) % 100003) end
table.sort(parts)
print(total, #table.concat(parts, ","))
io.stderr:write(("elapsed %.4f\ncpu %.4f\n"):format(now() - t0, os.clock() - c0))
