/* Trace samples to source positions: the snapshot that covers a machine-code offset
 * gives the leaf PC and the frames inlined into the trace (lj_trace.c lj_trace_unwind, lj_snap.c).
 * The code of snapshot k is what was recorded from k up to snapshot k+1 (mcofs, assembled
 * backwards, marks where the code of its first IR instruction starts); the leaf is the
 * bytecode that code starts executing: the snapshot's PC itself (not PC - 1), or for a
 * control instruction's guard snapshot, which resumes at the other branch, that
 * instruction (tr_exec_pc).
 *
 * This file owns the cache of a process's traces: creating and freeing it, its entries
 * (their chunks, buckets and list, and the pool of blocks their BPF copies live in),
 * looking an entry up and purging idle ones, and the snapshot search. Reading a trace is
 * snapshot_read.c, the facts a decode reads snapshot_fact.c, decoding snapshot_decode.c,
 * rewriting a sample's frames snapshot_expand.c; it reads no target memory. */
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


/* -- Entries and the pool of copies ------------------------------------------------ */

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
void tr_block_put(struct nupp_traces *t, void *b, __u8 pool)
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
void tr_entry_free(struct nupp_traces *t, struct tr_entry *e)
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


/* Where the decoder finds prototypes' bytecode (see sampler_internal.h). */
void nupp_traces_set_sym(struct nupp_traces *t, struct nupp_sym *sym)
{
	t->sym = sym;
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
void tr_insert(struct nupp_traces *t, struct tr_entry *e)
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
struct tr_entry *tr_entry_new(struct nupp_traces *t, __u64 T, const unsigned char *hdr, __u32 serial,
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
struct tr_entry *tr_lookup(struct nupp_traces *t, __u64 T, __u32 traceno, __u64 mcode, __u32 serial)
{
	struct tr_entry *e;

	for (e = t->b[tr_bucket(T)]; e; e = e->next)
		if (e->T == T && e->traceno == traceno && e->mcode == mcode && e->serial == serial)
			return e;
	return NULL;
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
