-- The request handlers of tests/cli/test_record_nginx.sh: known CPU work in named
-- functions (handle -> spin_a, spin_b; each a loop of its own), timed by the worker's
-- own CPU clock, and a loop that aborts its traces (an unsupported fast function
-- variant), for the abort table.
local ffi = require("ffi")
local clock = os.clock
local M = { a = 0, b = 0 }

local function spin_a(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

local function spin_b(n)
  local s = 0
  for i = 1, n do s = s + (i % 3) * 2 end
  return s
end

function M.handle()
  local t0 = clock()
  local x = spin_a(3000000)
  local t1 = clock()
  local y = spin_b(2000000)
  M.a, M.b = M.a + (t1 - t0), M.b + (clock() - t1)
  return x + y
end

function M.abort()
  local s = 0
  for _ = 1, 200 do s = s + ffi.sizeof(ffi.typeof("int")) end
  return s
end

-- The worker's own CPU time in each function, in seconds.
function M.write_truth(path)
  local f = assert(io.open(path, "w"))
  f:write(("%.6f %.6f\n"):format(M.a, M.b))
  f:close()
end

return M
