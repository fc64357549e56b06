/* Trace samples to source positions: the snapshot that covers a machine-code offset
 * gives the leaf PC and the frames inlined into the trace (lj_trace.c lj_trace_unwind, lj_snap.c).
 * The code of snapshot k is what was recorded from k up to snapshot k+1 (mcofs, assembled
 * backwards, marks where the code of its first IR instruction starts); the leaf is the
 * bytecode that code starts executing: the snapshot's PC itself (not PC - 1), or for a
 * control instruction's guard snapshot, which resumes at the other branch, that
 * instruction (tr_exec_pc). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "nupp_internal.h"
#include "sampler_internal.h"

/* LuaJIT's own headers (build/luajit/src) for the bytecode and IR opcodes; used only if
 * they agree with the layout the target VM exports (nupp_traces.ops_ok). */
#include "lj_obj.h"
#include "lj_bc.h"
#include "lj_ir.h"

/* Traces of one process by address: a trace is copied by BPF at its first sample and
 * named by its address, number, machine code and serial (unique in the process); one no
 * sample named for TR_IDLE_US is dropped (a later sample of it reads it again). */
#define TR_BUCKET_BITS 14
#define TR_BUCKETS (1u << TR_BUCKET_BITS)
#define TR_MAX_SNAP 4096
#define TR_MAX_SNAPMAP (1u << 20)
#define TR_MAX_INL 16 /* inlined frames kept per snapshot */
#define TR_MAX_BC (1u << 20) /* instructions of a prototype we read */
#define TR_MAX_CAND 8        /* control instructions a resume PC may belong to */
#define TR_IDLE_US 30000000ull /* an entry no sample named for this long is dropped */

/* A fact of one decode, read once: a GCfunc's frame identity, or a GCproto's header and
 * (once a snapshot needs its bytecode) its whole allocation. It is true while the trace
 * lives: a trace's IR constants are GC roots of their functions (lj_gc.c
 * gc_traverse_trace), a Lua function keeps its prototype, and a trace its start
 * prototype. A decode from a BPF copy takes the functions' identities from the copy and
 * a prototype's allocation from the symbolizer's copy of that incarnation; a decode read
 * from the target checks that the trace still lived when it was done. */
struct tr_fact {
	struct tr_fact *next;
	__u64 addr;
	int is_proto;
	struct nupp_smp_frame f; /* GCfunc: kind, ptr, fingerprint; GCproto: ptr, fingerprint */
	/* GCproto only: */
	__s32 numline;
	__u32 sizept;
	__u64 lineinfo;
	unsigned char *mem; /* [addr, addr + sizept) or NULL: not read yet */
};

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
	/* Its nfr frames: in the trace's array of them (tr_entry.frs; most snapshots have
	 * none or a few, so none is kept in place), or while decoding a scratch array. */
	struct tr_frame *fr;
};

/* One decoded trace. */
struct tr_entry {
	struct tr_entry *next, **pnext; /* in its bucket (pnext: the pointer to it there) */
	struct tr_entry *lprev, *lnext; /* in the list of all entries */
	__u64 T, mcode;
	__u32 traceno, nsnap;
	__u32 serial; /* with T, traceno and mcode: this incarnation of the trace */
	/* The prototype generation of a sample taken while it lived: names the incarnations
	 * of its functions' prototypes (nupp_sym_proto_mem). */
	__u64 born;
	__u64 used_us; /* the drain clock (nupp_traces_purge) when a sample last named it */
	__u64 startpt;
	/* The prototype of the start frame's function (slot 0), proven without slot 0
	 * being a constant: a root trace starts in T->startpt's frame (lj_trace.c
	 * trace_start, lj_record.c lj_record_setup), a side trace in its root's. 0: not
	 * known (the root was not decoded). */
	__u64 start0;
	__u16 root;
	__u16 *mcofs;
	struct tr_snap *snaps;
	struct tr_frame *frs; /* the snapshots' frames, each snapshot's in a row */
	/* Not decoded yet (mcofs, snaps NULL): the copy BPF sent at its first sample,
	 * decoded when the drain names that sample. */
	unsigned char *raw;
	__u32 rawsize, nfn;
	struct nupp_smp_trace_fn *fns;
	/* raw and fns live in blk, a pooled block of its own (the entry is small and
	 * separate: frees and purges of thousands a second touch only entries). */
	bool inline_raw;
	void *blk;
	__u8 pool;       /* size class + 1 of blk (tr_block_get), 0: malloc'ed */
	int failed; /* the decode failed: its samples cannot be named */
};

struct nupp_traces {
	struct nupp_lj_layout lo;
	int ops_ok; /* our LuaJIT headers number bytecodes and IR as the target does */
	nupp_read_fn read;
	void *read_ctx;
	struct tr_entry *b[TR_BUCKETS];
	struct tr_entry *all; /* every entry, the newest first */
	__u64 now_us;         /* the drain clock, as nupp_traces_purge last gave it */
	/* Entries are carved from chunks of TR_ECHUNK; free ones are listed (by lnext). */
	struct tr_entry *efree;
	struct tr_entry **echunks;
	size_t nechunks;
	struct nupp_sym *sym; /* prototypes' copies, or NULL (nupp_traces_set_sym) */
	/* Copy blocks freed, kept for the next copies (a target that compiles without pause
	 * has thousands of traces sampled a second): per power-of-two size class, up to
	 * TR_POOL_KEEP bytes of them (their addresses kept here: taking one does not touch
	 * its cold memory). */
	struct {
		void **free;
		__u32 n;
	} pool[6];
};

/* Entries per chunk of entries. */
#define TR_ECHUNK 256

/* Smallest size class of the pool of copies. */
#define TR_POOL_MIN 1024
/* Bytes of free blocks the pool keeps per size class. */
#define TR_POOL_KEEP (2u << 20)

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

/* -- Facts of GCfuncs and GCprotos, read once per decode ------------------------- */

/* Frees a fact. */
static void tr_fact_free(struct tr_fact *f)
{
	free(f->mem);
	free(f);
}

/* A block of at least size bytes, from the pool when one of its class is free; *pool gets
 * its class + 1 (0: larger than every class, malloc'ed). */
static void *tr_block_get(struct nupp_traces *t, size_t size, __u8 *pool)
{
	int c;

	for (c = 0; c < (int)NUPP_ARRAY_SIZE(t->pool); c++)
		if (size <= (size_t)TR_POOL_MIN << c) {
			*pool = (__u8)(c + 1);
			if (t->pool[c].n)
				return t->pool[c].free[--t->pool[c].n];
			return malloc((size_t)TR_POOL_MIN << c);
		}
	*pool = 0;
	return malloc(size);
}

/* Gives a block back to the pool (or frees it). */
static void tr_block_put(struct nupp_traces *t, void *b, __u8 pool)
{
	size_t keep = pool ? TR_POOL_KEEP / ((size_t)TR_POOL_MIN << (pool - 1)) : 0;

	if (pool && !t->pool[pool - 1].free)
		t->pool[pool - 1].free = malloc(keep * sizeof(void *));
	if (pool && t->pool[pool - 1].free && t->pool[pool - 1].n < keep)
		t->pool[pool - 1].free[t->pool[pool - 1].n++] = b;
	else
		free(b);
}

/* A zeroed entry: a free one, or one of a new chunk; NULL if out of memory. */
static struct tr_entry *tr_entry_alloc(struct nupp_traces *t)
{
	struct tr_entry *e;

	if (!t->efree) {
		struct tr_entry **nc = realloc(t->echunks, (t->nechunks + 1) * sizeof(*nc));
		struct tr_entry *c;
		int i;

		if (!nc)
			return NULL;
		t->echunks = nc;
		c = malloc(TR_ECHUNK * sizeof(*c));
		if (!c)
			return NULL;
		t->echunks[t->nechunks++] = c;
		for (i = TR_ECHUNK - 1; i >= 0; i--) {
			c[i].lnext = t->efree;
			t->efree = &c[i];
		}
	}
	e = t->efree;
	t->efree = e->lnext;
	memset(e, 0, sizeof(*e));
	return e;
}

/* Frees one entry. */
static void tr_entry_free(struct nupp_traces *t, struct tr_entry *e)
{
	free(e->mcofs);
	free(e->snaps);
	free(e->frs);
	if (!e->inline_raw) {
		free(e->raw);
		free(e->fns);
	}
	if (e->blk)
		tr_block_put(t, e->blk, e->pool);
	e->lnext = t->efree;
	t->efree = e;
}

/* Frees the cache. */
void nupp_traces_free(struct nupp_traces *t)
{
	int i;

	if (!t)
		return;
	for (i = 0; i < (int)TR_BUCKETS; i++)
		while (t->b[i]) {
			struct tr_entry *e = t->b[i];

			t->b[i] = e->next;
			tr_entry_free(t, e);
		}
	for (i = 0; i < (int)NUPP_ARRAY_SIZE(t->pool); i++) {
		while (t->pool[i].n)
			free(t->pool[i].free[--t->pool[i].n]);
		free(t->pool[i].free);
	}
	for (i = 0; i < (int)t->nechunks; i++)
		free(t->echunks[i]);
	free(t->echunks);
	free(t);
}

/* Bucket of a GCtrace*. */
static unsigned tr_bucket(__u64 T)
{
	return (unsigned)((T >> 3) * 0x9e3779b97f4a7c15ull >> (64 - TR_BUCKET_BITS)) & (TR_BUCKETS - 1);
}

/* Reads a field of width w (1, 2, 4, 8) at offset ofs of a copied struct. */
static __u64 tr_get(const unsigned char *mem, __u32 ofs, int w)
{
	__u64 v = 0;

	memcpy(&v, mem + ofs, w); /* little endian */
	return v;
}

/* One trace being decoded: its header, IR, snapshots and snapshot map copied from the
 * target, and the facts it takes. */
struct tr_dec {
	struct tr_entry *e;
	unsigned char hdr[512];
	__u32 nk, nins;          /* IR refs [nk, nins) are in irbuf */
	unsigned char *buf;      /* the copy */
	const unsigned char *irbuf; /* ir[nk] .. ir[nins - 1] */
	const unsigned char *snaps;
	const __u32 *map;
	__u32 nmap;
	struct tr_fact *priv;    /* the facts this decode read */
	/* From a BPF copy: the functions named while the trace was alive (nfn entries). */
	const struct nupp_smp_trace_fn *fns;
	__u32 nfn;
};

/* The opcode and 64-bit payload of IR constant ref (ir_kgc/ir_knum use ir[ref+1],
 * lj_ir.h:586-592), from the copy; 0 or -EINVAL. */
static int tr_irconst(struct nupp_traces *t, const struct tr_dec *d, __u32 ref, __u8 *op, __u64 *val)
{
	const struct nupp_lj_layout *lo = &t->lo;

	if (ref < d->nk || ref + 1 >= d->nins)
		return -EINVAL;
	*op = d->irbuf[(size_t)(ref - d->nk) * lo->ir_size + lo->ir_o];
	memcpy(val, d->irbuf + (size_t)(ref + 1 - d->nk) * lo->ir_size, 8);
	return 0;
}

/* Bytes of a GCfunc the frame identity needs (its header up to pc / the C function). */
static __u32 tr_fn_span(const struct nupp_lj_layout *lo)
{
	__u32 n = lo->fn_pc + 8;

	if (lo->fn_cf + 8 > n)
		n = lo->fn_cf + 8;
	if (lo->fn_gct + 1 > n)
		n = lo->fn_gct + 1;
	if (lo->fn_ffid + 1 > n)
		n = lo->fn_ffid + 1;
	return n;
}

/* Reads a fact from the target: a GCfunc's header (one read), or a GCproto's header
 * (one read; its allocation later, by tr_proto_mem). */
static int tr_fact_read(struct nupp_traces *t, struct tr_fact *x)
{
	const struct nupp_lj_layout *lo = &t->lo;
	unsigned char buf[256];
	__u32 n;
	int err;

	memset(&x->f, 0, sizeof(x->f));
	x->f.pos = -1;
	if (x->is_proto) {
		n = lo->pt_size;
		if (n > sizeof(buf))
			return -EOVERFLOW;
		err = t->read(t->read_ctx, x->addr, buf, n);
		if (err)
			return err;
		x->f.kind = NUPP_SMP_LUA;
		x->f.ptr = x->addr;
		x->f.chunkname = tr_get(buf, lo->pt_chunkname, 8);
		x->f.firstline = (__s32)tr_get(buf, lo->pt_firstline, 4);
		x->f.sizebc = (__u32)tr_get(buf, lo->pt_sizebc, 4);
		x->numline = (__s32)tr_get(buf, lo->pt_numline, 4);
		x->sizept = (__u32)tr_get(buf, lo->pt_sizept, 4);
		x->lineinfo = tr_get(buf, lo->pt_lineinfo, 8);
		return 0;
	}
	n = tr_fn_span(lo);
	if (n > sizeof(buf))
		return -EOVERFLOW;
	err = t->read(t->read_ctx, x->addr, buf, n);
	if (err)
		return err;
	if (tr_get(buf, lo->fn_gct, 1) != lo->gct_func)
		return -EINVAL;
	if (tr_get(buf, lo->fn_ffid, 1) == lo->ff_lua) {
		x->f.kind = NUPP_SMP_LUA;
		x->f.ptr = tr_get(buf, lo->fn_pc, 8) - lo->pt_size;
	} else if (tr_get(buf, lo->fn_ffid, 1) == lo->ff_c) {
		x->f.kind = NUPP_SMP_C;
		x->f.ptr = tr_get(buf, lo->fn_cf, 8);
	} else {
		x->f.kind = NUPP_SMP_FF;
		x->f.ptr = tr_get(buf, lo->fn_ffid, 1);
	}
	return 0;
}

/* The fact of a GCfunc or GCproto at addr for the trace being decoded, read from the
 * target once per decode (a prototype named by the BPF copy is taken as the copy named
 * it); NULL and *err. */
static struct tr_fact *tr_fact_get(struct nupp_traces *t, struct tr_dec *d, __u64 addr, int is_proto, int *err)
{
	const struct nupp_smp_trace_fn *want = NULL;
	struct tr_fact *x;
	__u32 i;

	/* From a BPF copy: a prototype's fingerprint as it was while the trace lived. */
	for (i = 0; d->fns && is_proto && i < d->nfn; i++)
		if (d->fns[i].kind == NUPP_SMP_LUA && d->fns[i].ptr == addr)
			want = &d->fns[i];
	if (d->fns && (!is_proto || !want)) {
		*err = -ENOENT;
		return NULL;
	}
	for (x = d->priv; x; x = x->next)
		if (x->addr == addr && x->is_proto == is_proto)
			break;
	if (!x) {
		x = calloc(1, sizeof(*x));
		if (!x) {
			*err = -ENOMEM;
			return NULL;
		}
		x->addr = addr;
		x->is_proto = is_proto;
		if (want) {
			x->f.kind = NUPP_SMP_LUA;
			x->f.ptr = addr;
			x->f.pos = -1;
			x->f.chunkname = want->chunkname;
			x->f.firstline = want->firstline;
			x->f.sizebc = want->sizebc;
			x->sizept = want->sizept;
			x->numline = -1; /* read with its allocation (tr_bc_load) */
			*err = 0;
		} else {
			*err = tr_fact_read(t, x);
		}
		if (*err) {
			tr_fact_free(x);
			return NULL;
		}
		x->next = d->priv;
		d->priv = x;
	}
	*err = 0;
	return x;
}

/* Fills a frame's identity from a GCfunc of the target (kind, proto and fingerprint):
 * the function's fact and, for a Lua function, its prototype's. */
static int tr_func(struct nupp_traces *t, struct tr_dec *d, __u64 fn, struct nupp_smp_frame *f)
{
	struct tr_fact *x, *p;
	int err = 0;
	__u32 i;

	if (d->fns) {
		/* Named by BPF while the trace was alive; its memory may hold anything now. */
		for (i = 0; i < d->nfn; i++)
			if (d->fns[i].fn == fn && d->fns[i].kind) {
				memset(f, 0, sizeof(*f));
				f->pos = -1;
				f->kind = d->fns[i].kind;
				f->ptr = d->fns[i].ptr;
				if (f->kind == NUPP_SMP_LUA) {
					f->chunkname = d->fns[i].chunkname;
					f->firstline = d->fns[i].firstline;
					f->sizebc = d->fns[i].sizebc;
				}
				return 0;
			}
		return -ENOENT;
	}
	x = tr_fact_get(t, d, fn, 0, &err);
	if (!x)
		return err;
	*f = x->f;
	if (f->kind != NUPP_SMP_LUA)
		return 0;
	p = tr_fact_get(t, d, f->ptr, 1, &err);
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
	__u64 kgc[256], knum[256];
	__u8 isframe[256], isk[256];
	__u32 i, s, top = 1;

	sn->ok = 0;
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
	for (i = 0; i < nent; i++) {
		__u32 e = map[mapofs + i], ref = e & 0xffff;
		__u8 op = 0;
		__u64 v = 0;

		s = e >> 24;
		if (e & lo->snap_frame)
			isframe[s] = 1;
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
		/* A frame whose function is not a constant (a polymorphic call site) or whose
		 * link is not known: not decoded, never guessed. */
		if (isk[s - lo->fr2] != 1 || isk[s] != 2 || sn->nfr >= TR_MAX_INL)
			return;
		fr = &sn->fr[sn->nfr++];
		if (tr_func(t, d, kgc[s - lo->fr2], &fr->f))
			return;
		fr->link = knum[s];
	}
	sn->ok = 1;
}

/* The bytecode and line info of one prototype of the target. */
struct tr_bc {
	__u64 pt;   /* GCproto*, 0: nothing loaded */
	__u32 n;    /* sizebc */
	const BCIns *ins;
	__s32 firstline, numline;
	const unsigned char *lineinfo; /* in the copy, or NULL: read per line */
	__u64 lineinfo_addr;
};

/* Where the decoder finds prototypes' bytecode (see sampler_internal.h). */
void nupp_traces_set_sym(struct nupp_traces *t, struct nupp_sym *sym)
{
	t->sym = sym;
}

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
static int tr_snap_comp(struct nupp_traces *t, const struct tr_dec *d, const struct tr_snap *sn)
{
	if (sn->ref < d->nk || sn->ref >= d->nins)
		return 0;
	return d->irbuf[(size_t)(sn->ref - d->nk) * t->lo.ir_size + t->lo.ir_o] <= IR_NE;
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
		return 0;
	}
	sn->pc = bc + (__u64)c[0].pos * sizeof(BCIns);
	return 0;
}

/* Largest span of a trace's IR, snapshots and snapshot map read at once. */
#define TR_MAX_BLOCK (16u << 20)

/* Copies the trace's IR, snapshots and snapshot map: one read when they lie together
 * after the header (trace_save allocates them as one block, lj_trace.c:146-168), else one
 * read each. The copy is d->irbuf; snaps and map point into it. 0 or -errno. */
static int tr_copy(struct nupp_traces *t, struct tr_dec *d, __u64 ir, __u64 snap, __u64 snapmap, __u32 nsnap)
{
	const struct nupp_lj_layout *lo = &t->lo;
	__u64 irlo = ir + (__u64)d->nk * lo->ir_size, irhi = ir + (__u64)d->nins * lo->ir_size;
	__u64 slen = (__u64)nsnap * lo->snap_size, mlen = (__u64)d->nmap * 4;
	__u64 lo_a = irlo, hi_a = irhi;
	unsigned char *buf;
	int err;

	if (snap < lo_a)
		lo_a = snap;
	if (snapmap < lo_a)
		lo_a = snapmap;
	if (snap + slen > hi_a)
		hi_a = snap + slen;
	if (snapmap + mlen > hi_a)
		hi_a = snapmap + mlen;
	if (hi_a - lo_a <= (irhi - irlo) + slen + mlen + 64 && hi_a - lo_a <= TR_MAX_BLOCK) {
		/* Together (with at most alignment between them): one read. */
		buf = malloc(hi_a - lo_a + 8);
		if (!buf)
			return -ENOMEM;
		err = t->read(t->read_ctx, lo_a, buf, hi_a - lo_a);
		if (err) {
			free(buf);
			return err;
		}
		d->buf = buf;
		d->irbuf = buf + (irlo - lo_a);
		d->snaps = buf + (snap - lo_a);
		d->map = (const __u32 *)(buf + (snapmap - lo_a));
		return 0;
	}
	if ((irhi - irlo) + slen + mlen > TR_MAX_BLOCK)
		return -EINVAL;
	buf = malloc((irhi - irlo) + slen + mlen + 8);
	if (!buf)
		return -ENOMEM;
	err = t->read(t->read_ctx, irlo, buf, irhi - irlo);
	if (!err && slen)
		err = t->read(t->read_ctx, snap, buf + (irhi - irlo), slen);
	if (!err && mlen)
		err = t->read(t->read_ctx, snapmap, buf + (irhi - irlo) + slen, mlen);
	if (err) {
		free(buf);
		return err;
	}
	d->buf = buf;
	d->irbuf = buf;
	d->snaps = buf + (irhi - irlo);
	d->map = (const __u32 *)(buf + (irhi - irlo) + slen);
	return 0;
}

/* Puts e at the head of list *head. */
static void tr_list_add(struct tr_entry **head, struct tr_entry *e)
{
	e->lprev = NULL;
	e->lnext = *head;
	if (*head)
		(*head)->lprev = e;
	*head = e;
}

/* Takes e out of list *head. */
static void tr_list_del(struct tr_entry **head, struct tr_entry *e)
{
	if (e->lprev)
		e->lprev->lnext = e->lnext;
	else
		*head = e->lnext;
	if (e->lnext)
		e->lnext->lprev = e->lprev;
	e->lprev = e->lnext = NULL;
}

/* Makes a new entry known: its bucket and the list of all entries. */
static void tr_insert(struct nupp_traces *t, struct tr_entry *e)
{
	struct tr_entry **head = &t->b[tr_bucket(e->T)];

	e->next = *head;
	if (e->next)
		e->next->pnext = &e->next;
	e->pnext = head;
	*head = e;
	tr_list_add(&t->all, e);
	e->used_us = t->now_us;
}

/* A new entry for incarnation serial of trace T (header hdr), with the prototype
 * generation born of a sample while it lived and, for a side trace, its root's start
 * prototype start0; not decoded, with a block of extra bytes (e->blk, pooled: for the
 * copy BPF sent) unless extra is 0. */
static struct tr_entry *tr_entry_new(struct nupp_traces *t, __u64 T, const unsigned char *hdr, __u32 serial,
				     __u64 born, __u64 start0, size_t extra)
{
	const struct nupp_lj_layout *lo = &t->lo;
	struct tr_entry *e = tr_entry_alloc(t);

	if (!e)
		return NULL;
	if (extra) {
		e->blk = tr_block_get(t, extra, &e->pool);
		if (!e->blk) {
			e->lnext = t->efree;
			t->efree = e;
			return NULL;
		}
	}
	e->T = T;
	e->traceno = (__u32)tr_get(hdr, lo->T_traceno, 2);
	e->mcode = tr_get(hdr, lo->T_mcode, 8);
	e->serial = serial;
	e->born = born;
	e->nsnap = (__u32)tr_get(hdr, lo->T_nsnap, 2);
	e->startpt = tr_get(hdr, lo->T_startpt, 8);
	e->root = (__u16)tr_get(hdr, lo->T_root, 2);
	e->start0 = e->root ? start0 : e->startpt;
	return e;
}

/* The entry of incarnation serial of trace (T, traceno, mcode), or NULL. */
static struct tr_entry *tr_lookup(struct nupp_traces *t, __u64 T, __u32 traceno, __u64 mcode, __u32 serial)
{
	struct tr_entry *e;

	for (e = t->b[tr_bucket(T)]; e; e = e->next)
		if (e->T == T && e->traceno == traceno && e->mcode == mcode && e->serial == serial)
			return e;
	return NULL;
}

/* Decodes entry e from d (header, IR, snapshots and map copied): its snapshots' PCs and
 * frames. 0 or -errno. */
static int tr_decode(struct nupp_traces *t, struct tr_dec *d)
{
	const struct nupp_lj_layout *lo = &t->lo;
	struct tr_entry *e = d->e;
	struct tr_bc bcv = { 0 };
	struct tr_frame scratch[TR_MAX_INL];
	size_t nfrs = 0, cap = 0, *at;
	__u32 i;

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
		if (tr_exec_pc(t, d, &bcv, i))
			e->snaps[i].ok = 0; /* its bytecode could not be read: not decoded */
	return 0;
}

/* Frees what a decode kept for itself. */
static void tr_dec_done(struct tr_dec *d)
{
	free(d->buf);
	while (d->priv) {
		struct tr_fact *x = d->priv;

		d->priv = x->next;
		tr_fact_free(x);
	}
}

/* Checks the sizes of a trace header; 0 or -EINVAL. */
static int tr_hdr_sizes(struct nupp_traces *t, struct tr_dec *d, __u32 nsnap)
{
	const struct nupp_lj_layout *lo = &t->lo;

	d->nmap = (__u32)tr_get(d->hdr, lo->T_nsnapmap, 4);
	d->nk = (__u32)tr_get(d->hdr, lo->T_nk, 4);
	d->nins = (__u32)tr_get(d->hdr, lo->T_nins, 4);
	if (nsnap > TR_MAX_SNAP || d->nmap > TR_MAX_SNAPMAP || d->nk > d->nins || d->nins > 0x10000)
		return -EINVAL;
	return 0;
}

/* Is T, the serial-th trace of the process, J->trace[traceno] of VM g still (so alive
 * since a sample saw it run, all the while: a trace made at T or with that number since
 * would have another serial)? 0, -ESTALE or a read error. */
static int tr_still(struct nupp_traces *t, __u64 g, __u64 T, __u32 traceno, __u32 serial)
{
	const struct nupp_lj_layout *lo = &t->lo;
	__u64 J = g + (__s64)lo->gg_g2j, arr = 0, now = 0;
	__u32 size = 0, ser = 0;
	int err;

	err = t->read(t->read_ctx, J + lo->J_trace, &arr, 8);
	if (!err)
		err = t->read(t->read_ctx, J + lo->J_sizetrace, &size, 4);
	if (!err && traceno >= size)
		return -ESTALE;
	if (!err)
		err = t->read(t->read_ctx, arr + 8ull * traceno, &now, 8);
	if (!err && now == T)
		err = t->read(t->read_ctx, T + lo->T_serial, &ser, 4);
	if (err)
		return err;
	return now == T && ser == serial ? 0 : -ESTALE;
}

/* Decodes incarnation serial of trace T (number traceno of VM g), read now from the
 * target: kept only if it still lived after the last read (tr_still), so every fact read
 * was true. born: the prototype generation of a sample of it. 0 or -errno. */
static int tr_add(struct nupp_traces *t, __u64 g, __u64 T, __u32 traceno, __u32 serial, __u64 born)
{
	const struct nupp_lj_layout *lo = &t->lo;
	struct tr_dec d = { 0 };
	struct tr_entry *e;
	__u64 start0 = 0, R = 0, J = g + (__s64)lo->gg_g2j, arr = 0;
	__u32 root;
	int err;

	if (lo->T_size > sizeof(d.hdr))
		return -EOVERFLOW;
	err = t->read(t->read_ctx, T, d.hdr, lo->T_size);
	if (err)
		return err;
	if (tr_get(d.hdr, lo->T_traceno, 2) != traceno || tr_get(d.hdr, lo->T_serial, 4) != serial)
		return -ESTALE;
	if (tr_lookup(t, T, traceno, tr_get(d.hdr, lo->T_mcode, 8), serial))
		return 0;
	/* A side trace starts in its root's start frame (the root lives while it does). */
	root = (__u32)tr_get(d.hdr, lo->T_root, 2);
	if (root && !t->read(t->read_ctx, J + lo->J_trace, &arr, 8) && !t->read(t->read_ctx, arr + 8ull * root, &R, 8) && R)
		t->read(t->read_ctx, R + lo->T_startpt, &start0, 8);
	e = tr_entry_new(t, T, d.hdr, serial, born, start0, 0);
	if (!e)
		return -ENOMEM;
	d.e = e;
	err = tr_hdr_sizes(t, &d, e->nsnap);
	if (!err)
		err = tr_copy(t, &d, tr_get(d.hdr, lo->T_ir, 8), tr_get(d.hdr, lo->T_snap, 8),
			      tr_get(d.hdr, lo->T_snapmap, 8), e->nsnap);
	if (!err)
		err = tr_decode(t, &d);
	if (!err)
		err = tr_still(t, g, T, traceno, serial);
	tr_dec_done(&d);
	if (err) {
		tr_entry_free(t, e);
		return err;
	}
	tr_insert(t, e);
	return 0;
}

/* Decodes (and caches) incarnation serial of trace T of VM g now, from the target, if
 * it still lives. */
int nupp_traces_add(struct nupp_traces *t, __u64 g, __u64 T, __u32 traceno, __u32 serial, __u64 born)
{
	return tr_add(t, g, T, traceno, serial, born);
}

/* A TRACE_COPY event: the trace as BPF copied it at its first sample, kept for decoding
 * when the drain names that sample. A copy of a trace already known (copied again on
 * another CPU, or after BPF forgot it) changes nothing. */
int nupp_traces_add_copy(struct nupp_traces *t, const void *data, size_t size)
{
	const struct nupp_lj_layout *lo = &t->lo;
	const struct nupp_smp_trace_event *ev = data;
	const size_t head = offsetof(struct nupp_smp_trace_event, data);
	const struct nupp_smp_trace_fn *fns;
	struct tr_entry *e;

	if (size < head || ev->size == 0 || ev->size > NUPP_SMP_TRACE_MAX || ev->size < lo->T_size ||
	    ev->nfn > NUPP_SMP_TRACE_FNS ||
	    NUPP_SMP_TRACE_FN_OFS(ev->size) + (size_t)ev->nfn * sizeof(*fns) > size - head)
		return -EINVAL;
	if (tr_get(ev->data, lo->T_traceno, 2) != ev->h.traceno || tr_get(ev->data, lo->T_serial, 4) != ev->h.serial)
		return -ESTALE; /* not the trace the event names */
	if (tr_lookup(t, ev->h.trace, ev->h.traceno, tr_get(ev->data, lo->T_mcode, 8), ev->h.serial))
		return 0;
	fns = (const struct nupp_smp_trace_fn *)(ev->data + NUPP_SMP_TRACE_FN_OFS(ev->size));
	e = tr_entry_new(t, ev->h.trace, ev->data, ev->h.serial, ev->h.pgen, ev->start0,
			 (size_t)ev->nfn * sizeof(*e->fns) + ev->size);
	if (!e)
		return -ENOMEM;
	e->inline_raw = true;
	e->fns = (struct nupp_smp_trace_fn *)e->blk;
	e->raw = (unsigned char *)(e->fns + ev->nfn);
	memcpy(e->raw, ev->data, ev->size);
	memcpy(e->fns, fns, ev->nfn * sizeof(*e->fns));
	e->rawsize = ev->size;
	e->nfn = ev->nfn;
	tr_insert(t, e);
	return 0;
}

/* Decodes an entry from its BPF copy (the first sample that needs it). 0 or -errno. */
static int tr_decode_raw(struct nupp_traces *t, struct tr_entry *e)
{
	const struct nupp_lj_layout *lo = &t->lo;
	struct tr_dec d = { 0 };
	__u64 T = e->T, ir, snap, snapmap, irlo, irhi, end = T + e->rawsize;
	int err;

	memcpy(d.hdr, e->raw, lo->T_size < sizeof(d.hdr) ? lo->T_size : sizeof(d.hdr));
	d.e = e;
	d.fns = e->fns;
	d.nfn = e->nfn;
	err = tr_hdr_sizes(t, &d, e->nsnap);
	ir = tr_get(d.hdr, lo->T_ir, 8);
	snap = tr_get(d.hdr, lo->T_snap, 8);
	snapmap = tr_get(d.hdr, lo->T_snapmap, 8);
	irlo = ir + (__u64)d.nk * lo->ir_size;
	irhi = ir + (__u64)d.nins * lo->ir_size;
	if (!err && (irlo < T || irhi > end || irlo > irhi || snap < T || snap + (__u64)e->nsnap * lo->snap_size > end ||
		     snapmap < T || snapmap + (__u64)d.nmap * 4 > end))
		err = -EINVAL;
	if (!err) {
		d.irbuf = e->raw + (irlo - T);
		d.snaps = e->raw + (snap - T);
		d.map = (const __u32 *)(e->raw + (snapmap - T));
		err = tr_decode(t, &d);
	}
	tr_dec_done(&d);
	if (!e->inline_raw) {
		free(e->raw);
		free(e->fns);
	}
	/* Decoded: the copy goes back to the pool now, not at the purge. */
	if (e->blk)
		tr_block_put(t, e->blk, e->pool);
	e->blk = NULL;
	e->raw = NULL;
	e->fns = NULL;
	if (err) {
		free(e->mcofs);
		free(e->snaps);
		free(e->frs);
		e->mcofs = NULL;
		e->snaps = NULL;
		e->frs = NULL;
		e->failed = 1;
	}
	return err;
}

/* Sets the drain clock to now_us and drops the entries no sample named for TR_IDLE_US
 * (a sample of one later reads it from the target, if it lives). */
void nupp_traces_purge(struct nupp_traces *t, __u64 now_us)
{
	struct tr_entry *e, *nx;

	t->now_us = now_us;
	for (e = t->all; e; e = nx) {
		nx = e->lnext;
		/* Made before the clock was first set: as if named now. */
		if (!e->used_us)
			e->used_us = now_us;
		if (e->used_us + TR_IDLE_US >= now_us)
			continue;
		tr_list_del(&t->all, e);
		*e->pnext = e->next;
		if (e->next)
			e->next->pnext = e->pnext;
		tr_entry_free(t, e);
	}
}

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
	/* The snapshot's slot 0 must be the frame the sample found at jit_base. It is not
	 * when the trace links to a trace with another start frame: its tail stores the
	 * new BASE in jit_base before the jump (lj_asm.c asm_tail_link). The chain from
	 * jit_base is exact then; this snapshot's frames and leaf are not its. */
	start = sn->startpt ? sn->startpt : e->start0;
	if (start && start != st->frames[0].ptr)
		return n;
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
