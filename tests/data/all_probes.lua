-- Fires every luajit:* USDT probe at least once, with LuaJIT's own -jv as a witness:
-- a loop that compiles (trace_start, trace_stop), a closure created in a hot loop that
-- aborts at the same start until blacklisted (trace_abort, trace_blacklist), a recursion
-- whose down-recursion aborts once as ordinary trace formation (trace_abort_benign), jit.flush
-- (trace_flush), a full GC of the flushed traces (trace_free), lua_close at exit
-- (vm_close); vm_open fired before the first line ran; a chunk loaded and dropped is
-- collected (proto_new when it is compiled; proto_free, which reports prototypes freed in
-- batches, at lua_close at the latest).
local n = 0
for i = 1, 1000 do n = n + i end

local function hot()
  local s = 0
  for i = 1, 200 do
    local f = function() return i end -- FNEW: NYI, aborts every attempt
    s = s + f()
  end
  return s
end
for _ = 1, 2000 do hot() end

local function rec(k) if k == 0 then return 0 end return 1 + rec(k - 1) end
for _ = 1, 300 do n = n + rec(20) end

local chunk = loadstring("return 42")
assert(chunk() == 42)
chunk = nil

jit.flush()
collectgarbage()
collectgarbage()
print(n)
