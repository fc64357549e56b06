-- An app that profiles itself in the background (nupp.profile, bpf backend), forks a
-- child that keeps running (it holds the session's socket: a fork keeps every
-- descriptor), then either stops the session and exits, or exits without stopping.
-- usage: luajit helper_fork.lua stop|exit
-- Prints "app PID child PID" and, with stop, "samples N".
local profile = require("nupp.profile")
local ffi = require("ffi")
ffi.cdef("int fork(void); int getpid(void); unsigned int sleep(unsigned int); void _exit(int);")

local s = profile.sample({ backend = "bpf" })
local t0 = os.clock()
while os.clock() - t0 < 0.3 do end
local child = ffi.C.fork()
if child == 0 then
  ffi.C.sleep(30)
  ffi.C._exit(0)
end
io.write("app ", ffi.C.getpid(), " child ", child, "\n")
if arg[1] == "stop" then
  local r = s:stop()
  io.write("samples ", r.samples, "\n")
end
io.flush()
os.exit(0)
