-- A parent that forks children without exec (ffi fork): arg[1] children (100), at most
-- arg[2] alive at once (4), each spending arg[3] CPU seconds (0.1) in child_work before
-- _exit; the parent spends 0.5 s in parent_work first. Every process writes one line to
-- stdout, "child PID SECONDS" or "parent PID SECONDS" (its os.clock in its function),
-- so a profile's per-process rows can be checked against each process's own clock.
local ffi = require("ffi")
ffi.cdef [[
int fork(void);
int getpid(void);
int waitpid(int pid, int *status, int options);
void _exit(int status);
]]
local n, width, secs = tonumber(arg[1]) or 100, tonumber(arg[2]) or 4, tonumber(arg[3]) or 0.1

local function spin(s)
  local t0, x = os.clock(), 0
  while os.clock() - t0 < s do
    for i = 1, 1000 do x = x + i % 7 end
  end
  return os.clock() - t0
end

local function child_work() return spin(secs) end
local function parent_work() return spin(0.5) end

local spent = parent_work()
local alive, pids = {}, 0
for _ = 1, n do
  if #alive >= width then
    ffi.C.waitpid(table.remove(alive, 1), nil, 0)
  end
  local pid = ffi.C.fork()
  if pid == 0 then
    local s = child_work()
    io.stdout:write(("child %d %.6f\n"):format(ffi.C.getpid(), s))
    io.stdout:flush()
    ffi.C._exit(0)
  end
  assert(pid > 0, "fork failed")
  alive[#alive + 1] = pid
  pids = pids + 1
end
for _, pid in ipairs(alive) do ffi.C.waitpid(pid, nil, 0) end
io.stdout:write(("parent %d %.6f\n"):format(ffi.C.getpid(), spent))
