/* The LuaJIT layout struct: every offset and constant nupp-bpf reads from a LuaJIT VM.
 *
 * Our LuaJIT patch (scripts/luajit-usdt.patch) defines `luajit_bpf_layout` with this
 * type in lj_state.c and fills every field with offsetof/sizeof/constants from
 * LuaJIT's own headers at compile time, so neither BPF nor userspace ever hard-codes
 * a LuaJIT offset. It reaches us two ways: as argument 2 of the `luajit:vm_open`
 * probe, and as an exported data symbol read from the running process.
 *
 * This header compiles in three worlds: LuaJIT's C build, BPF (vmlinux.h types) and
 * host userspace; and its structs, between the ffi:begin and ffi:end markers, in LuaJIT's
 * ffi.cdef (scripts/gen-cdef.lua turns them into nupp/cdef.lua for lua/nupp/zone.lua).
 * Append fields only; bump NUPP_LJ_LAYOUT_VERSION on any change.
 */
#ifndef NUPP_LJ_LAYOUT_H
#define NUPP_LJ_LAYOUT_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define NUPP_LJ_LAYOUT_MAGIC 0x4c4a4250u /* "PBJL": LuaJIT BPF layout */
#define NUPP_LJ_LAYOUT_VERSION 12u
#define NUPP_LJ_LAYOUT_SYMBOL "luajit_bpf_layout"
#define NUPP_LJ_VMLIST_SYMBOL "luajit_bpf_vmlist"
#define NUPP_LJ_VMLIST_MAX 16
/* luajit:proto_free(g, pts, n) reports the prototypes that die in batches of at most
 * this many (the VM frees them after the probe); version 8 on. */
#define NUPP_LJ_PROTO_FREE_MAX 64
/* The branch a VM was built from (its layout's `branch`, version 12 on): they number
 * their fast functions differently. */
#define NUPP_LJ_BRANCH_LUAJIT 0  /* LuaJIT 2.1 as Debian's luajit ships it */
#define NUPP_LJ_BRANCH_LUAJIT2 1 /* OpenResty's luajit2 */
/* For the layout's initializer in LuaJIT's own build, where luajit.h defines
 * OPENRESTY_LUAJIT on OpenResty's branch. */
#ifdef OPENRESTY_LUAJIT
#define NUPP_LJ_BRANCH_BUILD NUPP_LJ_BRANCH_LUAJIT2
#else
#define NUPP_LJ_BRANCH_BUILD NUPP_LJ_BRANCH_LUAJIT
#endif

/* ffi:begin */
/* Offsets are bytes from the start of the named struct; sizes are sizeof(). */
struct nupp_lj_layout {
	/* -- Identity ---------------------------------------------------------- */
	__u32 magic;   /* NUPP_LJ_LAYOUT_MAGIC */
	__u32 version; /* NUPP_LJ_LAYOUT_VERSION */
	__u32 size;    /* sizeof(struct nupp_lj_layout) as the VM was built */
	__u8 gc64;     /* LJ_GC64 */
	__u8 fr2;      /* LJ_FR2: two slots per frame header */
	__u8 dualnum;  /* LJ_DUALNUM */
	__u8 hasjit;   /* LJ_HASJIT */

	/* -- GG_State: main lua_State | global_State | jit_State | ... dispatch -- */
	__s32 gg_disp2g;  /* GG_DISP2G: g = DISPATCH (r14) + this */
	__s32 gg_g2j;     /* GG_G2J: J = g + this */
	__s32 gg_g2l;     /* main lua_State = g + this (GG_OFS(L) - GG_OFS(g)) */
	__u32 gg_size;    /* sizeof(GG_State) */

	/* -- global_State ------------------------------------------------------ */
	__u32 g_vmstate;   /* int32: ~LJ_VMST_* or trace number */
	__u32 g_cur_L;     /* GCRef: running lua_State */
	__u32 g_jit_base;  /* MRef: BASE of the frame a trace runs in, 0 off trace */
	__u32 g_mainthref; /* GCRef: main lua_State */
	__u32 g_hookmask;  /* uint8 */

	/* -- lua_State --------------------------------------------------------- */
	__u32 L_size;
	__u32 L_gct;      /* uint8 */
	__u32 L_status;   /* uint8 */
	__u32 L_glref;    /* MRef: global_State */
	__u32 L_base;     /* TValue *: base of the current Lua frame (lazily synced) */
	__u32 L_top;
	__u32 L_maxstack;
	__u32 L_stack;    /* MRef: stack[0] (the thread itself), frames start at stack+1+FR2 */
	__u32 L_cframe;   /* void *: innermost C frame, low bits are flags */
	__u32 L_stacksize;

	/* -- GCfunc ------------------------------------------------------------ */
	__u32 fn_gct;  /* uint8 */
	__u32 fn_ffid; /* uint8: 0 Lua, 1 C, >1 fast function */
	__u32 fn_pc;   /* MRef: Lua functions: proto_bc(pt) */
	__u32 fn_cf;   /* lua_CFunction (C and fast functions) */

	/* -- GCproto (bytecode follows at +pt_size) ---------------------------- */
	__u32 pt_size;
	__u32 pt_sizebc;    /* MSize */
	__u32 pt_framesize; /* uint8 */
	__u32 pt_flags;     /* uint8 */
	__u32 pt_trace;     /* TraceNo1 (uint16) */
	__u32 pt_chunkname; /* GCRef: GCstr */
	__u32 pt_firstline; /* BCLine (int32) */
	__u32 pt_numline;   /* BCLine */
	__u32 pt_lineinfo;  /* MRef: uint8/16/32 by numline */
	__u32 pt_sizept;    /* MSize: size of the whole allocation */
	__u32 pt_gct;       /* uint8 */

	/* -- GCstr (chars follow at +str_size, NUL-terminated) ----------------- */
	__u32 str_size;
	__u32 str_len;
	__u32 str_hash;

	/* -- jit_State --------------------------------------------------------- */
	__u32 J_trace;     /* GCRef *: trace array */
	__u32 J_sizetrace; /* MSize */
	__u32 J_state;     /* TraceState */
	__u32 J_pc;        /* const BCIns *: PC being recorded */
	__u32 J_pt;        /* GCproto * being recorded */
	__u32 J_parent;    /* TraceNo */
	__u32 J_exitno;    /* ExitNo */

	/* -- GCtrace ----------------------------------------------------------- */
	__u32 T_size;
	__u32 T_gct;
	__u32 T_nsnap;    /* uint16 */
	__u32 T_nins;     /* IRRef (uint32) */
	__u32 T_nk;       /* IRRef */
	__u32 T_ir;       /* IRIns * (biased: ir[nk..nins)) */
	__u32 T_nsnapmap; /* uint32 */
	__u32 T_snap;     /* SnapShot * */
	__u32 T_snapmap;  /* SnapEntry * */
	__u32 T_startpt;  /* GCRef: GCproto */
	__u32 T_startpc;  /* MRef: BCIns */
	__u32 T_startins; /* BCIns */
	__u32 T_szmcode;  /* MSize */
	__u32 T_mcode;    /* MCode * */
	__u32 T_mcloop;   /* MSize */
	__u32 T_traceno;  /* TraceNo1 */
	__u32 T_link;     /* TraceNo1 */
	__u32 T_root;     /* TraceNo1 */
	__u32 T_linktype; /* uint8 */

	/* -- SnapShot / SnapEntry / IRIns -------------------------------------- */
	__u32 snap_size;
	__u32 snap_mapofs;  /* uint32 */
	__u32 snap_ref;     /* IRRef1 */
	__u32 snap_mcofs;   /* uint16 */
	__u32 snap_nslots;  /* uint8 */
	__u32 snap_topslot; /* uint8 */
	__u32 snap_nent;    /* uint8 */
	__u32 snap_count;   /* uint8 */
	__u32 snapentry_size;
	__u32 snap_frame;   /* SNAP_FRAME flag in a SnapEntry */
	__u32 snap_cont;    /* SNAP_CONT flag */
	__u32 ir_size;      /* sizeof(IRIns) */
	__u32 ir_o;         /* offset of the opcode byte in IRIns */
	__u32 ir_kgc;       /* IR_KGC opcode */
	__u32 ir_knum;      /* IR_KNUM opcode */
	__u32 ir_kint64;    /* IR_KINT64 opcode */

	/* -- Tagged values and GC types ---------------------------------------- */
	__u64 gcvmask;      /* LJ_GCVMASK: pointer bits of a tagged TValue (GC64) */
	__u32 tv_size;      /* sizeof(TValue) */
	__u32 itype_shift;  /* 47: itype = tv >> this (GC64) */
	__u32 itype_func;   /* LJ_TFUNC as an itype (32-bit, ~4) */
	__u32 itype_thread; /* LJ_TTHREAD */
	__u8 gct_func;      /* ~LJ_TFUNC as stored in gct */
	__u8 gct_proto;     /* ~LJ_TPROTO */
	__u8 gct_trace;     /* ~LJ_TTRACE */
	__u8 gct_thread;    /* ~LJ_TTHREAD */
	__u8 gct_str;       /* ~LJ_TSTR */
	__u8 ff_lua;        /* FF_LUA */
	__u8 ff_c;          /* FF_C */
	__u8 unused0;

	/* -- Frames (lj_frame.h) ----------------------------------------------- */
	__u32 frame_type;   /* FRAME_TYPE mask (3) */
	__u32 frame_typep;  /* FRAME_TYPEP mask (7) */
	__u32 frame_lua;
	__u32 frame_c;
	__u32 frame_cont;
	__u32 frame_varg;
	__u32 frame_luap;
	__u32 frame_cp;
	__u32 frame_pcall;
	__u32 frame_pcallh;
	__u32 bcins_size;   /* sizeof(BCIns) */
	__u32 bc_a_shift;   /* A operand = (ins >> this) & 0xff */
	__u32 cont_tailcall; /* LJ_CONT_TAILCALL */
	__u32 cont_ffi_callback;

	/* -- C frames of the interpreter (lj_frame.h, x64 POSIX) --------------- */
	__u32 cframe_size;      /* CFRAME_SIZE */
	__u32 cframe_size_jit;  /* CFRAME_SIZE_JIT */
	__u32 cframe_ofs_L;     /* SAVE_L: lua_State * */
	__u32 cframe_ofs_pc;    /* SAVE_PC */
	__u32 cframe_ofs_prev;  /* SAVE_CFRAME: previous C frame */
	__u32 cframe_ofs_nres;  /* SAVE_NRES */
	__u64 cframe_rawmask;   /* CFRAME_RAWMASK */
	__u32 cframe_resume;    /* CFRAME_RESUME bit */
	__u32 cframe_unwind_ff; /* CFRAME_UNWIND_FF bit */

	/* -- VM states (values stored in g->vmstate) --------------------------- */
	__s32 vmst_interp;
	__s32 vmst_c;
	__s32 vmst_gc;
	__s32 vmst_exit;
	__s32 vmst_record;
	__s32 vmst_opt;
	__s32 vmst_asm;
	__u32 nbc;          /* BC__MAX: number of bytecodes */

	/* -- Bytecodes that start or mark traces (for the trace channel) -------- */
	__u32 bc_forl;
	__u32 bc_iterl;
	__u32 bc_loop;
	__u32 bc_funcf;
	__u32 bc_itern;
	__u32 bc_jloop;
	__u32 bc_iforl;

	/* -- The interpreter's code: [vm_begin, vm_end) (hidden symbols) -------- */
	__u64 vm_begin; /* lj_vm_asm_begin */
	__u64 vm_end;   /* lj_vm_ffi_call: the last function of lj_vm.o */

	/* -- The GC's phase (version 2): strings are swept before prototypes ---- */
	__u32 g_gc_state;      /* uint8 g->gc.state */
	__u32 gcs_sweepstring; /* GCSsweepstring */
	__u32 gcs_sweep;       /* GCSsweep */
	__u32 g_gc_currentwhite; /* uint8 g->gc.currentwhite */
	__u32 gc_whites;         /* LJ_GC_WHITES: an object is dead if marked & otherwhite */
	__u32 gch_marked;        /* uint8 GChead.marked */

	/* -- A prototype's GC constants (version 3): k[-1] .. k[-sizekgc] ------- */
	__u32 pt_k;       /* MRef k: the GCRef constants lie below it */
	__u32 pt_sizekgc; /* MSize */

	/* -- GCtab (version 4): nupp.zone keeps its current id in a table's array --- */
	__u32 tab_array; /* MRef: the array part, TValue[asize] (index 0 first) */
	__u32 tab_asize; /* uint32: slots of the array part */

	/* -- GCtrace (version 5): a trace's code runs with rsp this far below the
	 * VM's C frame, so a C function it calls has its return address just below. */
	__u32 T_spadjust; /* uint16 */
	__u32 pad5;

	/* -- A trace's constants (version 6): the trace copy walks T->ir[nk..REF_TRUE) as
	 * the GC does (lj_gc.c gc_traverse_trace) to find its function constants (IR_KGC
	 * of type IRT_FUNC), without scanning its snapshot map. */
	__u8 ir_t;       /* offset of the type byte (IRType1) in IRIns */
	__u8 irt_func;   /* IRT_FUNC */
	__u8 irt_type;   /* IRT_TYPE: the type bits of that byte */
	__u8 ir_knull;   /* IR_KNULL: 64-bit type, one slot */
	__u32 irt_is64;  /* IRT_IS64: bit t set when a constant of type t takes two slots */
	__u32 ref_true;  /* REF_TRUE: the constants lie in [nk, REF_TRUE) */
	__u32 pad6;

	/* -- Trace serials (version 7): the patched trace_save gives every trace a
	 * serial unique in the process and stores it in the trace and, as the VM's
	 * newest, in its global_State, so a reader tells a trace from an earlier one at
	 * the same address and number without a probe, and knows that no trace was
	 * made since it last looked while the VM's newest serial is the same. */
	__u32 g_tserial; /* uint32 global_State: serial of the VM's newest trace */
	__u32 T_serial;  /* uint32 GCtrace: the trace's serial */

	/* -- GC sweeps (version 9): the patched GC counts the sweeps it begins (at the end
	 * of each atomic phase, and when a full GC fast-forwards to a sweep). An object is
	 * only ever freed by a sweep, and one reachable during sweep n (marked before it or
	 * allocated since) outlives it: what a reader read of an object it found alive
	 * holds while the count is the same. */
	__u32 g_sweepno; /* uint32 global_State: sweeps begun */
	__u32 pad9;

	/* -- Prototype constants (version 10): a call of a closure created many times is
	 * specialised to its prototype, not to the closure (lj_record.c
	 * rec_call_specialize), and the trace keeps that prototype alive as an IR_KGC
	 * constant of this type, which the trace copy names as it names functions. */
	__u8 irt_proto; /* IRT_PROTO */
	__u8 pad10[7];

	/* -- Local variables (version 11), for `nupp-bpf dump --locals`. A prototype's
	 * varinfo (in its allocation) lists its variables by the PC their range starts at:
	 * a name (NUL-terminated, or one byte below varname_max for a name of the compiler's
	 * own, VARNAME_END = 0 ending the list), the start as a ULEB128 delta from the one
	 * before, the length of the range in instructions (ULEB128). The variables live at a
	 * PC are the frame's slots 0, 1, ... in that order (lj_debug.c debug_varname). */
	__u32 pt_varinfo;  /* MRef: the varinfo stream */
	__u32 varname_max; /* VARNAME__MAX */
	/* The tag of each kind of value a local shows (itype of a TValue, GC64: bits 47+). */
	__u32 itype_nil, itype_false, itype_true, itype_str, itype_tab, itype_udata;
	__u32 itype_lightud, itype_numx, itype_cdata, itype_proto;

	/* -- The branch (version 12): NUPP_LJ_BRANCH_* ----------------------------- */
	__u8 branch;
	__u8 pad12[7];
};

/* The VMs a process has open, kept by the patched lua_newstate/lua_close, so a loader
 * that attaches late can find `g` without having seen `luajit:vm_open`. */
struct nupp_lj_vmlist {
	__u32 magic;      /* NUPP_LJ_LAYOUT_MAGIC once initialised */
	__u32 count;      /* slots in use (a closed VM leaves 0 in its slot) */
	__u64 g[NUPP_LJ_VMLIST_MAX];
	/* nupp.zone's state of the VM in slot i, written by the zone module in the process
	 * and read from outside (BPF, libnupp); zeroed by lua_close before the slot is freed.
	 * zone_tv[i] is the address of the Lua number (a TValue in a Lua table's array part,
	 * which never moves) holding the id of the zone path open now (0: no zone module);
	 * zone_table[i] the address of its id -> path table (struct nupp_zone_table,
	 * include/nupp/zone_abi.h; 0: none). */
	__u64 zone_tv[NUPP_LJ_VMLIST_MAX];
	__u64 zone_table[NUPP_LJ_VMLIST_MAX];
};
/* ffi:end */

#endif /* NUPP_LJ_LAYOUT_H */
