-- Benchmark workload: interpreted calls (recursive fib with the JIT off), fixed work.
local now = dofile((arg[0]:match("^(.*)/") or ".") .. "/clock.lua")
local t0, c0 = now(), os.clock()
jit.off()
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
print(fib(tonumber(arg and arg[1]) or 37))
io.stderr:write(("elapsed %.4f\ncpu %.4f\n"):format(now() - t0, os.clock() - c0))
