-- Sampler test workload: allocation in the interpreter. Three functions, each measured
-- with os.clock: grow fills tables (lj_tab_newkey, rehashtab, lj_alloc_malloc, memset),
-- len takes #t (lj_tab_len), build builds strings (lj_buf_*, lj_str_new, memcpy). Much of
-- their time is in C helpers the interpreter calls, and in the GC.
-- stdin gates the start and the exit; stdout gets "grow len build" in CPU seconds.
-- arg[1] = CPU seconds to run.
jit.off()
local seconds = tonumber(arg[1]) or 3
local clock = os.clock
local spent = { 0, 0, 0 }

local function grow()
  local t, h = {}, {}
  for i = 1, 20000 do
    t[i] = { i }
    h["k" .. (i % 2000)] = i
  end
  return t
end

local function len(t)
  local n = 0
  for _ = 1, 20000 do
    n = n + #t
  end
  return n
end

local function build()
  local parts = {}
  for i = 1, 3000 do
    parts[#parts + 1] = "x" .. i
  end
  local s, u = table.concat(parts, ","), ""
  for i = 1, 400 do
    u = u .. i
  end
  return #s + #u
end

io.read(1)
local stop = clock() + seconds
repeat
  local t0 = clock()
  local t = grow()
  local t1 = clock()
  len(t)
  local t2 = clock()
  build()
  local t3 = clock()
  spent[1], spent[2], spent[3] = spent[1] + t1 - t0, spent[2] + t2 - t1, spent[3] + t3 - t2
until clock() > stop
print(string.format("%.6f %.6f %.6f", spent[1], spent[2], spent[3]))
io.stdout:flush()
io.read("*a")
