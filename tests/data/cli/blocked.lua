-- dump's test workload: a known call graph that ends blocked in a system call, with
-- known locals. main() calls read_input() (not a tail call), which blocks in io.read
-- until stdin has a line; with arg[1] = "ffi" it blocks in poll(2) through the FFI
-- instead, interpreted; with "zone" it reads in the zone path request/parse.
local mode = arg and arg[1] or "read"

local function read_input(prompt)
  local n = 42
  local label = "waiting for input"
  local line = io.read("*l")
  return line, n, label, prompt
end

local function wait_ffi(ms)
  local ffi = require("ffi")
  ffi.cdef("int poll(void *fds, unsigned long nfds, int timeout);")
  local calls = 7
  local r = ffi.C.poll(nil, 0, ms)
  return r, calls
end
jit.off(wait_ffi)

local function main()
  local t = { 1, 2, 3 }
  local r
  if mode == "ffi" then r = wait_ffi(100000) else r = read_input("> ") end
  return r, t
end

if mode == "zone" then local zone = require("nupp.zone") zone("request") zone("parse") end local res = main()
io.stdout:write("done ", tostring(res), "\n")
