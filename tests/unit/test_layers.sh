#!/usr/bin/env bash
# The source tree's layering, checked on the sources and on the built objects (no root):
#   * user/ is four layers, cli -> compare -> report -> core: a file includes and calls only
#     its own layer and the ones below; include/ and bpf/ never include user/;
#   * the CLI's subcommands (cli/cmd_*.c) never call one another or main.c;
#   * every source opens with a comment saying what it owns; user/README.md names each folder;
#   * no source under user/, bpf/, include/ is over 850 lines.
set -uo pipefail
src=${NUPP_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${NUPP_BINARY_DIR:-$src/build}
layers=(core report compare cli)
fail=0
bad() { echo "FAIL: $*"; fail=1; }

rank() {
	local i
	for i in "${!layers[@]}"; do [ "${layers[$i]}" = "$1" ] && { echo "$i"; return; }; done
	echo -1
}

cd "$src" || exit 1
for d in user/*/; do
	d=${d%/}; d=${d#user/}
	[ "$(rank "$d")" -ge 0 ] || bad "user/$d is not one of the layers ${layers[*]} (add it here and to user/README.md)"
done

# -- Includes --------------------------------------------------------------------------
for layer in "${layers[@]}"; do
	r=$(rank "$layer")
	for f in user/"$layer"/*.[ch]; do
		while IFS= read -r inc; do
			case $inc in
			*/*)
				dir=${inc%%/*}
				[ "$dir" = nupp ] && continue
				ir=$(rank "$dir")
				if [ "$ir" -lt 0 ]; then
					bad "$f includes \"$inc\": not a layer of user/ nor include/nupp"
				elif [ "$ir" -gt "$r" ]; then
					bad "$f includes \"$inc\": $layer may include only from below (${layers[*]:0:r+1})"
				elif [ "$ir" -eq "$r" ]; then
					bad "$f includes \"$inc\": a header of its own folder is included bare"
				fi
				;;
			*)
				for other in "${layers[@]}"; do
					[ "$other" = "$layer" ] && continue
					[ -e "user/$other/$inc" ] && [ ! -e "user/$layer/$inc" ] &&
						bad "$f includes \"$inc\" bare: it is user/$other/$inc (name the folder)"
				done
				;;
			esac
		done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
	done
done
while IFS= read -r hit; do
	bad "$hit: include/ and bpf/ may not include user/"
done < <(grep -nE '#[[:space:]]*include[[:space:]]*"(\.\./)*(user/)?(core|report|compare|cli)/' \
	include/nupp/*.h bpf/*.c bpf/*.h bpf/*/*.h 2>/dev/null)

# -- Calls, on the built objects ----------------------------------------------------------
objs=$bin/CMakeFiles/nupp_obj.dir/user
cliobjs=$bin/CMakeFiles/nupp-bpf.dir/user/cli
if [ ! -d "$objs/core" ] || [ ! -d "$cliobjs" ]; then
	bad "no objects under $objs and $cliobjs: build first (cmake --build build)"
else
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	for layer in "${layers[@]}"; do
		o=$objs/$layer
		[ "$layer" = cli ] && o=$cliobjs
		nm -g --defined-only "$o"/*.o | awk 'NF == 3 { print $3 }' | sort -u > "$tmp/def_$layer"
		nm -u "$o"/*.o | awk '{ print $NF }' | sort -u > "$tmp/und_$layer"
		[ -s "$tmp/def_$layer" ] || bad "no symbols defined in $o/*.o"
	done
	for i in "${!layers[@]}"; do
		for j in "${!layers[@]}"; do
			[ "$j" -gt "$i" ] || continue
			up=$(comm -12 "$tmp/und_${layers[$i]}" "$tmp/def_${layers[$j]}" | tr '\n' ' ')
			[ -z "$up" ] || bad "user/${layers[$i]} calls up into user/${layers[$j]}: $up"
		done
	done
	for o in "$cliobjs"/*.o; do
		[ "$(basename "$o")" = main.c.o ] && continue # the command table calls each subcommand
		nm -u "$o" | awk '{ print $NF }' | sort -u > "$tmp/und_one"
		for p in "$cliobjs"/cmd_*.o "$cliobjs"/main.c.o; do
			[ "$p" = "$o" ] && continue
			nm -g --defined-only "$p" | awk 'NF == 3 { print $3 }' | sort -u > "$tmp/def_one"
			calls=$(comm -12 "$tmp/und_one" "$tmp/def_one" | tr '\n' ' ')
			[ -z "$calls" ] || bad "$(basename "$o") calls $(basename "$p"): $calls (shared code goes in cli_util.c)"
		done
	done
fi

# -- Opening comments -----------------------------------------------------------
while IFS= read -r f; do
	# The first line after an SPDX tag is a comment (// in the embedded script).
	first=$(grep -v -m1 'SPDX-License-Identifier' "$f")
	case $first in
	'/*'* | '//'*) ;;
	*) bad "$f does not open with a comment saying what it owns" ;;
	esac
done < <(find user bpf include -type f \( -name '*.c' -o -name '*.h' -o -name '*.js' \) | sort)

# -- Sizes -----------------------------------------------------------------------
# A file past about 800 lines holds more than one concern: split it by concern. Generated
# files (build/) and tests are not sources here.
max=850
while IFS= read -r f; do
	n=$(wc -l <"$f")
	[ "$n" -le "$max" ] || bad "$f is $n lines (at most $max): split it by concern"
done < <(find user bpf include -type f \( -name '*.c' -o -name '*.h' \) | sort)

[ -f user/README.md ] || bad "user/README.md is missing"
for layer in "${layers[@]}"; do
	grep -q "^## \`$layer/\`" user/README.md 2>/dev/null || bad "user/README.md has no section \"## \`$layer/\`\""
done

[ "$fail" = 0 ] && echo "ok: ${#layers[@]} layers, includes and calls go down, every file opens with what it owns, none over $max lines"
exit "$fail"
