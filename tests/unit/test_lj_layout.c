/* The exported layout struct equals offsetof/sizeof/constants of LuaJIT's own headers. */
#include <check.h>

#include "nupp_check.h"
#include <stddef.h>

#include "lj_obj.h"
#include "lj_frame.h"
#include "lj_jit.h"
#include "lj_ir.h"
#include "lj_bc.h"
#include "lj_dispatch.h"
#include "lj_vm.h"
#include "lj_debug.h"
#include "lj_ccall.h"
#include "lauxlib.h"
#include "lualib.h"

#include "nupp/lj_layout.h"

extern const struct nupp_lj_layout luajit_bpf_layout;
extern struct nupp_lj_vmlist luajit_bpf_vmlist;

#define LO (&luajit_bpf_layout)
#define OFS(field, type, member) ck_assert_uint_eq(LO->field, offsetof(type, member))

START_TEST(layout_identity)
{
	ck_assert_uint_eq(LO->magic, NUPP_LJ_LAYOUT_MAGIC);
	ck_assert_uint_eq(LO->version, NUPP_LJ_LAYOUT_VERSION);
	ck_assert_uint_eq(LO->size, sizeof(struct nupp_lj_layout));
	ck_assert_uint_eq(LO->gc64, LJ_GC64);
	ck_assert_uint_eq(LO->fr2, LJ_FR2);
	ck_assert_uint_eq(LO->dualnum, LJ_DUALNUM);
	ck_assert_uint_eq(LO->hasjit, LJ_HASJIT);
	ck_assert_uint_eq(luajit_bpf_vmlist.magic, NUPP_LJ_LAYOUT_MAGIC);
}
END_TEST

START_TEST(layout_gg_state)
{
	ck_assert_int_eq(LO->gg_disp2g, GG_DISP2G);
	ck_assert_int_eq(LO->gg_g2j, GG_G2J);
	ck_assert_int_eq(LO->gg_g2l, (int)offsetof(GG_State, L) - (int)offsetof(GG_State, g));
	ck_assert_uint_eq(LO->gg_size, sizeof(GG_State));
	OFS(g_vmstate, global_State, vmstate);
	OFS(g_cur_L, global_State, cur_L);
	OFS(g_jit_base, global_State, jit_base);
	OFS(g_mainthref, global_State, mainthref);
	OFS(g_hookmask, global_State, hookmask);
}
END_TEST

START_TEST(layout_lua_state)
{
	ck_assert_uint_eq(LO->L_size, sizeof(lua_State));
	OFS(L_gct, lua_State, gct);
	OFS(L_status, lua_State, status);
	OFS(L_glref, lua_State, glref);
	OFS(L_base, lua_State, base);
	OFS(L_top, lua_State, top);
	OFS(L_maxstack, lua_State, maxstack);
	OFS(L_stack, lua_State, stack);
	OFS(L_cframe, lua_State, cframe);
	OFS(L_stacksize, lua_State, stacksize);
}
END_TEST

START_TEST(layout_objects)
{
	OFS(fn_gct, GCfuncL, gct);
	OFS(fn_ffid, GCfuncL, ffid);
	OFS(fn_pc, GCfuncL, pc);
	OFS(fn_cf, GCfuncC, f);
	ck_assert_uint_eq(LO->pt_size, sizeof(GCproto));
	OFS(pt_sizebc, GCproto, sizebc);
	OFS(pt_framesize, GCproto, framesize);
	OFS(pt_flags, GCproto, flags);
	OFS(pt_trace, GCproto, trace);
	OFS(pt_chunkname, GCproto, chunkname);
	OFS(pt_firstline, GCproto, firstline);
	OFS(pt_numline, GCproto, numline);
	OFS(pt_lineinfo, GCproto, lineinfo);
	OFS(pt_sizept, GCproto, sizept);
	OFS(pt_gct, GCproto, gct);
	OFS(pt_k, GCproto, k);
	OFS(pt_sizekgc, GCproto, sizekgc);
	ck_assert_uint_eq(LO->str_size, sizeof(GCstr));
	OFS(str_len, GCstr, len);
	OFS(str_hash, GCstr, hash);
	ck_assert_uint_eq(LO->tv_size, sizeof(TValue));
	ck_assert_uint_eq(LO->gcvmask, LJ_GCVMASK);
	ck_assert_uint_eq(LO->itype_shift, 47);
	ck_assert_uint_eq(LO->itype_func, LJ_TFUNC);
	ck_assert_uint_eq(LO->itype_thread, LJ_TTHREAD);
	ck_assert_uint_eq(LO->gct_func, (uint8_t)~LJ_TFUNC);
	ck_assert_uint_eq(LO->gct_proto, (uint8_t)~LJ_TPROTO);
	ck_assert_uint_eq(LO->gct_trace, (uint8_t)~LJ_TTRACE);
	ck_assert_uint_eq(LO->gct_thread, (uint8_t)~LJ_TTHREAD);
	ck_assert_uint_eq(LO->gct_str, (uint8_t)~LJ_TSTR);
	ck_assert_uint_eq(LO->ff_lua, FF_LUA);
	ck_assert_uint_eq(LO->ff_c, FF_C);
}
END_TEST

START_TEST(layout_jit)
{
	OFS(J_trace, jit_State, trace);
	OFS(J_sizetrace, jit_State, sizetrace);
	OFS(J_state, jit_State, state);
	OFS(J_pc, jit_State, pc);
	OFS(J_pt, jit_State, pt);
	OFS(J_parent, jit_State, parent);
	OFS(J_exitno, jit_State, exitno);
	ck_assert_uint_eq(LO->T_size, sizeof(GCtrace));
	OFS(T_gct, GCtrace, gct);
	OFS(T_nsnap, GCtrace, nsnap);
	OFS(T_nins, GCtrace, nins);
	OFS(T_nk, GCtrace, nk);
	OFS(T_ir, GCtrace, ir);
	OFS(T_nsnapmap, GCtrace, nsnapmap);
	OFS(T_snap, GCtrace, snap);
	OFS(T_snapmap, GCtrace, snapmap);
	OFS(T_startpt, GCtrace, startpt);
	OFS(T_startpc, GCtrace, startpc);
	OFS(T_startins, GCtrace, startins);
	OFS(T_szmcode, GCtrace, szmcode);
	OFS(T_mcode, GCtrace, mcode);
	OFS(T_mcloop, GCtrace, mcloop);
	OFS(T_spadjust, GCtrace, spadjust);
	OFS(T_traceno, GCtrace, traceno);
	OFS(T_link, GCtrace, link);
	OFS(T_root, GCtrace, root);
	OFS(T_linktype, GCtrace, linktype);
	OFS(T_serial, GCtrace, serial);
	OFS(g_tserial, global_State, bpf_tserial);
	ck_assert_uint_eq(LO->snap_size, sizeof(SnapShot));
	OFS(snap_mapofs, SnapShot, mapofs);
	OFS(snap_ref, SnapShot, ref);
	OFS(snap_mcofs, SnapShot, mcofs);
	OFS(snap_nslots, SnapShot, nslots);
	OFS(snap_topslot, SnapShot, topslot);
	OFS(snap_nent, SnapShot, nent);
	OFS(snap_count, SnapShot, count);
	ck_assert_uint_eq(LO->snapentry_size, sizeof(SnapEntry));
	ck_assert_uint_eq(LO->snap_frame, SNAP_FRAME);
	ck_assert_uint_eq(LO->snap_cont, SNAP_CONT);
	ck_assert_uint_eq(LO->ir_size, sizeof(IRIns));
	OFS(ir_o, IRIns, o);
	ck_assert_uint_eq(LO->ir_kgc, IR_KGC);
	OFS(ir_t, IRIns, t);
	ck_assert_uint_eq(LO->irt_func, IRT_FUNC);
	ck_assert_uint_eq(LO->irt_type, IRT_TYPE);
	ck_assert_uint_eq(LO->ir_knull, IR_KNULL);
	ck_assert_uint_eq(LO->irt_is64, IRT_IS64);
	ck_assert_uint_eq(LO->irt_proto, IRT_PROTO);
	ck_assert_uint_eq(LO->ref_true, REF_TRUE);
	ck_assert_uint_eq(LO->ir_knum, IR_KNUM);
	ck_assert_uint_eq(LO->ir_kint64, IR_KINT64);
	/* Local variables and the tags of their values (version 11). */
	OFS(pt_varinfo, GCproto, varinfo);
	ck_assert_uint_eq(LO->varname_max, VARNAME__MAX);
	ck_assert_uint_eq(LO->itype_nil, LJ_TNIL);
	ck_assert_uint_eq(LO->itype_false, LJ_TFALSE);
	ck_assert_uint_eq(LO->itype_true, LJ_TTRUE);
	ck_assert_uint_eq(LO->itype_str, LJ_TSTR);
	ck_assert_uint_eq(LO->itype_tab, LJ_TTAB);
	ck_assert_uint_eq(LO->itype_udata, LJ_TUDATA);
	ck_assert_uint_eq(LO->itype_lightud, LJ_TLIGHTUD);
	ck_assert_uint_eq(LO->itype_numx, LJ_TISNUM);
	ck_assert_uint_eq(LO->itype_cdata, LJ_TCDATA);
	ck_assert_uint_eq(LO->itype_proto, LJ_TPROTO);
}
END_TEST

START_TEST(layout_frames_and_states)
{
	ck_assert_uint_eq(LO->frame_type, FRAME_TYPE);
	ck_assert_uint_eq(LO->frame_typep, FRAME_TYPEP);
	ck_assert_uint_eq(LO->frame_lua, FRAME_LUA);
	ck_assert_uint_eq(LO->frame_c, FRAME_C);
	ck_assert_uint_eq(LO->frame_cont, FRAME_CONT);
	ck_assert_uint_eq(LO->frame_varg, FRAME_VARG);
	ck_assert_uint_eq(LO->frame_luap, FRAME_LUAP);
	ck_assert_uint_eq(LO->frame_cp, FRAME_CP);
	ck_assert_uint_eq(LO->frame_pcall, FRAME_PCALL);
	ck_assert_uint_eq(LO->frame_pcallh, FRAME_PCALLH);
	ck_assert_uint_eq(LO->bcins_size, sizeof(BCIns));
	ck_assert_uint_eq(LO->bc_a_shift, 8);
	ck_assert_uint_eq(bc_a(0x0000ab00u), (0x0000ab00u >> LO->bc_a_shift) & 0xff);
	ck_assert_uint_eq(LO->cont_tailcall, LJ_CONT_TAILCALL);
	ck_assert_uint_eq(LO->cont_ffi_callback, LJ_CONT_FFI_CALLBACK);
	ck_assert_uint_eq(LO->cframe_size, CFRAME_SIZE);
	ck_assert_uint_eq(LO->cframe_size_jit, CFRAME_SIZE_JIT);
	ck_assert_uint_eq(LO->cframe_ofs_L, CFRAME_OFS_L);
	ck_assert_uint_eq(LO->cframe_ofs_pc, CFRAME_OFS_PC);
	ck_assert_uint_eq(LO->cframe_ofs_prev, CFRAME_OFS_PREV);
	ck_assert_uint_eq(LO->cframe_ofs_nres, CFRAME_OFS_NRES);
	ck_assert_uint_eq(LO->cframe_rawmask, (uint64_t)CFRAME_RAWMASK);
	ck_assert_uint_eq(LO->cframe_resume, CFRAME_RESUME);
	ck_assert_uint_eq(LO->cframe_unwind_ff, CFRAME_UNWIND_FF);
	ck_assert_int_eq(LO->vmst_interp, ~LJ_VMST_INTERP);
	ck_assert_int_eq(LO->vmst_c, ~LJ_VMST_C);
	ck_assert_int_eq(LO->vmst_gc, ~LJ_VMST_GC);
	ck_assert_int_eq(LO->vmst_exit, ~LJ_VMST_EXIT);
	ck_assert_int_eq(LO->vmst_record, ~LJ_VMST_RECORD);
	ck_assert_int_eq(LO->vmst_opt, ~LJ_VMST_OPT);
	ck_assert_int_eq(LO->vmst_asm, ~LJ_VMST_ASM);
	ck_assert_uint_eq(LO->nbc, BC__MAX);
	ck_assert_uint_eq(LO->bc_forl, BC_FORL);
	ck_assert_uint_eq(LO->bc_iterl, BC_ITERL);
	ck_assert_uint_eq(LO->bc_loop, BC_LOOP);
	ck_assert_uint_eq(LO->bc_funcf, BC_FUNCF);
	ck_assert_uint_eq(LO->bc_itern, BC_ITERN);
	ck_assert_uint_eq(LO->bc_jloop, BC_JLOOP);
	ck_assert_uint_eq(LO->bc_iforl, BC_IFORL);
}
END_TEST

START_TEST(layout_vm_code_bounds)
{
	ck_assert_uint_eq(LO->vm_begin, (uint64_t)(uintptr_t)lj_vm_asm_begin);
	ck_assert_uint_eq(LO->vm_end, (uint64_t)(uintptr_t)lj_vm_ffi_call);
	ck_assert_uint_gt(LO->vm_end, LO->vm_begin);
	/* The interpreter of this build is about 16 KiB (lj_vm.o .text). */
	ck_assert_uint_lt(LO->vm_end - LO->vm_begin, 64 * 1024);
}
END_TEST

/* Version 3: the array part of a table, where nupp.zone keeps its current id (a number
 * in t[1], whose TValue never moves: LuaJIT's GC does not move objects, and an array
 * part only moves when the table is resized). */
START_TEST(layout_tables)
{
	lua_State *L = luaL_newstate();
	GCtab *t;
	TValue *tv;

	OFS(tab_array, GCtab, array);
	OFS(tab_asize, GCtab, asize);
	ck_assert_uint_eq(LO->dualnum, 0); /* numbers are doubles: the readers convert those */
	/* What zone.lua does: t = {0}; t[1] = id; the reader finds t[1] from the layout. */
	ck_assert_int_eq(luaL_dostring(L, "box = {0} box[1] = 16777217"), 0);
	lua_getglobal(L, "box");
	t = (GCtab *)lua_topointer(L, -1);
	ck_assert_uint_ge(*(uint32_t *)((char *)t + LO->tab_asize), 2);
	tv = (TValue *)(uintptr_t)(*(uint64_t *)((char *)t + LO->tab_array)) + 1;
	ck_assert(tvisnum(tv));
	ck_assert(numV(tv) == 16777217.0);
	lua_close(L);
}
END_TEST

NUPP_CHECK_MAIN("lj_layout", 0, false, false,
		layout_tables,
		layout_identity,
		layout_gg_state,
		layout_lua_state,
		layout_objects,
		layout_jit,
		layout_frames_and_states,
		layout_vm_code_bounds)
