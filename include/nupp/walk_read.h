/* Reads shared within one walk: target memory does not change while a sample is walked,
 * so a walk reads each thing once (see NUPP_WALK_WIN in walk_state.h): the per-walk memo
 * of functions and CALL instructions, the Lua stack in windows (frame headers, stack
 * slots), the bytecode before a return PC in one read, and what the walk uses of a
 * GCfunc and its GCproto (from the memo, the function cache, or read).
 *
 * Owns the memo (fns, insns, gen), the windows (win, code and their bounds) and the
 * rd_* counters; emits no frame and moves no walk. */
#ifndef NUPP_WALK_READ_H
#define NUPP_WALK_READ_H

#include "nupp/walk_cache.h"

/* Memo slot of an address (objects are 8-byte aligned). */
NUPP_WALK_INLINE __u32 nupp_walk_slot(__u64 a)
{
	return (__u32)((a >> 3) ^ (a >> 9) ^ (a >> 15)) & (NUPP_WALK_MEMO - 1);
}

/* Reads the frame header [frame-8, frame+8) (function TValue, link): from the stack
 * window, reading the window that ends at frame+8 when the header is not in it; directly
 * when frame is outside the lua_State's stack or a window read failed. */
NUPP_WALK_INLINE int nupp_walk_hdr(struct nupp_walk *w, __u64 frame, __u64 hdr[2])
{
	__u64 a = frame - 8, hi = frame + 8, rlo, len;

	if (!(a >= w->win_lo && hi <= w->win_hi) && a >= w->stk_lo && hi <= w->stk_hi) {
		rlo = hi - w->stk_lo > NUPP_WALK_WIN ? hi - NUPP_WALK_WIN : w->stk_lo;
		len = hi - rlo;
		w->win_hi = 0;
		if (len <= NUPP_WALK_WIN && (w->rd_win++, !NUPP_WALK_RD(w->win, len, rlo))) {
			w->win_lo = rlo;
			w->win_hi = hi;
		} else {
			w->stk_hi = 0; /* an unreadable page in the stack: direct reads from now on */
		}
	}
	if (a >= w->win_lo && hi <= w->win_hi) {
		__builtin_memcpy(hdr, w->win + ((a - w->win_lo) & (NUPP_WALK_WIN - 1)), 16);
		return 0;
	}
	return NUPP_WALK_RD(hdr, 16, a);
}

/* Reads the 64-bit slot at addr of the Lua stack: from the window when it holds it. */
NUPP_WALK_INLINE int nupp_walk_slot64(struct nupp_walk *w, __u64 addr, __u64 *v)
{
	if (addr >= w->win_lo && addr + 8 <= w->win_hi) {
		__builtin_memcpy(v, w->win + ((addr - w->win_lo) & (NUPP_WALK_WIN - 1)), 8);
		return 0;
	}
	return NUPP_WALK_RD(v, 8, addr);
}

/* The CALL instruction before the return PC pc (frame_prevl, lj_frame.h:108): from the
 * memo or the last code read, else read with up to NUPP_WALK_CODE bytes before it (where
 * the caller's GCproto often lies, nupp_walk_func takes it from there) and
 * NUPP_WALK_CODE_AFTER after it, in the page of the instruction. 0 or a read error. */
NUPP_WALK_INLINE int nupp_walk_call_ins(struct nupp_walk *w, const struct nupp_lj_layout *lo, __u64 pc,
					 __u32 *ins)
{
	struct nupp_walk_ins *m = &w->insns[nupp_walk_slot(pc)];
	__u64 at = pc - lo->bcins_size, rlo, rhi, page = at & ~(__u64)(NUPP_WALK_PAGE - 1), len;

	if (m->pc == pc && m->gen == w->gen) {
		*ins = m->ins;
		return 0;
	}
	if (!(at >= w->code_lo && pc <= w->code_hi)) {
		rlo = pc > NUPP_WALK_CODE && pc - NUPP_WALK_CODE > page ? pc - NUPP_WALK_CODE : page;
		rhi = pc + NUPP_WALK_CODE_AFTER < page + NUPP_WALK_PAGE ? pc + NUPP_WALK_CODE_AFTER
									: page + NUPP_WALK_PAGE;
		len = rhi - rlo;
		w->code_hi = 0;
		if (pc < 4 || at < rlo || pc > rhi || len > NUPP_WALK_CODE + NUPP_WALK_CODE_AFTER)
			return NUPP_WALK_RD(ins, 4, at); /* not reached: pc is in its page */
		if ((w->rd_code++, NUPP_WALK_RD(w->code, len, rlo)))
			return -1;
		w->code_lo = rlo;
		w->code_hi = rhi;
	}
	__builtin_memcpy(ins, w->code + ((at - w->code_lo) & (2 * NUPP_WALK_CODE - 1)), 4);
	m->pc = pc;
	m->gen = w->gen;
	m->ins = *ins;
	return 0;
}

/* The includer may take it out of line (BPF: a global function, verified once rather
 * than in every state the step reaches it in). */
#ifndef NUPP_WALK_CALL_INS
#define NUPP_WALK_CALL_INS(w, lo, pc, ins) nupp_walk_call_ins((w), (lo), (pc), (ins))
#endif

/* What the walk uses of the GCfunc at fn: from the memo or the frame cache, else read
 * (and for a Lua function its GCproto, from the last code read when it holds it).
 * Returns 0 with *out, 1 when fn is unreadable or not a function, 2 when the GCproto is
 * unreadable. */
NUPP_WALK_INLINE int nupp_walk_func(struct nupp_walk *w, const struct nupp_lj_layout *lo, __u64 fn,
				    struct nupp_walk_fn **out)
{
	struct nupp_walk_fn *m = &w->fns[nupp_walk_slot(fn)];
	const unsigned char *pb = w->ptbuf;
	__u64 ptr, chunk = 0, pt;
	__u32 sizebc = 0;
	__s32 firstline = 0;
	__u8 ffid;

	if (m->fn == fn && m->gen == w->gen) {
		*out = m;
		return 0;
	}
	if (fn && w->fc_tag && NUPP_WALK_FC_FN_GET(w, fn, m)) {
		*out = m;
		return 0;
	}
	if (!fn || (w->rd_fn++, NUPP_WALK_RD(w->fnbuf, NUPP_WALK_FN_READ, fn)))
		return 1;
	if (w->fnbuf[lo->fn_gct & 63] != lo->gct_func)
		return 1;
	ffid = w->fnbuf[lo->fn_ffid & 63];
	if (ffid == lo->ff_lua) {
		ptr = nupp_walk_u64(w->fnbuf, lo->fn_pc, 63);
		pt = ptr - lo->pt_size;
		if (pt >= w->code_lo && pt + NUPP_WALK_PT_READ <= w->code_hi)
			pb = w->code + ((pt - w->code_lo) & (2 * NUPP_WALK_CODE - 1));
		else if ((w->rd_fn++, NUPP_WALK_RD(w->ptbuf, NUPP_WALK_PT_READ, pt)))
			return 2;
		sizebc = nupp_walk_u32(pb, lo->pt_sizebc, 127);
		chunk = nupp_walk_u64(pb, lo->pt_chunkname, 127);
		firstline = (__s32)nupp_walk_u32(pb, lo->pt_firstline, 127);
	} else {
		ptr = nupp_walk_u64(w->fnbuf, lo->fn_cf, 63);
	}
	m->fn = fn;
	m->gen = w->gen;
	m->ptr = ptr;
	m->chunk = chunk;
	m->sizebc = sizebc;
	m->firstline = firstline;
	m->ffid = ffid;
	if (w->fc_tag)
		NUPP_WALK_FC_FN_FILL(w, fn, m);
	*out = m;
	return 0;
}

/* The includer may take it out of line (BPF: a global function, verified once for the
 * two places a step reads a function). */
#ifndef NUPP_WALK_FUNC
#define NUPP_WALK_FUNC(w, lo, fn, out) nupp_walk_func((w), (lo), (fn), (out))
#endif

#endif /* NUPP_WALK_READ_H */
