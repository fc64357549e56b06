-- Two functions of one file, known lines by construction (the frame table test):
-- aborts() stores at non-integer keys of a table with an array part, so its loop's
-- traces abort ("NYI: mixed sparse/dense table" at line 8); clean() is arithmetic that
-- compiles. Usage: luajit frames.lua SECONDS
local function aborts(n) -- line 5
  local t = { 1, 2, 3 }
  for i = 1, n do
    t[i + 0.5] = i -- line 8
  end
  return #t
end -- line 11

local function clean(n) -- line 13
  local s = 0
  for i = 1, n do
    s = s + i % 7
  end
  return s
end -- line 19

local secs = tonumber(arg[1]) or 1
local t0, sink = os.clock(), 0
while os.clock() - t0 < secs do
  sink = sink + aborts(2000) + clean(60000)
end
print(sink > 0)
