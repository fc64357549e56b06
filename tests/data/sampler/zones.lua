-- Sampler test workload for zone ids, kept as nupp.zone keeps them: the current zone id
-- is a double (a Lua number's 8 bytes) whose address sits in a u64 slot; the script
-- prints the slot's address first. work_a runs in zone 1, work_b in zone 2, the rest in
-- zone 0. stdin gates the start and the exit; stdout gets the address, then "done".
local ffi = require("ffi")
local seconds = tonumber(arg[1]) or 3
local zone = ffi.new("double[1]")
local slot = ffi.new("uint64_t[1]")
slot[0] = ffi.cast("uint64_t", ffi.cast("uintptr_t", zone))
print(tostring(ffi.cast("uintptr_t", slot))) -- "<address>ULL"
io.stdout:flush()

local function spin(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
jit.off(spin)

local function work_a() zone[0] = 1; spin(200000); zone[0] = 0 end
local function work_b() zone[0] = 2; spin(100000); zone[0] = 0 end
local function work_none() spin(100000) end

io.read(1)
local t0 = os.clock()
while os.clock() - t0 < seconds do work_a(); work_b(); work_none() end
print("done")
io.stdout:flush()
io.read("*a")
