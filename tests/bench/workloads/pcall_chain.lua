-- Benchmark workload: an interpreted stack of 24 distinct Lua functions (and the main
-- chunk, pmain and a leaf that burns the CPU), with every EVERY-th call made through
-- pcall (0: none), so a sample's stack holds C frames between Lua frames as most real
-- programs' do (pcall, xpcall, require). For tests/bench/sampler_cost.c, e.g. a build
-- against another on one process: sampler_cost -w 1000 luajit pcall_chain.lua 4 4
-- usage: luajit pcall_chain.lua SECONDS EVERY
jit.off()
local secs, every = assert(tonumber(arg[1])), assert(tonumber(arg[2]))
local n = 24
local src = { "local leaf = ...\nlocal f = {}\n" }
for i = n, 1, -1 do
  local callee = i == n and "leaf" or ("f[" .. (i + 1) .. "]")
  if every > 0 and i % every == 0 then
    src[#src + 1] = ("f[%d] = function(k) local ok, r = pcall(%s, k) return r end\n"):format(i, callee)
  else
    src[#src + 1] = ("f[%d] = function(k) local r = %s(k) return r end\n"):format(i, callee)
  end
end
src[#src + 1] = "return f[1]\n"
local function leaf(k) local x = 0 for i = 1, k do x = x + i % 7 end return x end
local f1 = assert(load(table.concat(src), "=pcall_chain.lua"))(leaf)
local t0 = os.clock()
repeat f1(200000) until os.clock() - t0 > secs
