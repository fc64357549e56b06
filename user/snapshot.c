/* Trace samples to source positions: the snapshot that covers a machine-code offset
 * gives the leaf PC and the frames inlined into the trace (luajit-internals.md §5.3).
 * The code of snapshot k is what was recorded from k up to snapshot k+1 (mcofs, assembled
 * backwards, marks where the code of its first IR instruction starts); the leaf is the
 * bytecode that code starts executing: the snapshot's PC itself (not PC - 1), or for a
 * control instruction's guard snapshot, which resumes at the other branch, that
 * instruction (tr_exec_pc). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nupp_internal.h"
#include "sampler_internal.h"

/* LuaJIT's own headers (build/luajit/src) for the bytecode and IR opcodes; used only if
 * they agree with the layout the target VM exports (nupp_traces.ops_ok). */
#include "lj_obj.h"
#include "lj_bc.h"
#include "lj_ir.h"

#define TR_BUCKETS 1024
#define TR_MAX_SNAP 4096
#define TR_MAX_SNAPMAP (1u << 20)
#define TR_MAX_INL 16 /* inlined frames kept per snapshot */
#define TR_MAX_BC (1u << 20) /* instructions of a prototype we read */
#define TR_MAX_CAND 8        /* control instructions a resume PC may belong to */

/* One inlined frame of a snapshot, innermost last. */
struct tr_frame {
	struct nupp_smp_frame f; /* kind, ptr and fingerprint; pos/link filled per frame */
	__u64 link;              /* link value of the frame (return PC or typed delta) */
};

/* A decoded snapshot: the PC of the bytecode its code executes and the inlined frames
 * (slot > 0) above the start frame. */
struct tr_snap {
	__u64 pc;                /* see tr_exec_pc: not always the snapshot's resume PC */
	__u64 resume;            /* the snapshot's PC: where the interpreter resumes */
	__u32 ref;               /* first IR instruction of the snapshot's code */
	__u8 depth;              /* baseslot - 2 of the innermost frame (0: the start frame) */
	__u64 startpt;           /* GCproto* of slot 0's function if it is a constant, else 0 */
	int ok;                  /* every inlined function was a constant we could read */
	int nfr;
	struct tr_frame fr[TR_MAX_INL];
};

#define TR_ALIVE (~0ull)

/* One decoded trace. */
struct tr_entry {
	struct tr_entry *next;
	__u64 T, mcode;
	__u32 traceno, nsnap;
	/* The prototype generations [lo, hi) whose samples saw this trace (hi = TR_ALIVE
	 * until its free): a later trace at the same address, number and machine code
	 * (after a flush) is another entry. */
	__u64 lo, hi;
	__u64 startpt;
	__u16 *mcofs;
	struct tr_snap *snaps;
};

struct nupp_traces {
	struct nupp_lj_layout lo;
	int ops_ok; /* our LuaJIT headers number bytecodes and IR as the target does */
	nupp_read_fn read;
	void *read_ctx;
	struct tr_entry *b[TR_BUCKETS];
};

/* Index of the snapshot whose code holds mcode offset ofs (lj_trace.c:1040-1045). */
int nupp_snap_search(const __u16 *mcofs, __u32 nsnap, __u32 ofs)
{
	__u32 lo = 0, hi = nsnap;

	if (!nsnap)
		return -1;
	do {
		__u32 mid = (lo + hi) >> 1;

		if (ofs < mcofs[mid])
			hi = mid;
		else
			lo = mid + 1;
	} while (lo < hi);
	return (int)hi - 1;
}

/* A cache of decoded traces of one process. */
struct nupp_traces *nupp_traces_new(const struct nupp_lj_layout *lo, nupp_read_fn read, void *read_ctx)
{
	struct nupp_traces *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->lo = *lo;
	t->ops_ok = lo->nbc == BC__MAX && lo->bc_forl == BC_FORL && lo->bc_iforl == BC_IFORL &&
		    lo->bc_iterl == BC_ITERL && lo->bc_loop == BC_LOOP && lo->bc_jloop == BC_JLOOP &&
		    lo->bc_funcf == BC_FUNCF && lo->bc_itern == BC_ITERN && lo->bcins_size == sizeof(BCIns) &&
		    lo->ir_kgc == IR_KGC && lo->ir_knum == IR_KNUM && lo->ir_kint64 == IR_KINT64;
	t->read = read;
	t->read_ctx = read_ctx;
	return t;
}

/* Frees one entry. */
static void tr_entry_free(struct tr_entry *e)
{
	free(e->mcofs);
	free(e->snaps);
	free(e);
}

/* Frees the cache. */
void nupp_traces_free(struct nupp_traces *t)
{
	int i;

	if (!t)
		return;
	for (i = 0; i < TR_BUCKETS; i++)
		while (t->b[i]) {
			struct tr_entry *e = t->b[i];

			t->b[i] = e->next;
			tr_entry_free(e);
		}
	free(t);
}

/* Bucket of a GCtrace*. */
static unsigned tr_bucket(__u64 T)
{
	return (unsigned)((T >> 3) * 0x9e3779b97f4a7c15ull >> 54) & (TR_BUCKETS - 1);
}

/* Reads a field of width w (1, 2, 4, 8) at offset ofs of a copied struct. */
static __u64 tr_get(const unsigned char *mem, __u32 ofs, int w)
{
	__u64 v = 0;

	memcpy(&v, mem + ofs, w); /* little endian */
	return v;
}

/* Reads the 64-bit payload of IR constant ref (ir_kgc/ir_knum use ir[ref+1], lj_ir.h:586-592)
 * and its opcode; 0 or -errno. */
static int tr_irconst(struct nupp_traces *t, __u64 ir, __u32 ref, __u8 *op, __u64 *val)
{
	const struct nupp_lj_layout *lo = &t->lo;
	int err = t->read(t->read_ctx, ir + (__u64)ref * lo->ir_size + lo->ir_o, op, 1);

	if (!err)
		err = t->read(t->read_ctx, ir + (__u64)(ref + 1) * lo->ir_size, val, 8);
	return err;
}

/* Fills a frame's identity from a GCfunc of the target (kind, proto and fingerprint). */
static int tr_func(struct nupp_traces *t, __u64 fn, struct nupp_smp_frame *f)
{
	const struct nupp_lj_layout *lo = &t->lo;
	__u8 gct = 0, ffid = 0;
	__u64 bc = 0, pt, v = 0;
	int err;

	memset(f, 0, sizeof(*f));
	f->pos = -1;
	err = t->read(t->read_ctx, fn + lo->fn_gct, &gct, 1);
	if (!err)
		err = t->read(t->read_ctx, fn + lo->fn_ffid, &ffid, 1);
	if (err)
		return err;
	if (gct != lo->gct_func)
		return -EINVAL;
	if (ffid == lo->ff_lua) {
		err = t->read(t->read_ctx, fn + lo->fn_pc, &bc, 8);
		if (err)
			return err;
		pt = bc - lo->pt_size;
		f->kind = NUPP_SMP_LUA;
		f->ptr = pt;
		err = t->read(t->read_ctx, pt + lo->pt_chunkname, &f->chunkname, 8);
		if (!err)
			err = t->read(t->read_ctx, pt + lo->pt_firstline, &f->firstline, 4);
		if (!err)
			err = t->read(t->read_ctx, pt + lo->pt_sizebc, &f->sizebc, 4);
		return err;
	}
	if (ffid == lo->ff_c) {
		err = t->read(t->read_ctx, fn + lo->fn_cf, &v, 8);
		f->kind = NUPP_SMP_C;
		f->ptr = v;
		return err;
	}
	f->kind = NUPP_SMP_FF;
	f->ptr = ffid;
	return 0;
}

/* Decodes one snapshot: its PC and the inlined frames. In FR2 the frame-link slot of a
 * frame carries SNAP_FRAME and holds the link as a KNUM constant; the function is the
 * slot below it, normally a KGC constant (lj_snap.c:64-80, 110-160). */
static void tr_decode_snap(struct nupp_traces *t, __u64 ir, const __u32 *map, __u32 nmap, __u32 mapofs,
			   __u32 nent, struct tr_snap *sn)
{
	const struct nupp_lj_layout *lo = &t->lo;
	__u64 kgc[256] = { 0 }, knum[256] = { 0 };
	__u8 isframe[256] = { 0 }, isk[256] = { 0 };
	__u32 i, s;

	sn->ok = 0;
	sn->nfr = 0;
	sn->startpt = 0;
	if ((__u64)mapofs + nent + 2 > nmap)
		return;
	/* FR2: the PC is the 64-bit word after the entries, shifted by 8 (lj_jit.h:222-230). */
	memcpy(&sn->pc, &map[mapofs + nent], 8);
	sn->depth = (__u8)sn->pc;
	sn->pc >>= 8;
	for (i = 0; i < nent; i++) {
		__u32 e = map[mapofs + i], ref = e & 0xffff;
		__u8 op = 0;
		__u64 v = 0;

		s = e >> 24;
		if (e & lo->snap_frame)
			isframe[s] = 1;
		/* Constants live below REF_BIAS (0x8000); other refs are computed values. */
		if (ref >= 0x8000 || !ref || tr_irconst(t, ir, ref, &op, &v))
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

		if (tr_func(t, kgc[0], &f0) == 0 && f0.kind == NUPP_SMP_LUA)
			sn->startpt = f0.ptr;
	}
	for (s = 2; s < 256; s++) {
		struct tr_frame *fr;

		if (!isframe[s])
			continue;
		/* A frame whose function is not a constant (a polymorphic call site) or whose
		 * link is not known: not decoded, never guessed. */
		if (isk[s - lo->fr2] != 1 || isk[s] != 2 || sn->nfr >= TR_MAX_INL)
			return;
		fr = &sn->fr[sn->nfr++];
		if (tr_func(t, kgc[s - lo->fr2], &fr->f))
			return;
		fr->link = knum[s];
	}
	sn->ok = 1;
}

/* The bytecode and line info of one prototype of the target. */
struct tr_bc {
	__u64 pt;   /* GCproto*, 0: nothing loaded */
	__u32 n;    /* sizebc */
	BCIns *ins;
	__s32 firstline, numline;
	__u64 lineinfo;
};

/* Loads prototype pt's bytecode into b (kept if it is already there); 0 or -errno. */
static int tr_bc_load(struct nupp_traces *t, __u64 pt, struct tr_bc *b)
{
	const struct nupp_lj_layout *lo = &t->lo;
	__u32 n = 0;
	int err;

	if (b->pt == pt)
		return 0;
	b->pt = 0;
	err = t->read(t->read_ctx, pt + lo->pt_sizebc, &n, 4);
	if (!err && (n < 1 || n > TR_MAX_BC))
		err = -EINVAL;
	if (err)
		return err;
	if (n > b->n || !b->ins) {
		BCIns *p = realloc(b->ins, (size_t)n * sizeof(BCIns));

		if (!p)
			return -ENOMEM;
		b->ins = p;
	}
	b->n = n;
	err = t->read(t->read_ctx, pt + lo->pt_size, b->ins, (size_t)n * sizeof(BCIns));
	if (!err)
		err = t->read(t->read_ctx, pt + lo->pt_firstline, &b->firstline, 4);
	if (!err)
		err = t->read(t->read_ctx, pt + lo->pt_numline, &b->numline, 4);
	if (!err)
		err = t->read(t->read_ctx, pt + lo->pt_lineinfo, &b->lineinfo, 8);
	if (!err)
		b->pt = pt;
	return err;
}

/* Line of the bytecode at pos (lj_debug_line), or -1 if it cannot be read. */
static __s32 tr_bc_line(struct nupp_traces *t, const struct tr_bc *b, __u32 pos)
{
	int w = b->numline < 256 ? 1 : b->numline < 65536 ? 2 : 4;
	__u32 v = 0;

	if (pos == 0)
		return b->firstline;
	if (!b->lineinfo || pos >= b->n || t->read(t->read_ctx, b->lineinfo + (__u64)(pos - 1) * w, &v, w))
		return -1;
	return b->firstline + (__s32)v;
}

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
		return e->startpt;
	return sn->fr[sn->nfr - 1].f.kind == NUPP_SMP_LUA ? sn->fr[sn->nfr - 1].f.ptr : 0;
}

/* Is the first IR instruction of snapshot sn's code a comparison guard? */
_Static_assert(IR_LT == 0, "the comparisons LT .. NE come first in lj_ir.h");
static int tr_snap_comp(struct nupp_traces *t, __u64 ir, __u32 nins, const struct tr_snap *sn)
{
	__u8 op = 0xff;

	if (sn->ref >= nins || t->read(t->read_ctx, ir + (__u64)sn->ref * t->lo.ir_size + t->lo.ir_o, &op, 1))
		return 0;
	return op <= IR_NE;
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
static int tr_exec_pc(struct nupp_traces *t, struct tr_entry *e, __u64 ir, __u32 nins, __u64 startpc,
		      __u32 startins, __u16 root, struct tr_bc *b, __u32 i)
{
	const struct nupp_lj_layout *lo = &t->lo;
	struct tr_snap *sn = &e->snaps[i], *pv = i ? &e->snaps[i - 1] : NULL;
	struct tr_cand c[TR_MAX_CAND], pc[TR_MAX_CAND];
	__u64 pt = tr_snap_proto(e, sn), bc;
	__s32 line = -1, l;
	int n, np = 0, j, k, err;

	sn->resume = sn->pc;
	if (!sn->ok)
		return 0;
	if (!root && (startins & ((1u << lo->bc_a_shift) - 1)) == lo->bc_forl && sn->depth == 0 && startpc &&
	    sn->pc == startpc + lo->bcins_size) {
		sn->pc = startpc;
		return 0;
	}
	if (!t->ops_ok || !pt || !tr_snap_comp(t, ir, nins, sn))
		return 0;
	err = tr_bc_load(t, pt, b);
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
	    tr_snap_comp(t, ir, nins, pv))
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
		return 0;
	}
	sn->pc = bc + (__u64)c[0].pos * sizeof(BCIns);
	return 0;
}

/* Decodes (and caches) trace T now, while it is alive. */
int nupp_traces_add(struct nupp_traces *t, __u64 T, __u32 traceno, __u64 born)
{
	const struct nupp_lj_layout *lo = &t->lo;
	unsigned char hdr[512];
	struct tr_entry *e;
	__u64 snap, snapmap, ir;
	__u32 nsnapmap, i, *map = NULL;
	unsigned char *snaps = NULL;
	struct tr_bc bcv = { 0 };
	unsigned b = tr_bucket(T);
	int err;

	if (lo->T_size > sizeof(hdr))
		return -EOVERFLOW;
	err = t->read(t->read_ctx, T, hdr, lo->T_size);
	if (err)
		return err;
	if (tr_get(hdr, lo->T_traceno, 2) != traceno)
		return -ESTALE;
	for (e = t->b[b]; e; e = e->next)
		if (e->T == T && e->traceno == traceno && e->mcode == tr_get(hdr, lo->T_mcode, 8) && e->hi == TR_ALIVE)
			return 0;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->T = T;
	e->traceno = traceno;
	e->mcode = tr_get(hdr, lo->T_mcode, 8);
	e->lo = born;
	e->hi = TR_ALIVE;
	e->nsnap = (__u32)tr_get(hdr, lo->T_nsnap, 2);
	e->startpt = tr_get(hdr, lo->T_startpt, 8);
	snap = tr_get(hdr, lo->T_snap, 8);
	snapmap = tr_get(hdr, lo->T_snapmap, 8);
	ir = tr_get(hdr, lo->T_ir, 8);
	nsnapmap = (__u32)tr_get(hdr, lo->T_nsnapmap, 4);
	err = -EINVAL;
	if (e->nsnap > TR_MAX_SNAP || nsnapmap > TR_MAX_SNAPMAP)
		goto fail;
	err = -ENOMEM;
	e->mcofs = calloc(e->nsnap + 1, sizeof(*e->mcofs));
	e->snaps = calloc(e->nsnap + 1, sizeof(*e->snaps));
	snaps = malloc((size_t)e->nsnap * lo->snap_size + 1);
	map = malloc((size_t)nsnapmap * 4 + 8);
	if (!e->mcofs || !e->snaps || !snaps || !map)
		goto fail;
	err = t->read(t->read_ctx, snap, snaps, (size_t)e->nsnap * lo->snap_size);
	if (!err && nsnapmap)
		err = t->read(t->read_ctx, snapmap, map, (size_t)nsnapmap * 4);
	if (err)
		goto fail;
	for (i = 0; i < e->nsnap; i++) {
		const unsigned char *sp = snaps + (size_t)i * lo->snap_size;

		e->mcofs[i] = (__u16)tr_get(sp, lo->snap_mcofs, 2);
		tr_decode_snap(t, ir, map, nsnapmap, (__u32)tr_get(sp, lo->snap_mapofs, 4),
			       (__u32)tr_get(sp, lo->snap_nent, 1), &e->snaps[i]);
		e->snaps[i].ref = (__u32)tr_get(sp, lo->snap_ref, 2);
	}
	for (i = 0; i < e->nsnap; i++)
		if (tr_exec_pc(t, e, ir, (__u32)tr_get(hdr, lo->T_nins, 4), tr_get(hdr, lo->T_startpc, 8),
			       (__u32)tr_get(hdr, lo->T_startins, 4), (__u16)tr_get(hdr, lo->T_root, 2), &bcv, i))
			e->snaps[i].ok = 0; /* its bytecode could not be read: not decoded */
	free(bcv.ins);
	free(snaps);
	free(map);
	e->next = t->b[b];
	t->b[b] = e;
	return 0;
fail:
	free(snaps);
	free(map);
	tr_entry_free(e);
	return err;
}

/* Marks T (or every trace if T == 0) as freed, ending generation gen. */
void nupp_traces_kill(struct nupp_traces *t, __u64 T, __u64 gen)
{
	int i;

	/* One trace: its bucket only (a target that compiles without pause frees
	 * thousands of traces between two drains). */
	for (i = T ? (int)tr_bucket(T) : 0; i < (T ? (int)tr_bucket(T) + 1 : TR_BUCKETS); i++)
		for (struct tr_entry *e = t->b[i]; e; e = e->next)
			if ((!T || e->T == T) && e->hi == TR_ALIVE)
				e->hi = gen > e->lo ? gen : e->lo;
}

/* Drops the entries freed at or before generation gen (no later sample saw them). */
void nupp_traces_purge(struct nupp_traces *t, __u64 gen)
{
	int i;

	for (i = 0; i < TR_BUCKETS; i++) {
		struct tr_entry **pp = &t->b[i];

		while (*pp) {
			struct tr_entry *e = *pp;

			if (e->hi != TR_ALIVE && e->hi <= gen) {
				*pp = e->next;
				tr_entry_free(e);
			} else {
				pp = &e->next;
			}
		}
	}
}

/* Finds the entry of a sample's trace, decoding it now if it is still alive. */
static struct tr_entry *tr_find(struct nupp_traces *t, const struct nupp_smp_stack *st)
{
	unsigned b = tr_bucket(st->trace);
	struct tr_entry *e;
	int pass;

	__u64 end = 0;

	for (pass = 0; pass < 2; pass++) {
		for (e = t->b[b]; e; e = e->next) {
			if (e->T != st->trace || e->traceno != st->traceno || e->mcode != st->mcode)
				continue;
			if (e->lo <= st->pgen && st->pgen < e->hi)
				return e;
			if (e->hi == TR_ALIVE)
				return NULL; /* alive since after the sample: the one it saw is gone */
			if (e->hi > end)
				end = e->hi;
		}
		/* Made before we looked: decoded now, if it lives, as the incarnation after
		 * every freed one of the same identity. */
		if (pass || st->pgen < end || nupp_traces_add(t, st->trace, st->traceno, end))
			return NULL;
	}
	return NULL;
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
	__u64 pc;

	if (n < 1 || n > max)
		return -EINVAL;
	memcpy(out, st->frames, sizeof(*out) * n);
	if (!(st->flags & NUPP_SMP_F_TRACE) || !(st->flags & NUPP_SMP_F_MCODE))
		return n; /* IP in a C helper or exit stub: the caller chain is exact, no leaf */
	e = tr_find(t, st);
	if (!e)
		return -ENOENT;
	si = nupp_snap_search(e->mcofs, e->nsnap, st->mcofs);
	if (si < 0)
		return n;
	sn = &e->snaps[si];
	if (!sn->ok)
		return -ENOENT;
	/* The snapshot's slot 0 must be the frame the sample found at jit_base. */
	if (sn->startpt && sn->startpt != st->frames[0].ptr)
		return -ESTALE;
	if (n + sn->nfr > max)
		return -E2BIG;
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
		if (i == 0 && f->pos < 0)
			return -ENOENT; /* the PC is not in the innermost frame: not decoded */
		if (i < sn->nfr) {
			const struct tr_frame *fr = &sn->fr[sn->nfr - 1 - i];

			pc = (fr->link & lo->frame_type) == lo->frame_lua ? fr->link : 0;
		}
	}
	return n + sn->nfr;
}
