/* Decoding a copied trace: each snapshot's map entries into its PC and inlined frames,
 * then the bytecode its code executes (tr_exec_pc), from the prototypes' bytecode. Works
 * on a copy (struct tr_dec) snapshot_read.c made; reads target memory only through the
 * facts (snapshot_fact.c) and a prototype's allocation; may not touch the cache's buckets,
 * list or pool (snapshot.c). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot_priv.h"


/* LuaJIT's own headers (build/luajit/src) for the bytecode and IR opcodes; used only if
 * they agree with the layout the target VM exports (nupp_traces.ops_ok). */
#include "lj_obj.h"
#include "lj_bc.h"
#include "lj_ir.h"

/* -- Snapshot entries ----------------------------------------------------------- */

/* IR instruction ref in the copy (d->nk <= ref < d->nins: the caller checks). */
static const unsigned char *tr_ir(const struct nupp_traces *t, const struct tr_dec *d, __u32 ref)
{
	return d->irbuf + (size_t)(ref - d->nk) * t->lo.ir_size;
}

/* The opcode and 64-bit payload of IR constant ref (ir_kgc/ir_knum use ir[ref+1],
 * lj_ir.h:586-592), from the copy; 0 or -EINVAL. */
static int tr_irconst(struct nupp_traces *t, const struct tr_dec *d, __u32 ref, __u8 *op, __u64 *val)
{
	if (ref < d->nk || ref + 1 >= d->nins)
		return -EINVAL;
	*op = tr_ir(t, d, ref)[t->lo.ir_o];
	memcpy(val, tr_ir(t, d, ref + 1), 8);
	return 0;
}


/* The guard that specialises the call of function ref fn (a computed value), or NULL:
 * none, more than one (they disagree or cannot be told apart), or too many to keep. */
static const struct tr_spec *tr_spec_of(const struct tr_dec *d, __u32 fn)
{
	const struct tr_spec *found = NULL;
	__u32 i;

	if (fn < REF_BIAS || d->spec_many)
		return NULL;
	for (i = 0; i < d->nspec; i++) {
		if (d->spec[i].fn != fn)
			continue;
		if (found && (found->ff != d->spec[i].ff || found->v != d->spec[i].v))
			return NULL;
		found = &d->spec[i];
	}
	return found;
}

/* A frame's identity from a specialising guard: the builtin its ffid names, or the
 * prototype whose bytecode its PC is (the trace keeps that prototype alive, and a BPF copy
 * names it among its functions). */
static int tr_spec_func(struct nupp_traces *t, struct tr_dec *d, const struct tr_spec *sp, struct nupp_smp_frame *f)
{
	struct tr_fact *p;
	int err = 0;

	if (sp->ff) {
		memset(f, 0, sizeof(*f));
		f->pos = -1;
		f->kind = NUPP_SMP_FF;
		f->ptr = sp->v;
		return 0;
	}
	p = tr_fact_get(t, d, sp->v - t->lo.pt_size, 1, &err);
	if (!p)
		return err;
	*f = p->f;
	return 0;
}

/* Decodes one snapshot: its PC and the inlined frames. In FR2 the frame-link slot of a
 * frame carries SNAP_FRAME and holds the link as a KNUM constant; the function is the
 * slot below it, normally a KGC constant (lj_snap.c:64-80, 110-160). A vararg function's
 * frame is two frames in the snapshot: the call's, and above it the frame its body
 * runs in, whose link is FRAME_VARG and whose function slot is a copy of the call's
 * (lj_record.c rec_func_vararg); like the walker, the VARG frame is not a frame of its
 * own: the function appears once, at the call's frame. */
static void tr_decode_snap(struct nupp_traces *t, struct tr_dec *d, __u32 mapofs, __u32 nent, struct tr_snap *sn)
{
	const struct nupp_lj_layout *lo = &t->lo;
	const __u32 *map = d->map;
	const struct tr_spec *spec;
	__u64 kgc[256], knum[256];
	__u16 ref_of[256];
	__u8 isframe[256], iscont[256], isk[256];
	__u32 i, s, top = 1;

	sn->ok = 0;
	sn->why = TR_REF_MAP;
	sn->nfr = 0;
	sn->startpt = 0;
	if ((__u64)mapofs + nent + 2 > d->nmap)
		return;
	/* FR2: the PC is the 64-bit word after the entries, shifted by 8 (lj_jit.h:222-230). */
	memcpy(&sn->pc, &map[mapofs + nent], 8);
	sn->depth = (__u8)sn->pc;
	sn->pc >>= 8;
	/* Slots up to the highest one named are looked at (a trace's snapshots are many,
	 * most of them a few slots deep). */
	for (i = 0; i < nent; i++)
		if (map[mapofs + i] >> 24 > top)
			top = map[mapofs + i] >> 24;
	memset(isframe, 0, top + 1);
	memset(isk, 0, top + 1);
	memset(iscont, 0, top + 1);
	memset(ref_of, 0, (top + 1) * sizeof(ref_of[0]));
	for (i = 0; i < nent; i++) {
		__u32 e = map[mapofs + i], ref = e & 0xffff;
		__u8 op = 0;
		__u64 v = 0;

		s = e >> 24;
		ref_of[s] = (__u16)ref;
		if (e & lo->snap_frame)
			isframe[s] = 1;
		if (e & lo->snap_cont)
			iscont[s] = 1;
		/* Constants live below REF_BIAS (0x8000); other refs are computed values. */
		if (ref >= 0x8000 || !ref || tr_irconst(t, d, ref, &op, &v))
			continue;
		if (op == lo->ir_kgc) {
			kgc[s] = v & lo->gcvmask;
			isk[s] = 1;
		} else if (op == lo->ir_knum || op == lo->ir_kint64) {
			knum[s] = v;
			isk[s] = 2;
		}
	}
	if (isk[0] == 1) {
		struct nupp_smp_frame f0;

		if (tr_func(t, d, kgc[0], &f0) == 0 && f0.kind == NUPP_SMP_LUA)
			sn->startpt = f0.ptr;
	}
	for (s = 2; s <= top; s++) {
		struct tr_frame *fr;

		if (!isframe[s])
			continue;
		/* A vararg body's frame: its function is the frame's below (see above). */
		if (isk[s] == 2 && (knum[s] & lo->frame_typep) == lo->frame_varg)
			continue;
		/* A frame whose function is not a constant and not guarded to a prototype or a
		 * builtin (a polymorphic call site), or whose link is not known: not decoded,
		 * never guessed. */
		spec = isk[s - lo->fr2] == 1 ? NULL : tr_spec_of(d, ref_of[s - lo->fr2]);
		sn->why = isk[s - lo->fr2] != 1 && !spec ? TR_REF_POLY : isk[s] != 2 ? TR_REF_LINK
			: sn->nfr >= TR_MAX_INL ? TR_REF_DEPTH : TR_REF_NONE;
		if (sn->why != TR_REF_NONE)
			return;
		fr = &sn->fr[sn->nfr++];
		sn->why = TR_REF_FUNC;
		if (spec ? tr_spec_func(t, d, spec, &fr->f) : tr_func(t, d, kgc[s - lo->fr2], &fr->f))
			return;
		fr->link = knum[s];
		/* A continuation (a stitched call, a metamethod's): the PC it returns to lies
		 * two slots below the link, a constant marked SNAP_CONT (lj_frame.h
		 * frame_contpc, lj_ffrecord.c recff_stitch). */
		fr->ret_pc = 0;
		if ((fr->link & lo->frame_type) == lo->frame_lua)
			fr->ret_pc = fr->link;
		else if ((fr->link & lo->frame_typep) == lo->frame_cont && s >= 2 && iscont[s - 2] && isk[s - 2] == 2)
			fr->ret_pc = knum[s - 2];
	}
	sn->ok = 1;
	sn->why = TR_REF_NONE;
}


/* -- Bytecode of prototypes ------------------------------------------------------ */

/* The bytecode and line info of one prototype of the target. */
struct tr_bc {
	__u64 pt;   /* GCproto*, 0: nothing loaded */
	__u32 n;    /* sizebc */
	const BCIns *ins;
	__s32 firstline, numline;
	const unsigned char *lineinfo; /* in the copy, or NULL: read per line */
	__u64 lineinfo_addr;
};

/* Largest prototype allocation copied for its bytecode. */
#define TR_MAX_PT (8u << 20)

/* Bytes of the line table of a prototype of n instructions spanning numline lines
 * (lj_debug_line: one entry per instruction after the first, 1, 2 or 4 bytes wide). */
static __u64 tr_lineinfo_size(__s32 numline, __u32 n)
{
	return (__u64)(n ? n - 1 : 0) * (numline < 256 ? 1 : numline < 65536 ? 2 : 4);
}

/* Loads prototype pt's bytecode into b from its fact (its allocation is read once, the
 * first time a snapshot of a live trace needs it); 0 or -errno. */
static int tr_bc_load(struct nupp_traces *t, struct tr_dec *d, __u64 pt, struct tr_bc *b)
{
	const struct nupp_lj_layout *lo = &t->lo;
	struct tr_fact *x;
	__u32 n;
	int err = 0;

	if (b->pt == pt)
		return 0;
	b->pt = 0;
	x = tr_fact_get(t, d, pt, 1, &err);
	if (!x)
		return err;
	n = x->f.sizebc;
	if (n < 1 || n > TR_MAX_BC || x->sizept < lo->pt_size + (__u64)n * sizeof(BCIns) || x->sizept > TR_MAX_PT)
		return -EINVAL;
	if (!x->mem && t->sym) {
		/* The symbolizer's copy of the incarnation the trace was made with (its
		 * prototypes live as long as it does): read once, shared with the naming of
		 * frames, and kept after the prototype dies (its free event's copy). */
		const unsigned char *sm = NULL;
		__u32 ssize = 0;
		unsigned char *m;

		err = nupp_sym_proto_mem(t->sym, &x->f, d->e->born, &sm, &ssize);
		if (err)
			return err;
		if (ssize < lo->pt_size + (__u64)n * sizeof(BCIns) || ssize > x->sizept)
			return -ENODATA; /* a cut copy without the bytecode */
		m = calloc(1, x->sizept);
		if (!m)
			return -ENOMEM;
		memcpy(m, sm, ssize);
		x->numline = (__s32)tr_get(m, lo->pt_numline, 4);
		x->lineinfo = tr_get(m, lo->pt_lineinfo, 8);
		/* Lines only from the copy (the prototype may be gone): a line table outside
		 * it, or beyond a cut copy, is not known (tr_bc_line: -1). */
		if (x->lineinfo < pt || x->lineinfo - pt + tr_lineinfo_size(x->numline, n) > ssize)
			x->lineinfo = 0;
		x->mem = m;
	}
	if (!x->mem) {
		unsigned char *m = malloc(x->sizept);

		if (!m)
			return -ENOMEM;
		err = t->read(t->read_ctx, pt, m, x->sizept);
		/* The fingerprint must match the memory now: another prototype at the address
		 * (the first died) is refused. */
		if (!err && (tr_get(m, lo->pt_chunkname, 8) != x->f.chunkname ||
			     (__s32)tr_get(m, lo->pt_firstline, 4) != x->f.firstline ||
			     (__u32)tr_get(m, lo->pt_sizebc, 4) != x->f.sizebc ||
			     (__u32)tr_get(m, lo->pt_sizept, 4) != x->sizept))
			err = -ESTALE;
		if (err) {
			free(m);
			return err;
		}
		x->numline = (__s32)tr_get(m, lo->pt_numline, 4);
		x->lineinfo = tr_get(m, lo->pt_lineinfo, 8);
		x->mem = m;
	}
	b->n = n;
	b->ins = (const BCIns *)(x->mem + lo->pt_size);
	b->firstline = x->f.firstline;
	b->numline = x->numline;
	b->lineinfo_addr = x->lineinfo;
	b->lineinfo = NULL;
	/* The line table normally lies inside the allocation (lj_parse.c fs_finish). */
	if (x->lineinfo >= pt && x->lineinfo - pt < x->sizept &&
	    (x->lineinfo - pt) + tr_lineinfo_size(x->numline, n) <= x->sizept)
		b->lineinfo = x->mem + (x->lineinfo - pt);
	b->pt = pt;
	return 0;
}

/* Line of the bytecode at pos (lj_debug_line), or -1 if it cannot be read. */
static __s32 tr_bc_line(struct nupp_traces *t, const struct tr_bc *b, __u32 pos)
{
	int w = b->numline < 256 ? 1 : b->numline < 65536 ? 2 : 4;
	__u32 v = 0;

	if (pos == 0)
		return b->firstline;
	if (!b->lineinfo_addr || pos >= b->n)
		return -1;
	if (b->lineinfo)
		memcpy(&v, b->lineinfo + (size_t)(pos - 1) * w, w);
	else if (t->read(t->read_ctx, b->lineinfo_addr + (__u64)(pos - 1) * w, &v, w))
		return -1;
	return b->firstline + (__s32)v;
}


/* -- The PC a snapshot's code executes ------------------------------------------- */

/* A control instruction a resume PC may belong to: id names the instruction (a loop by
 * its FORL), pos is the bytecode reported for it. */
struct tr_cand {
	__u32 id, pos;
};

/* Is op a comparison that records a guard with rec_comp_prep (lj_record.c)? */
_Static_assert(BC_ISLT == 0, "the comparisons ISLT .. ISNEP come first in lj_bc.h");
static int tr_is_comp(BCOp op)
{
	return op <= BC_ISNEP;
}

/* Jump target of the jump instruction at pos. */
static __s64 tr_target(const struct tr_bc *b, __u32 pos)
{
	return (__s64)pos + 1 + bc_j(b->ins[pos]);
}

/* The control instructions whose guard snapshot may resume at pos, because the snapshot
 * was taken with the PC of the branch not taken (lj_record.c):
 *  - a FORI/FORL (rec_for) resumes at the loop body (pos - 1 is the FORI) or after the
 *    loop (pos - 1 is the FORL): reported at that FORI/FORL, the for line;
 *  - a comparison ISxx + JMP at q (rec_comp_fixup) resumes at q + 2 or at the JMP's
 *    target: reported at the comparison.
 * Returns the number of candidates, or -1 if there are too many. */
static int tr_ctrl(const struct tr_bc *b, __u32 pos, struct tr_cand *c)
{
	int n = 0;
	__u32 q;

	if (pos >= 1) {
		BCOp op = bc_op(b->ins[pos - 1]);
		__s64 forl;

		/* FORI and JFORI jump past their FORL; JFORL's D is a trace number. */
		if (op == BC_FORI || op == BC_JFORI) {
			forl = tr_target(b, pos - 1) - 1;
			if (forl > pos - 1 && forl < b->n)
				c[n++] = (struct tr_cand){ (__u32)forl, pos - 1 };
		} else if (op == BC_FORL || op == BC_IFORL || op == BC_JFORL) {
			c[n++] = (struct tr_cand){ pos - 1, pos - 1 };
		}
	}
	if (pos >= 2 && bc_op(b->ins[pos - 1]) == BC_JMP && tr_is_comp(bc_op(b->ins[pos - 2])))
		c[n++] = (struct tr_cand){ pos - 2, pos - 2 };
	for (q = 0; q + 1 < b->n; q++)
		if (tr_is_comp(bc_op(b->ins[q])) && bc_op(b->ins[q + 1]) == BC_JMP && tr_target(b, q + 1) == pos &&
		    q + 2 != pos) {
			if (n == TR_MAX_CAND)
				return -1;
			c[n++] = (struct tr_cand){ q, q };
		}
	return n;
}

/* Innermost frame's prototype of a decoded snapshot, or 0. */
static __u64 tr_snap_proto(const struct tr_entry *e, const struct tr_snap *sn)
{
	if (!sn->nfr)
		return sn->ret_below ? sn->retpt : e->startpt;
	return sn->fr[sn->nfr - 1].f.kind == NUPP_SMP_LUA ? sn->fr[sn->nfr - 1].f.ptr : 0;
}

/* Is the first IR instruction of snapshot sn's code a comparison guard? */
_Static_assert(IR_LT == 0, "the comparisons LT .. NE come first in lj_ir.h");
static int tr_snap_comp(struct nupp_traces *t, const struct tr_dec *d, const struct tr_snap *sn)
{
	if (sn->ref < d->nk || sn->ref >= d->nins)
		return 0;
	return tr_ir(t, d, sn->ref)[t->lo.ir_o] <= IR_NE;
}

/* The snapshot's PC is where the interpreter resumes if a guard of its code fails. That
 * is the bytecode being executed, except for the snapshots a control instruction takes
 * just before emitting its guard, with the PC of the branch not taken: the code that
 * follows (the guard first) executes the control instruction, not that PC.
 *  1. Proven without opcodes: a root trace that starts at a FORL (T->startins, the
 *     original instruction at T->startpc) never records the instruction after its own
 *     loop in the start frame (leaving the loop aborts the recording, LJ_TRERR_LLEAVE),
 *     so a start-frame snapshot (depth 0) at startpc + 1 is that FORL's exit guard.
 *  2. Otherwise, when the snapshot's code starts with a comparison guard (rec_comp_prep
 *     and rec_for take the snapshot right before it), the resume PC names the control
 *     instructions it may belong to (tr_ctrl), unless the snapshot just before, in the
 *     same frame, holds only the guard of the same instruction (loop) and resumes at the
 *     other branch: then this one is the snapshot taken at the start of the branch the
 *     trace follows (needsnap after the guard), and its PC is executed. Candidates on one
 *     line give that line; on different lines they cannot be told apart: the snapshot is
 *     not decoded (its samples are lost as 'symbolize').
 * Returns 0 or -errno (the snapshot's fields are left as they were). */
static int tr_exec_pc(struct nupp_traces *t, struct tr_dec *d, struct tr_bc *b, __u32 i)
{
	const struct nupp_lj_layout *lo = &t->lo;
	struct tr_entry *e = d->e;
	struct tr_snap *sn = &e->snaps[i], *pv = i ? &e->snaps[i - 1] : NULL;
	struct tr_cand c[TR_MAX_CAND], pc[TR_MAX_CAND];
	__u64 pt = tr_snap_proto(e, sn), bc, startpc = tr_get(d->hdr, lo->T_startpc, 8);
	__u32 startins = (__u32)tr_get(d->hdr, lo->T_startins, 4);
	__s32 line = -1, l;
	int n, np = 0, j, k, err;

	sn->resume = sn->pc;
	if (!sn->ok)
		return 0;
	if (!e->root && (startins & ((1u << lo->bc_a_shift) - 1)) == lo->bc_forl && sn->depth == 0 && startpc &&
	    sn->pc == startpc + lo->bcins_size) {
		sn->pc = startpc;
		return 0;
	}
	if (!t->ops_ok || !pt || !tr_snap_comp(t, d, sn))
		return 0;
	err = tr_bc_load(t, d, pt, b);
	if (err)
		return err;
	bc = pt + lo->pt_size;
	if (sn->pc < bc || sn->pc >= bc + (__u64)b->n * sizeof(BCIns) || (sn->pc - bc) % sizeof(BCIns))
		return 0; /* not in the frame: nupp_traces_expand refuses it */
	n = tr_ctrl(b, (__u32)((sn->pc - bc) / sizeof(BCIns)), c);
	if (n == 0)
		return 0;
	if (n > 0 && pv && pv->ok && pv->ref + 1 == sn->ref && pv->depth == sn->depth && tr_snap_proto(e, pv) == pt &&
	    pv->resume != sn->pc && pv->resume >= bc && pv->resume < bc + (__u64)b->n * sizeof(BCIns) &&
	    tr_snap_comp(t, d, pv))
		np = tr_ctrl(b, (__u32)((pv->resume - bc) / sizeof(BCIns)), pc);
	for (j = 0; j < n; j++)
		for (k = 0; k < np; k++)
			if (c[j].id == pc[k].id)
				return 0; /* the branch the trace follows: its PC is executed */
	for (j = 0; j < n; j++) {
		l = tr_bc_line(t, b, c[j].pos);
		if (l < 0 || (j && l != line)) {
			n = -1;
			break;
		}
		line = l;
	}
	if (n < 0) {
		sn->ok = 0; /* which instruction runs here is not known */
		sn->why = TR_REF_BRANCH;
		return 0;
	}
	sn->pc = bc + (__u64)c[0].pos * sizeof(BCIns);
	return 0;
}


/* -- A whole trace --------------------------------------------------------------- */

/* Notes the guard at ref if it specialises a call: EQ(FLOAD(fn, FUNC_PC), KPTR) or
 * EQ(FLOAD(fn, FUNC_FFID), KINT) (lj_record.c rec_call_specialize). */
static void tr_spec_note(struct nupp_traces *t, struct tr_dec *d, const unsigned char *ins)
{
	const struct nupp_lj_layout *lo = &t->lo;
	const unsigned char *ld;
	__u16 op1, op2, fn, fld;
	__s32 k;
	__u8 kop;
	__u64 v;

	memcpy(&op1, ins, 2);
	memcpy(&op2, ins + 2, 2);
	if (op1 < REF_BIAS || op1 < d->nk || op1 >= d->nins || op2 >= REF_BIAS)
		return;
	ld = tr_ir(t, d, op1);
	memcpy(&fn, ld, 2);
	memcpy(&fld, ld + 2, 2);
	if (ld[lo->ir_o] != IR_FLOAD || fn < REF_BIAS || (fld != IRFL_FUNC_PC && fld != IRFL_FUNC_FFID))
		return;
	if (fld == IRFL_FUNC_PC) {
		if (tr_irconst(t, d, op2, &kop, &v) || kop != IR_KPTR)
			return;
	} else {
		if (op2 < d->nk || tr_ir(t, d, op2)[lo->ir_o] != IR_KINT)
			return;
		memcpy(&k, tr_ir(t, d, op2), 4); /* IRIns.i overlaps op1 and op2 */
		v = (__u64)k;
	}
	if (d->nspec == TR_MAX_SPEC) {
		d->spec_many = true;
		return;
	}
	d->spec[d->nspec].fn = fn;
	d->spec[d->nspec].ff = fld == IRFL_FUNC_FFID;
	d->spec[d->nspec++].v = v;
}

/* Finds the trace's IR_RETFs (returns below the start frame, lj_record.c lj_record_ret),
 * its IR_LOOP and the guards that specialise its calls; only with LuaJIT's own opcodes
 * (ops_ok). */
static void tr_ir_scan(struct nupp_traces *t, struct tr_dec *d)
{
	const struct nupp_lj_layout *lo = &t->lo;
	__u32 ref;

	d->nretf = 0;
	d->loopref = 0;
	d->retf_loop = false;
	d->retf_many = false;
	d->nspec = 0;
	d->spec_many = false;
	if (!t->ops_ok)
		return;
	for (ref = REF_BIAS + 1; ref < d->nins; ref++) {
		const unsigned char *ins;
		struct tr_retf *r;
		__u16 op1, op2;
		__u8 kop;
		__u64 v;

		if (ref < d->nk)
			continue;
		ins = tr_ir(t, d, ref);
		if (ins[lo->ir_o] == IR_EQ) {
			tr_spec_note(t, d, ins);
		} else if (ins[lo->ir_o] == IR_LOOP && !d->loopref) {
			d->loopref = ref;
		} else if (ins[lo->ir_o] == IR_RETF) {
			if (d->loopref)
				d->retf_loop = true;
			if (d->nretf == TR_MAX_RETF) {
				d->retf_many = true;
				continue;
			}
			/* IRIns.op1, op2: the returned-into prototype's and the return PC's
			 * constants. */
			r = &d->retf[d->nretf++];
			memcpy(&op1, ins, 2);
			memcpy(&op2, ins + 2, 2);
			r->ref = ref;
			r->pt = 0;
			r->pc = 0;
			if (op1 < REF_BIAS && !tr_irconst(t, d, op1, &kop, &v) && kop == lo->ir_kgc)
				r->pt = v & lo->gcvmask;
			if (op2 < REF_BIAS && !tr_irconst(t, d, op2, &kop, &v) && kop == IR_KPTR)
				r->pc = v;
		}
	}
}

/* Whether the trace returned below its start frame before snapshot sn's code, and the
 * prototype the last return went into (sn->retpt, 0 when not known: in a loop that
 * returns, each pass returns again, and which pass a sample is in is not known). */
static void tr_snap_retf(const struct tr_dec *d, struct tr_snap *sn)
{
	__u32 i;

	sn->ret_below = false;
	sn->retpt = 0;
	sn->retin_pt = 0;
	sn->retin_pc = 0;
	if (!d->nretf)
		return;
	for (i = 0; i < d->nretf && d->retf[i].ref < sn->ref; i++)
		;
	/* The IR_RETF at the start of its code (lj_record.c takes the snapshot just
	 * before it): the code after it runs in the lower frame. */
	if (i < d->nretf && d->retf[i].ref == sn->ref && d->retf[i].pt && d->retf[i].pc) {
		sn->retin_pt = d->retf[i].pt;
		sn->retin_pc = d->retf[i].pc;
	}
	if (d->retf_loop && sn->ref > d->loopref) {
		sn->ret_below = true;
		return;
	}
	sn->ret_below = i > 0;
	if (i && !d->retf_many)
		sn->retpt = d->retf[i - 1].pt;
}

/* Decodes entry e from d (header, IR, snapshots and map copied): its snapshots' PCs and
 * frames. 0 or -errno. */
int tr_decode(struct nupp_traces *t, struct tr_dec *d)
{
	const struct nupp_lj_layout *lo = &t->lo;
	struct tr_entry *e = d->e;
	struct tr_bc bcv = { 0 };
	struct tr_frame scratch[TR_MAX_INL];
	size_t nfrs = 0, cap = 0, *at;
	__u32 i;

	tr_ir_scan(t, d);
	e->mcofs = malloc((e->nsnap + 1) * sizeof(*e->mcofs));
	e->snaps = malloc((e->nsnap + 1) * sizeof(*e->snaps));
	at = malloc((e->nsnap + 1) * sizeof(*at));
	if (!e->mcofs || !e->snaps || !at) {
		free(at);
		return -ENOMEM;
	}
	for (i = 0; i < e->nsnap; i++) {
		const unsigned char *sp = d->snaps + (size_t)i * lo->snap_size;
		struct tr_snap *sn = &e->snaps[i];

		e->mcofs[i] = (__u16)tr_get(sp, lo->snap_mcofs, 2);
		memset(sn, 0, sizeof(*sn));
		sn->fr = scratch;
		tr_decode_snap(t, d, (__u32)tr_get(sp, lo->snap_mapofs, 4), (__u32)tr_get(sp, lo->snap_nent, 1), sn);
		sn->ref = (__u32)tr_get(sp, lo->snap_ref, 2);
		tr_snap_retf(d, sn);
		/* Its frames go to the trace's array (placed once the array is whole). */
		if (nfrs + sn->nfr > cap) {
			struct tr_frame *nf;

			cap = cap ? 2 * cap : 16;
			while (cap < nfrs + sn->nfr)
				cap *= 2;
			nf = realloc(e->frs, cap * sizeof(*nf));
			if (!nf) {
				free(at);
				return -ENOMEM;
			}
			e->frs = nf;
		}
		if (sn->nfr)
			memcpy(e->frs + nfrs, scratch, sn->nfr * sizeof(*scratch));
		at[i] = nfrs;
		nfrs += sn->nfr;
	}
	for (i = 0; i < e->nsnap; i++)
		e->snaps[i].fr = e->frs ? e->frs + at[i] : NULL;
	free(at);
	for (i = 0; i < e->nsnap; i++)
		if (tr_exec_pc(t, d, &bcv, i)) {
			e->snaps[i].ok = 0; /* its bytecode could not be read: not decoded */
			e->snaps[i].why = TR_REF_BC;
		}
	return 0;
}

/* The name of a refusal in the log. */
const char *tr_refusal_name(int why)
{
	static const char *const names[TR_REF__MAX] = {
#define TR_REFUSAL_NAME(id, text) [TR_REF_##id] = text,
		TR_REFUSALDEF(TR_REFUSAL_NAME)
#undef TR_REFUSAL_NAME
	};

	return why >= 0 && why < TR_REF__MAX ? names[why] : "?";
}

/* A refusal as a cause of lost samples. */
const char *tr_refusal_cause(int why)
{
	static const char *const causes[TR_REF__MAX] = {
#define TR_REFUSAL_CAUSE(id, text) [TR_REF_##id] = "trace snapshot not decoded: " text,
		TR_REFUSALDEF(TR_REFUSAL_CAUSE)
#undef TR_REFUSAL_CAUSE
	};

	return why >= 0 && why < TR_REF__MAX ? causes[why] : "trace snapshot not decoded";
}

/* Frees what a decode kept for itself. */
void tr_dec_done(struct tr_dec *d)
{
	free(d->buf);
	while (d->priv) {
		struct tr_fact *x = d->priv;

		d->priv = x->next;
		tr_fact_free(x);
	}
}
