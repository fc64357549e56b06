/* Rewriting a trace sample's frames: finds the entry of its trace (decoding it on first
 * need), the snapshot whose code holds the sample's machine-code offset, and puts that
 * snapshot's leaf position and inlined frames in place of the walker's. Reads no target
 * memory itself; may not change an entry's decoded snapshots. */
#include <errno.h>
#include <string.h>

#include "snapshot_priv.h"


/* Finds the entry of a sample's trace incarnation, decoding it now: from its BPF copy,
 * or when none came, from the target if it still lives. */
static struct tr_entry *tr_find(struct nupp_traces *t, const struct nupp_smp_stack *st)
{
	struct tr_entry *e = tr_lookup(t, st->trace, st->traceno, st->mcode, st->tserial);

	if (!e && st->tserial && st->g && !tr_add(t, st->g, st->trace, st->traceno, st->tserial, st->pgen))
		e = tr_lookup(t, st->trace, st->traceno, st->mcode, st->tserial);
	if (!e)
		return NULL;
	e->used_us = t->now_us;
	if (e->raw && tr_decode_raw(t, e))
		return NULL;
	return e->failed ? NULL : e;
}

/* Position inside the Lua frame f of the bytecode at pc (the leaf: a snapshot PC is the
 * instruction itself, lj_snap_restore resumes there) or, with ret, of the call that
 * return PC pc follows (the frame links below it, as lj_debug_framepc counts), or -1. */
static __s32 tr_pos(const struct nupp_lj_layout *lo, const struct nupp_smp_frame *f, __u64 pc, int ret)
{
	__u64 bc = f->ptr + lo->pt_size;

	if (f->kind != NUPP_SMP_LUA || pc < bc + (ret ? lo->bcins_size : 0) ||
	    pc >= bc + (__u64)lo->bcins_size * f->sizebc || ((pc - bc) % lo->bcins_size))
		return -1;
	return (__s32)((pc - bc) / lo->bcins_size) - (ret ? 1 : 0);
}

/* Rewrites a trace sample's frames with the snapshot's leaf PC and inlined frames. */
int nupp_traces_expand(struct nupp_traces *t, const struct nupp_smp_stack *st, struct nupp_smp_frame *out, int max)
{
	const struct nupp_lj_layout *lo = &t->lo;
	struct tr_entry *e;
	const struct tr_snap *sn;
	int n = (int)st->depth, k, i, si;
	__u64 pc, start;

	if (n < 1 || n > max) {
		t->why = "a trace sample's stack is malformed";
		return -EINVAL;
	}
	memcpy(out, st->frames, sizeof(*out) * n);
	if (!(st->flags & NUPP_SMP_F_TRACE) || !(st->flags & NUPP_SMP_F_MCODE))
		return n; /* IP in a C helper or exit stub: the caller chain is exact, no leaf */
	e = tr_find(t, st);
	if (!e) {
		nupp_pr(NUPP_DEBUG, "trace %u: not decoded (no copy, and not readable now)\n", st->traceno);
		t->why = "trace freed before it was copied or read";
		return -ENOENT;
	}
	si = nupp_snap_search(e->mcofs, e->nsnap, st->mcofs);
	if (si < 0)
		return n;
	sn = &e->snaps[si];
	if (!sn->ok) {
		nupp_pr(NUPP_DEBUG, "trace %u snapshot %d of %u: not decoded (%s)\n", st->traceno, si, e->nsnap,
			tr_refusal_name(sn->why));
		t->why = tr_refusal_cause(sn->why);
		return -ENOENT;
	}
	/* The snapshot's slot 0 must be the frame the sample found at jit_base. It is not
	 * when the trace links to a trace with another start frame: its tail stores the
	 * new BASE in jit_base before the jump (lj_asm.c asm_tail_link). The chain from
	 * jit_base is exact then; this snapshot's frames and leaf are not its. A return
	 * below the start frame (IR_RETF) stores the lower frame's BASE in jit_base too:
	 * the snapshots after it run in the frame it returned into (sn->retpt). */
	start = sn->startpt ? sn->startpt : sn->ret_below ? sn->retpt : e->start0; /* 0: not checked */
	if (start && start != st->frames[0].ptr) {
		/* Past the IR_RETF of this snapshot's own code: the frame at jit_base is the
		 * one it returned into, at the call its return PC follows. */
		if (sn->retin_pt && sn->retin_pt == st->frames[0].ptr && st->frames[0].kind == NUPP_SMP_LUA) {
			out[0].pos = tr_pos(lo, &out[0], sn->retin_pc, 1);
			if (out[0].pos >= 0)
				return n;
			nupp_pr(NUPP_DEBUG, "trace %u snapshot %d of %u: its return PC is not in the frame "
				"it returned into\n", st->traceno, si, e->nsnap);
			t->why = "trace snapshot's return PC not in the frame it returned into";
			return -ENOENT;
		}
		return n;
	}
	if (n + sn->nfr > max) {
		t->why = "stack deeper than the frames kept";
		return -E2BIG;
	}
	/* Inner frames first: innermost inlined frame gets the snapshot PC; each frame's
	 * link is the return PC into the frame below it. */
	memmove(out + sn->nfr, out, sizeof(*out) * n);
	for (k = 0; k < sn->nfr; k++) {
		const struct tr_frame *fr = &sn->fr[sn->nfr - 1 - k];

		out[k] = fr->f;
		out[k].link = (fr->link & lo->frame_type) == lo->frame_lua ? lo->frame_lua
									  : (__u8)(fr->link & lo->frame_typep);
	}
	pc = sn->pc;
	for (i = 0; i <= sn->nfr; i++) {
		struct nupp_smp_frame *f = &out[i];

		f->pos = tr_pos(lo, f, pc, i > 0);
		/* The PC is not in the innermost frame: not decoded. A builtin's frame (a fast
		 * or C function the trace set up) has no PC of its own: its caller's is the
		 * call's, from its link. */
		if (i == 0 && f->pos < 0 && f->kind == NUPP_SMP_LUA) {
			nupp_pr(NUPP_DEBUG, "trace %u snapshot %d of %u: its PC is not in its innermost frame\n",
				st->traceno, si, e->nsnap);
			t->why = "trace snapshot's PC not in its innermost frame";
			return -ENOENT;
		}
		if (i < sn->nfr)
			pc = sn->fr[sn->nfr - 1 - i].ret_pc;
	}
	return n + sn->nfr;
}

/* Why the last failed expansion failed. */
const char *nupp_traces_why(const struct nupp_traces *t)
{
	return t->why;
}
