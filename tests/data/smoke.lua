-- LuaJIT behaviour smoke test: deterministic output from the interpreter, the JIT,
-- closures, coroutines, errors, strings, tables and the FFI. Compared byte for byte
-- with smoke.expected (written from LuaJIT's documented semantics).
local out = {}
local function p(...) out[#out + 1] = table.concat({...}, " ") end

-- A compiled loop and the same loop interpreted give the same sums.
local function sum(n) local s = 0 for i = 1, n do s = s + i * 2 end return s end
p("sum", sum(100000))
jit.off(sum, true)
p("sum-interp", sum(100000))
jit.on(sum, true)

-- Closures and upvalues.
local fs = {}
for i = 1, 3 do fs[i] = function() return i * 10 end end
p("closures", fs[1](), fs[2](), fs[3]())

-- Coroutines.
local co = coroutine.wrap(function(a) local b = coroutine.yield(a + 1) return b * 2 end)
p("coroutine", co(1), co(21))

-- Errors and pcall.
local ok, err = pcall(error, {code = 7})
p("pcall", tostring(ok), err.code)
ok, err = pcall(function() local t = nil; return t.x end)
p("pcall2", tostring(ok), (err:gsub("^.-:%d+: ", "")))

-- Strings and tables.
local t = {5, 3, 9, 1, 7}
table.sort(t, function(a, b) return a > b end)
p("sort", table.concat(t, ","))
p("format", string.format("%5.2f|%x|%s", math.pi, 255, "x"))
p("gsub", (("hello world"):gsub("o", "0")))
p("rep", ("ab"):rep(3, "-"))

-- Metatables.
local mt = {__index = function(_, k) return k .. "!" end, __add = function(a, b) return a.v + b.v end}
local a, b = setmetatable({v = 2}, mt), setmetatable({v = 40}, mt)
p("meta", a.foo, a + b)

-- FFI and bit ops.
local ffi = require("ffi")
ffi.cdef("int abs(int);")
p("ffi", ffi.C.abs(-42), tostring(ffi.new("int64_t", 2) ^ 40):gsub("LL", ""), bit.band(0xff, 0x0f))

-- Varargs and select.
local function va(...) return select("#", ...), (select(2, ...)) end
p("vararg", va(1, 2, 3))

-- A trace that links to itself with a side exit, over many iterations.
local acc = 0
for i = 1, 200000 do if i % 3 == 0 then acc = acc + 1 else acc = acc - 1 end end
p("sidetrace", acc)

print(table.concat(out, "\n"))
