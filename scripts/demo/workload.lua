-- The demo workload of scripts/demo: a small "render loop" whose time splits into a
-- compiled part (a numeric kernel the JIT traces), an interpreted part (jit.off) and
-- C code (table.sort and table.concat), about 4 seconds of CPU in all.
local duration = tonumber(arg and arg[1]) or 4

-- Compiled: a hot numeric loop the JIT turns into one trace.
local function blur(pixels, n)
  local acc = 0
  for i = 2, n - 1 do
    acc = acc + (pixels[i - 1] + 2 * pixels[i] + pixels[i + 1]) * 0.25
  end
  return acc
end

-- Interpreted: the same shape, with the JIT turned off for this function.
local function layout(boxes, n)
  local w = 0
  for i = 1, n do
    w = w + boxes[i] % 7 + boxes[i] / 3
  end
  return w
end
jit.off(layout)

-- C code: table.sort and table.concat run as C library functions.
local function serialize(n)
  local parts = {}
  for i = 1, n do parts[i] = (i * 7919) % n end
  table.sort(parts)
  return #table.concat(parts, ",")
end

local function frame(pixels, boxes)
  return blur(pixels, #pixels) + layout(boxes, #boxes) + serialize(300)
end

local pixels, boxes = {}, {}
for i = 1, 20000 do pixels[i] = i % 255 end
for i = 1, 2500 do boxes[i] = i * 3 end

local t0, frames, sink = os.clock(), 0, 0
while os.clock() - t0 < duration do
  sink = sink + frame(pixels, boxes)
  frames = frames + 1
end
print(("demo: %d frames in %.1f s of CPU (checksum %d)"):format(frames, os.clock() - t0, sink % 1000))
