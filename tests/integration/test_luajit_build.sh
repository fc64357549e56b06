#!/usr/bin/env bash
# Our LuaJIT build (with NUPP_LUAJIT_BRANCH=luajit2, our luajit2): all 11 luajit:*
# probes are in the exe and the .so with register or immediate argument specs (libbpf
# 1.1.2 parses no %rip or SIB forms), each at a 5-byte NOP in code with no red zone; the
# JIT still works (-jv, -jp, -jdump), and LuaJIT's behaviour is unchanged on a smoke
# script.
# proto_new has two sites (the parser and the bytecode loader): names are compared once.
. "$(dirname "$0")/../support/lib.sh"

probes="vm_open vm_close trace_start trace_stop trace_abort trace_abort_benign trace_blacklist trace_flush trace_free proto_free proto_new"
for obj in "$NUPP_LUAJIT_PREFIX/bin/luajit" "$NUPP_LUAJIT_PREFIX/lib/libluajit-5.1.so"; do
  readelf -n "$obj" >"$TMP/notes"
  got=$(awk '/Provider: luajit/{getline; print $2}' "$TMP/notes" | sort -u | tr '\n' ' ')
  want=$(echo $probes | tr ' ' '\n' | sort | tr '\n' ' ')
  assert_eq "$got" "$want" "luajit probes in $obj"
  # Every argument is N@%reg or N@$imm: no memory operands libbpf 1.1.2 cannot parse.
  bad=$(awk '/Provider: luajit/{getline; getline; getline; print}' "$TMP/notes" |
    sed 's/^ *Arguments: *//' | tr ' ' '\n' | grep -vE '^-?[0-9]+@(%[a-z0-9]+|\$-?[0-9]+)$' || true)
  assert_eq "$bad" "" "argument specs libbpf 1.1.2 cannot parse in $obj"
  # Every probe site is a 1-byte NOP: a trap while attached, never the 5-byte NOP that
  # Linux 6.18 turns into a call of a trampoline a forked child does not inherit
  # (test_record_probe_sites.sh forks one).
  for loc in $(awk '/Location:/ {print $2}' "$TMP/notes" | tr -d ,); do
    insn=$(objdump -d --no-show-raw-insn --start-address="$loc" --stop-address=$((loc + 1)) "$obj" |
      awk -F'\t' '/^ *[0-9a-f]+:/ {print $2}')
    assert_eq "$(echo $insn)" "nop" "instruction at the probe site $loc of $obj"
  done
  # No code of the build keeps data below the stack pointer (-mno-red-zone).
  below=$(objdump -d --no-show-raw-insn "$obj" | grep -E -- '-0x[0-9a-f]+\(%rsp\)' || true)
  assert_eq "$below" "" "addresses below the stack pointer (a red zone) in $obj"
done

# The JIT still compiles, and its own tools load.
"$NUPP_LUAJIT" -jv -e 'local x = 0 for i = 1, 1000 do x = x + i end' 2>"$TMP/jv" >/dev/null
assert_contains "$TMP/jv" "[TRACE   1 (command line):1 loop]"
"$NUPP_LUAJIT" -jdump=t -e 'local x = 0 for i = 1, 1000 do x = x + i end' >"$TMP/jdump" 2>&1
assert_contains "$TMP/jdump" "---- TRACE 1 stop -> loop"
"$NUPP_LUAJIT" -jp=f -e 'local t = os.clock() while os.clock() - t < 0.3 do end' >"$TMP/jp" 2>&1
grep -qE '^ *[0-9]+%' "$TMP/jp" || { cat "$TMP/jp"; fail "-jp printed no profile"; }

# Behaviour unchanged: byte-identical output on the smoke script.
"$NUPP_LUAJIT" "$NUPP_TEST_DATA/smoke.lua" >"$TMP/smoke.out"
diff -u "$NUPP_TEST_DATA/smoke.expected" "$TMP/smoke.out" || fail "smoke.lua output changed"

# The branch built is the one asked for (NUPP_LUAJIT_BRANCH): OpenResty's luajit2
# exports lua_setexdata (which nginx's lua module links against), Debian's LuaJIT does not.
exdata=$(nm -D --defined-only "$NUPP_LUAJIT_PREFIX/lib/libluajit-5.1.so" | awk '$3 == "lua_setexdata"' | wc -l)
assert_eq "$exdata" "$([ "${NUPP_LUAJIT_BRANCH:-luajit}" = luajit2 ] && echo 1 || echo 0)" "lua_setexdata in $NUPP_LUAJIT_PREFIX"

# LuaJIT's own jit.* modules are found with no environment variables.
"$NUPP_LUAJIT" -e 'assert(require("jit.vmdef").traceerr[7] == "NYI: bytecode %d")'
echo "PASS: luajit build"
