/* Prints, as C compiles them, the size and field offsets of the structs the Lua modules
 * hand to or read from C through the FFI (include/nupp/nupp.h, lj_layout.h, zone_abi.h):
 * "struct NAME FIELD OFFSET" lines and "struct NAME sizeof SIZE", for tests/lua/test_cdef.lua
 * to compare with what ffi.cdef made of the generated nupp/cdef.lua. */
#include <stddef.h>
#include <stdio.h>

#include "nupp/nupp.h"
#include "nupp/zone_abi.h"

#define SIZE(s) printf("struct %s sizeof %zu\n", #s, sizeof(struct s))
#define FIELD(s, f) printf("struct %s %s %zu\n", #s, #f, offsetof(struct s, f))

int main(void)
{
	SIZE(nupp_session_opts);
	FIELD(nupp_session_opts, sz);
	FIELD(nupp_session_opts, samples);
	FIELD(nupp_session_opts, aborts);
	FIELD(nupp_session_opts, freq_hz);
	FIELD(nupp_session_opts, depth);
	FIELD(nupp_session_opts, lines);
	FIELD(nupp_session_opts, include_benign);
	FIELD(nupp_session_opts, max_stacks);
	FIELD(nupp_session_opts, max_sites);
	FIELD(nupp_session_opts, zone_filter);
	FIELD(nupp_session_opts, root);
	FIELD(nupp_session_opts, drain_ms);
	FIELD(nupp_session_opts, background);
	FIELD(nupp_session_opts, subprocesses);
	FIELD(nupp_session_opts, command);
	FIELD(nupp_session_opts, target);
	FIELD(nupp_session_opts, full_filenames);
	FIELD(nupp_session_opts, lua_only);
	SIZE(nupp_zone_table);
	FIELD(nupp_zone_table, magic);
	FIELD(nupp_zone_table, version);
	FIELD(nupp_zone_table, g);
	FIELD(nupp_zone_table, arena);
	FIELD(nupp_zone_table, npaths);
	FIELD(nupp_zone_table, used);
	FIELD(nupp_zone_table, cap);
	FIELD(nupp_zone_table, slot);
	FIELD(nupp_zone_table, nonce);
	SIZE(nupp_lj_vmlist);
	FIELD(nupp_lj_vmlist, magic);
	FIELD(nupp_lj_vmlist, count);
	FIELD(nupp_lj_vmlist, g);
	FIELD(nupp_lj_vmlist, zone_tv);
	FIELD(nupp_lj_vmlist, zone_table);
	/* The layout: its size, its first and last fields, and those nupp.zone reads. */
	SIZE(nupp_lj_layout);
	FIELD(nupp_lj_layout, magic);
	FIELD(nupp_lj_layout, version);
	FIELD(nupp_lj_layout, size);
	FIELD(nupp_lj_layout, gc64);
	FIELD(nupp_lj_layout, dualnum);
	FIELD(nupp_lj_layout, L_glref);
	FIELD(nupp_lj_layout, gcvmask);
	FIELD(nupp_lj_layout, tv_size);
	FIELD(nupp_lj_layout, cframe_rawmask);
	FIELD(nupp_lj_layout, vm_begin);
	FIELD(nupp_lj_layout, gch_marked);
	FIELD(nupp_lj_layout, pt_k);
	FIELD(nupp_lj_layout, pt_sizekgc);
	FIELD(nupp_lj_layout, tab_array);
	FIELD(nupp_lj_layout, tab_asize);
	FIELD(nupp_lj_layout, T_spadjust);
	return 0;
}
