-- Benchmark workload: compiled numeric code (a Mandelbrot set), fixed work.
local now = dofile((arg[0]:match("^(.*)/") or ".") .. "/clock.lua")
local t0, c0 = now(), os.clock()
local N = tonumber(arg and arg[1]) or 5000
local count = 0
for y = 0, N - 1 do
  local ci = 2 * y / N - 1
  for x = 0, N - 1 do
    local cr, zr, zi = 2.5 * x / N - 2, 0, 0
    local i = 0
    while i < 50 and zr * zr + zi * zi < 4 do
      zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
      i = i + 1
    end
    if i == 50 then count = count + 1 end
  end
end
print(count)
io.stderr:write(("elapsed %.4f\ncpu %.4f\n"):format(now() - t0, os.clock() - c0))
