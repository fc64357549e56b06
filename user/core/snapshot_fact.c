/* Facts of the GCfuncs and GCprotos a trace decode names: a function's frame identity
 * and a prototype's header, read once per decode from the target, or taken from the
 * functions BPF named in its copy of the trace. Owns struct tr_fact's reading; may not
 * touch the cache's entries or a decode's snapshots (snapshot_decode.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot_priv.h"


/* Frees a fact. */
void tr_fact_free(struct tr_fact *f)
{
	free(f->mem);
	free(f);
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
struct tr_fact *tr_fact_get(struct nupp_traces *t, struct tr_dec *d, __u64 addr, int is_proto, int *err)
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
int tr_func(struct nupp_traces *t, struct tr_dec *d, __u64 fn, struct nupp_smp_frame *f)
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
