-- nupp.zone's push and pop make no system call: the same program with 10^3 and 10^5
-- push/pop pairs (interpreted, then compiled, three zones deep) makes exactly as many
-- system calls, counted by strace. Each program runs three times and each call is
-- counted by its fewest in the three: LuaJIT places its machine-code area at random
-- addresses and maps again (mmap, munmap) when one lands out of reach, so a run can
-- make a pair more than another; a call made per push or pop would be in every run,
-- 2*99000*3 times more. Skips (77) without strace.
local exe = arg[-1]
if os.execute("command -v strace >/dev/null 2>&1") ~= 0 then
  print("SKIP: strace is missing") os.exit(77)
end
local tmp = os.tmpname()
local script = tmp .. ".lua"
local f = assert(io.open(script, "w"))
f:write([[
local zone = require("nupp.zone")
local n = tonumber(arg[1])
local function run(k) for _ = 1, k do zone("a") zone("b") zone("c") zone() zone() zone() end end
run(10) -- every path made (the table grows once per new path), before the counted part
jit.off() run(n) jit.on() run(n)
assert(zone.path() == "")
]])
f:close()
-- System calls by name in an strace output.
local by_name = function(path)
  local t, f = {}, assert(io.open(path))
  for line in f:lines() do
    local name = line:match("^%d+%s+([%w_]+)%(") or line:match("^([%w_]+)%(") or line
    t[name] = (t[name] or 0) + 1
  end
  f:close()
  return t
end
local counts, names = {}, {}
for _, n in ipairs({ 1000, 100000 }) do
  local fewest = nil
  for _ = 1, 3 do
    local out = tmp .. "." .. n
    local cmd = string.format("strace -f -qq -o %q %q %q %d", out, exe, script, n)
    local ok = os.execute(cmd)
    if ok ~= 0 and ok ~= true then error("FAIL: " .. cmd .. " failed") end
    local t = by_name(out)
    os.remove(out)
    if not fewest then
      fewest = t
    else
      for name, k in pairs(fewest) do fewest[name] = math.min(k, t[name] or 0) end
    end
  end
  local total = 0
  for name, k in pairs(fewest) do
    if k == 0 then fewest[name] = nil else total = total + k end
  end
  counts[#counts + 1] = total
  names[#names + 1] = fewest
end
os.remove(script) os.remove(tmp)
print(string.format("system calls: %d with 2*10^3 pairs x3, %d with 2*10^5", counts[1], counts[2]))
if counts[1] ~= counts[2] then
  -- Which calls differ (for the next reader of a failure).
  for name, k in pairs(names[2]) do
    if k ~= (names[1][name] or 0) then print(string.format("  %s: %d -> %d", name, names[1][name] or 0, k)) end
  end
  for name, k in pairs(names[1]) do
    if not names[2][name] then print(string.format("  %s: %d -> 0", name, k)) end
  end
  error(string.format("FAIL: %d more system calls for 2*99000*3 more push/pop pairs", counts[2] - counts[1]))
end
print("PASS: a zone push or pop makes no system call")
