-- A workload of known shares for top: heavy (interpreted), medium and light (compiled)
-- are held at 50, 30 and 20 % of the CPU time by the program's own clock (os.clock), in
-- chunks of random length, so that no period of the work can alias with the sampling.
-- Usage: luajit shares.lua SECONDS; prints the seconds each took on stderr at the end.
local dur = tonumber(arg and arg[1]) or 5

local function heavy(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
jit.off(heavy)

local function medium(n)
  local s = 0
  for i = 1, n do s = s + (i * 3) % 5 end
  return s
end

local function light(n)
  local s = 0
  for i = 1, n do s = s + (i * 7) % 3 end
  return s
end

local want, spent = { 0.5, 0.3, 0.2 }, { 0, 0, 0 }
local clock = os.clock
math.randomseed(os.time())
local t0 = clock()
while clock() - t0 < dur do
  local k, best = 1, math.huge
  for i = 1, 3 do
    local r = spent[i] / want[i]
    if r < best then k, best = i, r end
  end
  local n = math.random(2000, 40000) * (k == 1 and 1 or 10)
  local t = clock()
  if k == 1 then heavy(n) elseif k == 2 then medium(n) else light(n) end
  spent[k] = spent[k] + clock() - t
end
io.stderr:write(string.format("shares: heavy %.4f medium %.4f light %.4f\n", spent[1], spent[2], spent[3]))
