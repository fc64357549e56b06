#!/usr/bin/env bash
# Our LuaJIT build: all 10 luajit:* probes are in the exe and the .so with register or
# immediate argument specs (libbpf 1.1.2 parses no %rip or SIB forms), the JIT still
# works (-jv, -jp, -jdump), and LuaJIT's behaviour is unchanged on a smoke script.
# proto_new has two sites (the parser and the bytecode loader): names are compared once.
. "$(dirname "$0")/../support/lib.sh"

probes="vm_open vm_close trace_start trace_stop trace_abort trace_blacklist trace_flush trace_free proto_free proto_new"
for obj in "$NUPP_LUAJIT_PREFIX/bin/luajit" "$NUPP_LUAJIT_PREFIX/lib/libluajit-5.1.so"; do
  readelf -n "$obj" >"$TMP/notes"
  got=$(awk '/Provider: luajit/{getline; print $2}' "$TMP/notes" | sort -u | tr '\n' ' ')
  want=$(echo $probes | tr ' ' '\n' | sort | tr '\n' ' ')
  assert_eq "$got" "$want" "luajit probes in $obj"
  # Every argument is N@%reg or N@$imm: no memory operands libbpf 1.1.2 cannot parse.
  bad=$(awk '/Provider: luajit/{getline; getline; getline; print}' "$TMP/notes" |
    sed 's/^ *Arguments: *//' | tr ' ' '\n' | grep -vE '^-?[0-9]+@(%[a-z0-9]+|\$-?[0-9]+)$' || true)
  assert_eq "$bad" "" "argument specs libbpf 1.1.2 cannot parse in $obj"
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

# LuaJIT's own jit.* modules are found with no environment variables.
"$NUPP_LUAJIT" -e 'assert(require("jit.vmdef").traceerr[7] == "NYI: bytecode %d")'
echo "PASS: luajit build"
