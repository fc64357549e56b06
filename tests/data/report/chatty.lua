-- A program that writes to stdout while it runs, lines ending in numbers like a
-- collapsed stack's count, and spins for SECONDS.
-- Usage: luajit chatty.lua SECONDS
local dur = tonumber(arg and arg[1]) or 1
local function work(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local t0, k = os.clock(), 0
while os.clock() - t0 < dur do
  k = k + 1
  print("progress " .. k .. " 1177789")
  work(100000)
end
