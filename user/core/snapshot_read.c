/* Reading a trace to decode: from the target (its header, then its IR, snapshots and
 * snapshot map, kept only if the trace still lived after the last read), or from the copy
 * BPF sent at its first sample (TRACE_COPY), checked and decoded when a sample needs it.
 * Owns the checks of a trace's sizes and liveness; the decoding itself is
 * snapshot_decode.c, the entries snapshot.c. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot_priv.h"


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
int tr_add(struct nupp_traces *t, __u64 g, __u64 T, __u32 traceno, __u32 serial, __u64 born)
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
int tr_decode_raw(struct nupp_traces *t, struct tr_entry *e)
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
