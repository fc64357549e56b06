-- dump's test workload: a thread that spends nearly all its time in the garbage
-- collector (full collections of a large live heap), until killed.
local live = {}
for i = 1, 200000 do live[i] = { i } end
local function collect_all()
  collectgarbage("collect")
end
while true do collect_all() end
