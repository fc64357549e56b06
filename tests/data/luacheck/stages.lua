-- Test workload: Debian's luacheck (package lua-check) linting the files named on the
-- command line, as /usr/bin/luacheck would, with each of its check stages timed by the
-- program itself: every stage module's run (luacheck.stages.modules, called through the
-- module table) is replaced by a function that calls it and adds the CPU time it took
-- (os.clock) to the stage's total. On exit it prints on stderr "stage NAME SECONDS CALLS"
-- for each stage, "stages N" (how many luacheck has) and "cpu SECONDS" (os.clock: the
-- process's CPU time).
-- usage: LUA_PATH=<Debian's 5.1 dirs> LUA_CPATH=... luajit stages.lua --no-cache FILE...
local clock = os.clock
local stages = require("luacheck.stages")
local spent, calls = {}, {}

for i, name in ipairs(stages.names) do
  local module = stages.modules[i]
  local run = module.run
  spent[name], calls[name] = 0, 0
  module.run = function(chstate)
    local t0 = clock()
    local ok, err = pcall(run, chstate)
    spent[name] = spent[name] + (clock() - t0)
    calls[name] = calls[name] + 1
    if not ok then error(err, 0) end -- a syntax error object goes on as luacheck raised it
  end
end

local function report()
  for _, name in ipairs(stages.names) do
    io.stderr:write(("stage %s %.6f %d\n"):format(name, spent[name], calls[name]))
  end
  io.stderr:write(("stages %d\ncpu %.6f\n"):format(#stages.names, clock()))
end

-- luacheck ends with os.exit(status): report first.
local exit = os.exit
os.exit = function(...) report(); io.stdout:flush(); return exit(...) end
arg[0] = "luacheck"
require("luacheck.main")
report()
