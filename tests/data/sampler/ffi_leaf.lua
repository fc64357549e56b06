-- A compiled function whose inlined leaf spends its time in a C function that the trace
-- calls through the FFI (strlen of a 64 KB string). The call graph is: main chunk ->
-- outer (interpreted: jit.off) -> mid (a trace of its own, from its entry) -> leaf
-- (inlined into mid's trace) -> strlen, and nearly all of the time is in leaf's call.
-- leaf stores into a table, then loads the string from another: after the store, the
-- guards of that load take a snapshot holding leaf's frame, just before the call.
-- usage: luajit ffi_leaf.lua SECONDS
local ffi = require("ffi")
ffi.cdef("size_t strlen(const char *s);")
local C = ffi.C
local strs = { string.rep("x", 65536), string.rep("y", 65536) }
local last = { 0 }

local function leaf(t, i)
  last[1] = i
  local str = t[i]
  return tonumber(C.strlen(str))
end

local function mid(t, i)
  return leaf(t, i) + 1
end

local function outer(secs)
  local t0, total, i = os.clock(), 0, 0
  while os.clock() - t0 < secs do
    i = i + 1
    total = total + mid(strs, i % 2 + 1)
  end
  return total
end
jit.off(outer)

io.write(outer(tonumber(arg[1]) or 3) > 0 and "" or "none\n")
