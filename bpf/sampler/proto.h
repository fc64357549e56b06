/* Prototype watch and free: a prototype met by a sample or a trace copy is watched
 * (smp_proto_watch: entered in pseen, its fingerprint, chunk name, allocation and string
 * constants sent on the events ring), and the free of a watched one, one bpf_loop callback
 * per prototype of a luajit:proto_free batch (smp_pfree_one), ends its generation, bumps
 * its block's free generation (pfree_gen, walker.h) and sends its copy. Owns pseen,
 * pseen_n and the prototype event buffers (proto_buf, seen_buf); reads the target only at
 * the prototype named. Touches no count, stack or walk; the program that runs a batch is
 * sampler.bpf.c's. */
#ifndef NUPP_BPF_SAMPLER_PROTO_H
#define NUPP_BPF_SAMPLER_PROTO_H

/* Prototype events do not wake the reader (a wake-up per event would cost the target
 * more than the event), which reads them at its drains and other wake-ups, unless 1 MB
 * waits unread. */
static __always_inline __u64 smp_proto_wakeup(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > (1u << 20) ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* Fills the prototype event header from pt's fingerprint; 0 or -1. */
static __always_inline int smp_proto_head(struct nupp_smp_proto_event *h, struct nupp_smp_proc *p, __u32 kind,
					  __u32 tgid, __u64 g, __u64 pt)
{
	h->kind = kind;
	h->tgid = tgid;
	h->g = g;
	h->pt = pt;
	h->full = 0;
	h->size = 0;
	if (bpf_probe_read_user(&h->chunkname, 8, (const void *)(pt + p->lo.pt_chunkname)) ||
	    bpf_probe_read_user(&h->firstline, 4, (const void *)(pt + p->lo.pt_firstline)) ||
	    bpf_probe_read_user(&h->sizebc, 4, (const void *)(pt + p->lo.pt_sizebc)))
		return -1;
	return 0;
}

/* Constants of a dying prototype being copied (bpf_loop state; the bytes used so far
 * are kept in b->h.size, map memory, so every iteration verifies alike). */
struct smp_kstr_ctx {
	struct smp_proto_buf *b;
	struct nupp_smp_proc *p;
	__u64 k;
};

/* bpf_loop callback: copies string constant i (the GCRef at k[-1 - i]). */
static long smp_kstr_cb(__u32 i, void *data)
{
	struct smp_kstr_ctx *c = data;
	struct nupp_smp_kstr e = {};
	__u64 ref = 0;
	__u32 len = 0, n, at = c->b->h.size;
	__u8 gct = 0;

	if (at >= NUPP_SMP_KSTR_DATA - sizeof(e) - NUPP_SMP_KSTR_LEN)
		return 1; /* full: used stays below NUPP_SMP_KSTR_DATA */
	if (bpf_probe_read_user(&ref, 8, (const void *)(c->k - 8ull * (i + 1))) || !ref ||
	    bpf_probe_read_user(&gct, 1, (const void *)(ref + c->p->lo.pt_gct)) || gct != c->p->lo.gct_str ||
	    bpf_probe_read_user(&len, 4, (const void *)(ref + c->p->lo.str_len)))
		return 0;
	n = len < NUPP_SMP_KSTR_LEN ? len : NUPP_SMP_KSTR_LEN;
	n &= 127;
	at &= NUPP_SMP_KSTR_DATA - 1;
	if (n && bpf_probe_read_user(&c->b->data[at + sizeof(e)], n, (const void *)(ref + c->p->lo.str_size)))
		return 0;
	e.idx = (__u16)i;
	e.len = (__u8)n;
	e.whole = len <= NUPP_SMP_KSTR_LEN;
	__builtin_memcpy(&c->b->data[at], &e, sizeof(e));
	c->b->h.size = at + sizeof(e) + n;
	return 0;
}

/* Is g no longer open in the process (its lua_close has begun)? */
static __always_inline int smp_vm_gone(struct nupp_smp_proc *p, __u64 g)
{
	__u32 i, n = p->nvm;

	for (i = 0; i < NUPP_SMP_MAX_VMS; i++) {
		if (i >= n)
			break;
		if (p->g[i] == g)
			return 0;
	}
	return 1;
}

/* Sends the string constants of a prototype of a closing VM (b held its free event). */
static __always_inline void smp_kstr(struct smp_proto_buf *b, struct nupp_smp_proc *p, __u64 pt)
{
	struct smp_kstr_ctx c = { .b = b, .p = p };
	__u32 nk = 0, used;

	if (bpf_probe_read_user(&c.k, 8, (const void *)(pt + p->lo.pt_k)) || !c.k ||
	    bpf_probe_read_user(&nk, 4, (const void *)(pt + p->lo.pt_sizekgc)))
		return;
	b->h.size = 0;
	bpf_loop(nk < NUPP_SMP_KSTR_N ? nk : NUPP_SMP_KSTR_N, smp_kstr_cb, &c, 0);
	used = b->h.size & (NUPP_SMP_KSTR_DATA - 1);
	if (!used)
		return;
	b->h.kind = NUPP_SMP_EV_PROTO_KSTR;
	b->h.full = nk;
	b->h.size = used;
	/* Lost (ring buffer full): the names these gave are refused, as before. */
	bpf_ringbuf_output(&events, b, sizeof(b->h) + used, smp_proto_wakeup());
}

/* Copies prototype pt's allocation (sizept bytes, at most NUPP_SMP_PT_MAX: a larger one's
 * copy is cut, unless whole asks for none then) into b's data, with h.full and h.size;
 * returns the bytes copied, 0 when none. */
static __always_inline __u32 smp_proto_alloc(struct smp_proto_buf *b, struct nupp_smp_proc *p, __u64 pt, int whole)
{
	__u32 sizept = 0, n;

	if (bpf_probe_read_user(&sizept, 4, (const void *)(pt + p->lo.pt_sizept)) || !sizept ||
	    (whole && sizept > NUPP_SMP_PT_MAX))
		return 0;
	n = sizept < NUPP_SMP_PT_MAX ? sizept : NUPP_SMP_PT_MAX;
	if (bpf_probe_read_user(b->data, n, (const void *)pt))
		return 0;
	b->h.full = sizept;
	b->h.size = n;
	return n;
}

/* Watches prototype pt of VM g in process tgid, alive now (a sample's frame, or a
 * function of a trace being copied), at the sample's generation pgen: the first time
 * (since its last free) it enters pseen, and its fingerprint and chunk name, then its
 * allocation and string constants, are sent, for the day it dies (or its process exits)
 * before userspace has read them (its free reports its copy, but its chunk name may be
 * swept first). Returns 0 when pt is watched, -1 when it cannot be (pseen full). A
 * global function: verified once. */
__noinline int smp_proto_watch(__u32 tgid, __u64 g, __u64 pt, __u64 pgen)
{
	struct smp_pseen_key k = { .tgid = tgid, .pt = pt };
	struct nupp_smp_proc *p;
	struct smp_proto_buf *b;
	__u32 zero = 0, len = 0, n;
	__u8 one = 1;
	long err;

	if (bpf_map_lookup_elem(&pseen, &k))
		return 0;
	err = bpf_map_update_elem(&pseen, &k, &one, BPF_NOEXIST);
	if (err)
		return err == -17 /* EEXIST: another CPU's */ ? 0 : -1;
	/* Counted after the entry is in (a full barrier): a free that finds its slot empty
	 * follows no watch of its prototype. */
	__sync_fetch_and_add(&pseen_n[smp_pseen_slot(tgid, pt)], 1);
	__sync_fetch_and_add(&pwatched, 1);
	p = bpf_map_lookup_elem(&procs, &tgid);
	b = bpf_map_lookup_elem(&seen_buf, &zero);
	if (!p || !b || !p->layout_ok || smp_proto_head(&b->h, p, NUPP_SMP_EV_PROTO_NEW, tgid, g, pt))
		return 0;
	b->h.pgen = pgen;
	if (bpf_probe_read_user(&len, 4, (const void *)(b->h.chunkname + p->lo.str_len)))
		return 0;
	n = len < NUPP_SMP_CHUNK_MAX ? len : NUPP_SMP_CHUNK_MAX;
	if (bpf_probe_read_user(b->data, n, (const void *)(b->h.chunkname + p->lo.str_size)))
		return 0;
	b->h.full = len;
	b->h.size = n;
	/* Lost (ring buffer full): a prototype is named while alive only. */
	if (bpf_ringbuf_output(&events, b, sizeof(b->h) + n, smp_proto_wakeup()))
		return 0;
	/* Its allocation and string constants, as this sample found them (alive): named
	 * after the process exits if it exits before userspace has read them. A larger
	 * one than a copy holds is read while alive. */
	n = smp_proto_alloc(b, p, pt, 1);
	if (!n)
		return 0;
	b->h.kind = NUPP_SMP_EV_PROTO_COPY;
	if (bpf_ringbuf_output(&events, b, sizeof(b->h) + n, smp_proto_wakeup()) == 0)
		smp_kstr(b, p, pt);
	return 0;
}

/* State of a luajit:proto_free run over the prototypes that die (bpf_loop). */
struct smp_pfree_ctx {
	struct nupp_smp_proc *p;
	struct smp_proto_buf *b;
	__u64 g;
	__u64 pts; /* the batch: GCproto *pts[n] in the target, intact while the probe runs */
	__u32 tgid;
};

/* bpf_loop callback: prototype i of the batch dies. When it was watched (a sample or a
 * trace copy met it), its generation ends (samples taken before saw this incarnation),
 * the frame cache entries that name it are dropped (nupp_pgen_free: its memory may hold
 * another prototype next), and its
 * allocation, intact until after this probe, is sent as it is. One no sample met costs
 * a read of pseen_n (and rarely a lookup): no cache entry or name can be of it (entries
 * are filled only for prototypes watched). */
static long smp_pfree_one(__u32 i, void *data)
{
	struct smp_pfree_ctx *c = data;
	struct smp_pseen_key k = { .tgid = c->tgid };
	struct nupp_smp_proc *p = c->p;
	struct smp_proto_buf *b = c->b;
	__u32 n, slot;
	__u64 gen;

	/* Read one at a time from the target, not kept in per-CPU memory: a preemptible
	 * kernel may run another process's probe on this CPU meanwhile. */
	if (bpf_probe_read_user(&k.pt, 8, (const void *)(c->pts + 8ull * (i & (NUPP_LJ_PROTO_FREE_MAX - 1))))) {
		__sync_fetch_and_add(&fc_epoch, 1);
		goto lost;
	}
	/* Watched before any sample named it, on this VM's thread (frees run there too). */
	slot = smp_pseen_slot(c->tgid, k.pt);
	if (!*(volatile __u32 *)&pseen_n[slot] || !bpf_map_lookup_elem(&pseen, &k))
		return 0;
	if (bpf_map_delete_elem(&pseen, &k) == 0)
		__sync_fetch_and_add(&pseen_n[slot], -1);
	__sync_fetch_and_add(&pfreed, 1);
	/* The block's generation, then the counts (nupp/proto_gen.h). */
	gen = nupp_pgen_free(&pfree_gen[nupp_walk_pgen_slot(k.pt)], &p->pfrees, &p->pgen);
	if (smp_proto_head(&b->h, p, NUPP_SMP_EV_PROTO_FREE, c->tgid, c->g, k.pt))
		goto lost;
	b->h.pgen = gen;
	n = smp_proto_alloc(b, p, k.pt, 0);
	if (!n)
		goto lost;
	if (bpf_ringbuf_output(&events, b, sizeof(b->h) + n, smp_proto_wakeup()) == 0) {
		/* lua_close: the strings its constants name die after every prototype. */
		if (smp_vm_gone(p, c->g))
			smp_kstr(b, p, k.pt);
		return 0;
	}
lost:
	/* Userspace cannot tell which prototype died at gen: it starts over. */
	__sync_fetch_and_add(&p->nlost, 1);
	return 0;
}

#endif /* NUPP_BPF_SAMPLER_PROTO_H */
