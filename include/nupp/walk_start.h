/* Where a walk begins: is the sampled thread running the VM, the C frames of the
 * interpreter's helpers and protected calls, the start frame, base and leaf PC
 * (nupp_walk_start, which resets the walk), the base to retry with after a failed walk,
 * and where a sample on a trace was (nupp_walk_trace, with the trace cache).
 *
 * Owns the start of a walk and the trace cache (w->tc); takes no frame step (walk_frame.h
 * does) and emits no frame. */
#ifndef NUPP_WALK_START_H
#define NUPP_WALK_START_H

#include "nupp/walk_stack.h"

/* The registers a sample starts from, and the sampled thread's own user stack. */
struct nupp_walk_regs {
	__u64 ip, rbx, rdx, rbp, r14;
	__u64 sp;      /* user stack pointer */
	__u64 stk_top; /* end of the mapping that holds sp (the thread's stack), 0 unknown */
};

/* Where the start frame's base comes from: nupp_walk_start's rules, or a retry. */
enum nupp_walk_base {
	NUPP_WALK_BASE_AUTO = 0, /* jit_base, else registers (rdx/rbx), else L->base */
	NUPP_WALK_BASE_L = 1,    /* L->base (the VM stores it before it calls C) */
	NUPP_WALK_BASE_RBP = 2,  /* rbp: BASE saved by the VM around non-syncing C helpers */
};

/* Is the sampled thread running the VM g now? Either its IP is in the interpreter with
 * DISPATCH (r14, vm_x64.dasc:32) of g, or the running lua_State's C frame (the VM's rsp
 * when it was entered, lj_frame.h) lies on the thread's own stack, above its SP: a thread
 * in C code, a trace, the GC or the JIT compiler called by the VM. Anything else is a
 * thread (or a moment) outside the VM: host code. */
NUPP_WALK_INLINE int nupp_walk_running(const struct nupp_lj_layout *lo, __u64 g, const struct nupp_walk_regs *r,
				       __u64 cframe)
{
	if (r->ip >= lo->vm_begin && r->ip < lo->vm_end && r->r14 == g - (__s64)lo->gg_disp2g)
		return 1;
	return cframe && r->stk_top && cframe >= r->sp && cframe < r->stk_top;
}

/* Bytes of a C frame read at once from 8 below it: the return address pushed by a call
 * made on it, SAVE_NRES, SAVE_PC, SAVE_CFRAME. */
#define NUPP_WALK_CF_READ 56
/* Protected calls (lj_vm_cpcall) nested above the interpreter's C frame, at most. */
#define NUPP_WALK_CPCALLS 2

/* The C frame a helper of the interpreter was called on (in *hcf), from the running
 * lua_State's C frame cf: its SAVE_PC in *spc and, in *ra, the return address of the
 * call made on it.
 * That is cf itself, unless cf is a protected call's: lj_vm_cpcall (vm_x64.dasc:646-666)
 * pushes a C frame with SAVE_NRES = -savestack(L, L->top) < 0, the mark of a C frame
 * without a Lua frame (lj_err.c:798), and SAVE_PC = L (no bytecode); its SAVE_CFRAME is
 * the C frame the caller of lj_vm_cpcall ran on. The interpreter enters the JIT
 * compiler that way with vmstate still INTERP (lj_trace_ins, lj_trace.c:821, from
 * lj_trace_hot, lj_dispatch_call, lj_dispatch_ins, lj_dispatch_stitch; trace_state
 * sets RECORD, OPT and ASM only in their phases, lj_trace.c:745-791), so the helper
 * is the one that called lj_vm_cpcall, below. Sets NUPP_SMP_F_CPCALL then. 0 or -1. */
NUPP_WALK_INLINE int nupp_walk_helper_frame(struct nupp_walk *w, const struct nupp_lj_layout *lo, __u64 cf,
					    __u64 *spc, __u64 *ra, __u64 *hcf)
{
	unsigned char *b = w->fnbuf;
	__u64 prev;
	__s32 nres;
	int k;

	if (lo->cframe_ofs_pc + 16 > NUPP_WALK_CF_READ || lo->cframe_ofs_prev + 16 > NUPP_WALK_CF_READ ||
	    lo->cframe_ofs_nres + 12 > NUPP_WALK_CF_READ)
		return -1;
	for (k = 0; k <= NUPP_WALK_CPCALLS; k++) {
		if (!cf || NUPP_WALK_RD(b, NUPP_WALK_CF_READ, cf - 8))
			return -1;
		nres = (__s32)nupp_walk_u32(b, lo->cframe_ofs_nres + 8, 63);
		if (nres >= 0) {
			*hcf = cf;
			*ra = nupp_walk_u64(b, 0, 63);
			*spc = nupp_walk_u64(b, lo->cframe_ofs_pc + 8, 63);
			return 0;
		}
		prev = nupp_walk_u64(b, lo->cframe_ofs_prev + 8, 63) & lo->cframe_rawmask;
		if (prev <= cf)
			return -1; /* C frames only go up the C stack */
		cf = prev;
		w->st.flags |= NUPP_SMP_F_CPCALL;
	}
	return -1;
}

/* Is the C frame cf a protected call's (SAVE_NRES < 0, see nupp_walk_helper_frame)? */
NUPP_WALK_INLINE int nupp_walk_cpcall_frame(struct nupp_walk *w, const struct nupp_lj_layout *lo, __u64 cf)
{
	__s32 nres = 0;

	return cf && !NUPP_WALK_RD(&nres, 4, cf + lo->cframe_ofs_nres) && nres < 0;
}

/* Picks the start frame and leaf PC and resets the walk. Returns 0, or the walk
 * result (READ_FAULT, BAD_FRAME) when the VM state or the chosen base is unusable. */
NUPP_WALK_INLINE int nupp_walk_start(struct nupp_walk *w, const struct nupp_lj_layout *lo, __u64 g,
				     const struct nupp_walk_regs *r, __u32 max_depth, __u32 how, __s32 *vmstate)
{
	__u64 L = 0, jit_base = 0, base = 0, stack = 0, cf = 0, spc = 0, top, lbase, ra = 0, hcf = 0;
	__u32 stacksize = 0, glo, gofs = 0, both = 0;
	__u64 glen;
	int interp;
	__s32 vms = 0;
	__s64 g2l = lo->gg_g2l, clo, chi;

	w->g = g;
	w->gen++; /* forget the functions and instructions of earlier walks */
	w->rep_delta = 0;
	w->win_hi = 0;
	w->code_hi = 0;
	w->stk_hi = 0;
	w->hash = 0xcbf29ce484222325ull;
	w->gmix = 0;
	w->last_gen = 0;
	w->max_depth = max_depth;
	w->iter = 0;
	w->skip = 0;
	w->coro = 0;
	w->why = 0;
	w->strict = 0;
	w->unwatched = 0;
#ifdef NUPP_WALK_WATCH
	w->nmet = 0;
#endif
	w->fc_hits = w->fc_fills = w->fc_looks = w->fc_stale = w->fc_pgreads = w->fc_fns = w->fc_fnfills = 0;
	w->rd_n = w->rd_bytes = w->rd_win = w->rd_code = w->rd_fn = 0;
	w->ins_pc = 0;
	w->result = NUPP_WALK_RUN;
	w->pc_above = 0;
	w->leaf_pc[0] = w->leaf_pc[1] = 0;
	w->rbx = r->rbx;
	w->lbase = 0;
	w->st.depth = 0;
	w->st.flags = 0;
	w->st.traceno = 0;
	w->st.mcofs = 0;
	w->st.trace = 0;
	w->st.mcode = 0;
	w->st.pgen = 0;
	w->st.callsite = 0;
	w->st.g = g;
	w->st.tserial = 0;
	w->st.pad_t = 0;
	w->helper_ra = 0;
	w->in_vm = r->ip >= lo->vm_begin && r->ip < lo->vm_end;
	w->cf = 0;
	if (!nupp_walk_layout_ok(lo))
		return NUPP_WALK_BAD_FRAME;
	/* vmstate, cur_L and jit_base, and the main lua_State (GG_State puts it just below
	 * global_State, lj_dispatch.h:89-92) in one read when they fit, else the fields of
	 * global_State in one read; then the running lua_State unless it was the main one. */
	glo = nupp_walk_g_lo(lo);
	clo = g2l < (__s64)glo ? g2l : (__s64)glo;
	chi = g2l + NUPP_WALK_L_READ > (__s64)nupp_walk_g_hi(lo) ? g2l + NUPP_WALK_L_READ
								  : (__s64)nupp_walk_g_hi(lo);
	glen = (__u64)(chi - clo);
	if (chi - clo <= NUPP_WALK_GL_READ && glen <= NUPP_WALK_GL_READ) {
		if (NUPP_WALK_RD(w->gbuf, glen, g + clo))
			return NUPP_WALK_READ_FAULT;
		gofs = (__u32)((__s64)glo - clo);
		both = 1;
	} else if (NUPP_WALK_RD(w->gbuf, NUPP_WALK_G_SPAN, g + glo)) {
		return NUPP_WALK_READ_FAULT;
	}
	vms = (__s32)nupp_walk_u32(w->gbuf, gofs + lo->g_vmstate - glo, 511);
	L = nupp_walk_u64(w->gbuf, gofs + lo->g_cur_L - glo, 511);
	jit_base = nupp_walk_u64(w->gbuf, gofs + lo->g_jit_base - glo, 511);
	w->tgen = nupp_walk_u32(w->gbuf, gofs + lo->g_tserial - glo, 511);
	w->sweepno = nupp_walk_u32(w->gbuf, gofs + lo->g_sweepno - glo, 511);
	if (!L)
		return NUPP_WALK_READ_FAULT;
	if (both && L == g + g2l)
		__builtin_memcpy(w->Lbuf, w->gbuf + ((__u32)(g2l - clo) & 511), NUPP_WALK_L_READ);
	else if (NUPP_WALK_RD(w->Lbuf, NUPP_WALK_L_READ, L))
		return NUPP_WALK_READ_FAULT;
	*vmstate = vms;
	w->L = L;
	cf = nupp_walk_u64(w->Lbuf, lo->L_cframe, 127) & lo->cframe_rawmask;
	if (!nupp_walk_running(lo, g, r, cf))
		return NUPP_WALK_NOT_RUNNING;
	w->cf = cf;
	stack = nupp_walk_u64(w->Lbuf, lo->L_stack, 127);
	stacksize = nupp_walk_u32(w->Lbuf, lo->L_stacksize, 127);
	lbase = nupp_walk_u64(w->Lbuf, lo->L_base, 127);
	w->bot = stack + (__u64)lo->tv_size * lo->fr2;
	top = stack + (__u64)lo->tv_size * stacksize;
	w->stk_lo = stack;
	w->stk_hi = top;
	if (how == NUPP_WALK_BASE_AUTO && jit_base) {
		/* On a trace (also its C helpers, GC from a trace and the head window):
		 * memory is intact from jit_base down. */
		w->mode = NUPP_WALK_TRACE;
		w->frame = jit_base - lo->tv_size;
		w->st.flags = NUPP_SMP_F_TRACE;
		return 0;
	}
	/* While a trace is recorded the interpreter runs each instruction with vmstate RECORD
	 * (trace_state sets it before lj_record_ins, lj_trace.c:745, and INTERP only when the
	 * trace ends or aborts, lj_trace.c:791/803), its registers as always; in C code, RECORD is the recorder's own (under the protected
	 * call of lj_trace_ins, where L->base is synced) or a helper's of the interpreter. */
	interp = vms == lo->vmst_interp || vms == lo->vmst_record;
	if (how == NUPP_WALK_BASE_AUTO && interp && r->ip >= lo->vm_begin && r->ip < lo->vm_end &&
	    r->r14 == g - (__s64)lo->gg_disp2g && r->rdx > w->bot && r->rdx <= top) {
		/* Interpreter code: BASE in rdx, PC in rbx (vm_x64.dasc:21,30-32). */
		w->mode = NUPP_WALK_REGS;
		w->lbase = lbase;
		w->frame = r->rdx - lo->tv_size;
		w->leaf_pc[0] = r->rbx;
		w->st.flags = NUPP_SMP_F_REGS;
		return 0;
	}
	/* C, GC, EXIT, RECORD/OPT/ASM, INTERP in a C helper: L->base is synced,
	 * except in the few helpers called without a sync, where rbp holds BASE. */
	w->mode = NUPP_WALK_MEM;
	w->lbase = lbase;
	w->strict = interp && (vms == lo->vmst_interp || !nupp_walk_cpcall_frame(w, lo, cf));
	/* ... and in the interpreter right after such a helper returns, before BASE is
	 * restored from rbp (lj_BC_LEN: `call extern lj_tab_len` .. `mov BASE, RB`). */
	if (how == NUPP_WALK_BASE_RBP ||
	    (how == NUPP_WALK_BASE_AUTO && w->strict &&
	     (r->ip < lo->vm_begin || r->ip >= lo->vm_end || r->rdx <= w->bot || r->rdx > top))) {
		base = r->rbp;
		w->st.flags = NUPP_SMP_F_RBP;
	} else {
		base = lbase;
		w->st.flags = NUPP_SMP_F_LBASE;
	}
	if (w->strict)
		w->st.flags |= NUPP_SMP_F_STRICT;
	if (base <= w->bot || base > top || (base & 7))
		return NUPP_WALK_BAD_FRAME;
	/* INTERP in a C helper that rbx does not prove: the helper was called from the
	 * interpreter's code, whose rsp is its C frame (vm_x64.dasc: `mov L:RB->cframe, rsp`
	 * at VM entry), so its return address lies just below it. The VM stores BASE in
	 * L->base and PC in SAVE_PC before the calls that need them: the leaf may take
	 * SAVE_PC then, and userspace keeps the stack only if that call site is one of them. */
	/* The IP may be in the VM's own code then too (lj_vm_cpcall's entry and exit,
	 * vm_x64.dasc:646-669 and 445-452): the interpreter runs on its C frame
	 * (rsp == cframe), so code running below it is a callee of a call made there. */
	if (how == NUPP_WALK_BASE_L && w->strict && cf) {
		if (nupp_walk_helper_frame(w, lo, cf, &spc, &ra, &hcf) ||
		    ((r->ip >= lo->vm_begin && r->ip < lo->vm_end) && r->sp >= hcf))
			spc = hcf = 0;
		/* (SAVE_PC may be 0: vm_hotcall clears it after lj_dispatch_call, and a
		 * helper whose call stores L->base only, such as lj_dispatch_ins, may
		 * find it so.) */
		if (hcf && ra >= lo->vm_begin && ra < lo->vm_end)
			w->helper_ra = ra;
		else
			w->st.flags &= ~NUPP_SMP_F_CPCALL;
	} else if (cf && NUPP_WALK_RD(&spc, 8, cf + lo->cframe_ofs_pc)) {
		spc = 0;
	}
	w->frame = base - lo->tv_size;
	w->leaf_pc[0] = r->rbx;
	w->leaf_pc[1] = spc;
	return 0;
}

/* The start base to retry with after a failed walk, 0 for none (a retry is validated
 * like the first attempt): after registers or rbp, L->base (for INTERP in a C helper,
 * with SAVE_PC as the leaf's PC when rbx is not in it). */
NUPP_WALK_INLINE __u32 nupp_walk_retry(const struct nupp_walk *w, const struct nupp_lj_layout *lo, __s32 vmstate,
				       __u32 attempt, __u64 ip)
{
	if (attempt > 0 || w->mode == NUPP_WALK_TRACE || w->result == NUPP_WALK_NOT_RUNNING)
		return 0;
	/* Registers failed (an entry/exit window of the VM), or rbp was not BASE. */
	if (w->mode == NUPP_WALK_REGS || w->strict)
		return NUPP_WALK_BASE_L;
	return 0;
}

/* Reads a 64-bit field at base+o64 and a 32-bit field at base+o32: in one read when
 * they lie within 32 bytes of each other, else in two. 0 or a read error. */
NUPP_WALK_INLINE int nupp_walk_read2(struct nupp_walk *w, __u64 base, __u32 o64, __u32 o32, __u64 *v64,
				     __u32 *v32)
{
	__u32 a = o64 < o32 ? o64 : o32, b = o64 + 8 > o32 + 4 ? o64 + 8 : o32 + 4;

	if (b - a > 32)
		return NUPP_WALK_RD(v64, 8, base + o64) || NUPP_WALK_READ(v32, 4, base + o32);
	if (NUPP_WALK_RD(w->fnbuf, b - a, base + a))
		return -1;
	*v64 = nupp_walk_u64(w->fnbuf, o64 - a, 31);
	*v32 = nupp_walk_u32(w->fnbuf, o32 - a, 31);
	return 0;
}

/* True when the 8 code bytes before a return address end with an x86-64 call: call
 * rel32 (E8), call r64 (FF D0+r) or with REX.B (41 FF D0+r), the forms LuaJIT emits. */
NUPP_WALK_INLINE int nupp_walk_is_call(__u64 code)
{
	__u32 b5 = (__u32)(code >> 24) & 0xff, b2 = (__u32)(code >> 48) & 0xff, b1 = (__u32)(code >> 56) & 0xff;

	return b5 == 0xe8 || (b2 == 0xff && (b1 & 0xf8) == 0xd0);
}

/* Records where a trace sample was: trace number, GCtrace* and its serial, mcode and
 * offset. traces = J->trace (GCRef array); vmstate >= 0 is the running trace,
 * alive while this sample runs in it (its VM frees traces on this thread, never during
 * the sample). */
NUPP_WALK_INLINE void nupp_walk_trace(struct nupp_walk *w, const struct nupp_lj_layout *lo, __s32 vmstate,
				      __u64 ip)
{
	__u64 J = w->g + (__s64)lo->gg_g2j, arr = 0, T = 0, mcode = 0, ra = 0, code = 0, jsp;
	__u32 size = 0, sz = 0, spadj = 0, serial = 0, span = nupp_walk_t_span(lo);
	__u32 slot = (__u32)vmstate & (NUPP_WALK_TC - 1);
	struct nupp_walk_tc *c = &w->tc[slot];

	if (vmstate < 0)
		return;
	w->tc_slot = slot;
	if (w->tc_tag && c->tag == w->tc_tag && c->g == w->g && c->traceno == (__u32)vmstate && c->tgen == w->tgen) {
		T = c->T;
		mcode = c->mcode;
		sz = c->szmcode;
		spadj = c->spadj;
		serial = c->serial;
		goto found;
	}
	if (nupp_walk_read2(w, J, lo->J_trace, lo->J_sizetrace, &arr, &size) || (__u32)vmstate >= size)
		return;
	if (NUPP_WALK_RD(&T, 8, arr + 8ull * (__u32)vmstate) || !T)
		return;
	/* The header up to its last field used, in one read (checked by nupp_walk_layout_ok). */
	if (span > NUPP_WALK_T_READ || NUPP_WALK_RD(w->ptbuf, span, T))
		return;
	mcode = nupp_walk_u64(w->ptbuf, lo->T_mcode, 127);
	sz = nupp_walk_u32(w->ptbuf, lo->T_szmcode, 127);
	spadj = nupp_walk_u32(w->ptbuf, lo->T_spadjust, 127) & 0xffff;
	serial = nupp_walk_u32(w->ptbuf, lo->T_serial, 127);
	if (w->tc_tag) {
		c->tag = w->tc_tag;
		c->g = w->g;
		c->traceno = (__u32)vmstate;
		c->T = T;
		c->mcode = mcode;
		c->szmcode = sz;
		c->spadj = spadj;
		c->serial = serial;
		c->tgen = w->tgen;
		c->seen = 0;
	}
found:
	jsp = (__u64)spadj + lo->cframe_size_jit - lo->cframe_size;
	w->st.traceno = (__u32)vmstate;
	w->st.trace = T;
	w->st.mcode = mcode;
	w->st.tserial = serial;
	if (ip >= mcode && ip < mcode + sz) {
		w->st.mcofs = (__u32)(ip - mcode);
		w->st.flags |= NUPP_SMP_F_MCODE;
	} else if (w->cf && w->cf > jsp + 8 && !NUPP_WALK_RD(&ra, 8, w->cf - jsp - 8) && ra >= mcode + 5 &&
		   ra <= mcode + sz &&
		   !NUPP_WALK_RD(&code, 8, ra - 8) && nupp_walk_is_call(code)) {
		/* A C function (a helper, an FFI callee, the allocator) called by this trace:
		 * the interpreter enters a trace with rsp = C frame - (CFRAME_SIZE_JIT -
		 * CFRAME_SIZE) (vm_x64.dasc BC_JLOOP: `sub rsp, 16`), and the trace's code runs
		 * spadjust below that (lj_asm.c asm_head_root/side: emit_spsub), so the
		 * call pushed its return address just below, right after a call
		 * instruction of the trace. The call site is in the trace's code: its
		 * snapshot names the inlined frames, as for a sample on that instruction. */
		w->st.mcofs = (__u32)(ra - 1 - mcode);
		w->st.flags |= NUPP_SMP_F_MCODE | NUPP_SMP_F_MCALL;
	}
	w->hash = nupp_walk_mix(w->hash, T ^ ((__u64)w->st.traceno << 48));
	w->hash = nupp_walk_mix(w->hash, serial);
	w->hash = nupp_walk_mix(w->hash, mcode + w->st.mcofs + ((__u64)w->st.flags << 56));
}

#endif /* NUPP_WALK_START_H */
