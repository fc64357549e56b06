/* Trace copies, made at a trace's first sample: the trace (one block from its GCtrace to
 * the end of its snapshot map) copied into this CPU's trace_buf, the functions of its
 * frames found among its constants or in its snapshot map and named (their prototypes
 * watched, proto.h; their fingerprints kept per CPU in trace_ptc), and all of it sent as
 * one TRACE_COPY event. Owns trace_buf and trace_ptc; reads the trace from this CPU's
 * scratch and changes no count, stack or walk (record.h decides when a copy is made). The
 * last part: nothing after it uses it. */
#ifndef NUPP_BPF_SAMPLER_TRACE_COPY_H
#define NUPP_BPF_SAMPLER_TRACE_COPY_H

#define SMP_FN_SLOTS (2 * NUPP_SMP_TRACE_FNS) /* hash of fn[]: never more than half full */

/* Per-CPU scratch of a trace copy: the event as sent, the function table, and what
 * the scan of its snapshot map needs (layout values, offsets of the trace's arrays). */
struct smp_trace_buf {
	struct nupp_smp_trace_event ev;
	struct nupp_smp_trace_fn fn[NUPP_SMP_TRACE_FNS]; /* the functions, sent after the trace */
	__u8 fn_slot[SMP_FN_SLOTS]; /* index + 1 in fn[] of a function by hash; 0: free */
	__u8 tmp[256]; /* a GCfunc's or GCproto's header */
	__u32 map_ofs, nmap, irk_ofs, nk, nins;
	__u32 snap_frame, ir_kgc, ir_o, ir_size;
	__u32 kref, ref_true, irt_is64; /* the constant scan's cursor and bounds */
	__u8 ir_t, irt_func, irt_proto, irt_type, ir_knull;
	__u32 fn_gct, fn_ffid, fn_pc, fn_cf, fn_span;
	__u32 pt_size, pt_chunkname, pt_firstline, pt_sizebc, pt_sizept;
	__u8 gct_func, ff_lua, ff_c, fr2;
	__u8 unwatched; /* a function's prototype could not be watched (smp_proto_watch) */
	__u64 gcvmask;
	__u64 ptc_tag, ptc_pfrees; /* what a trace_ptc entry must hold to be used */
};

/* The kernel refuses a per-CPU map value over 32 KB (PCPU_MIN_UNIT_SIZE). */
_Static_assert(sizeof(struct smp_trace_buf) <= 32768, "trace_buf's value is too large for a per-CPU map");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct smp_trace_buf);
} trace_buf SEC(".maps");

/* A prototype's fingerprint as a trace copy read it (per CPU, direct-mapped by its
 * address): the functions of a program's traces are the same few hundred, and a
 * prototype's fields never change while it lives. An entry names pt only for the
 * process and VM epoch of tag and while the process has freed no prototype since
 * (pfrees: luajit:proto_free bumps it before the memory can be reused). */
#define SMP_PTC_ENTRIES 512
struct smp_ptc {
	__u64 tag; /* (fc_epoch << 22) | tgid; 0: empty */
	__u64 pfrees;
	__u64 pt;
	__u64 chunkname;
	__s32 firstline;
	__u32 sizebc, sizept, pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SMP_PTC_ENTRIES);
	__type(key, __u32);
	__type(value, struct smp_ptc);
} trace_ptc SEC(".maps");

/* A little-endian field of width w at a bounded offset of the copy. */
static __always_inline __u64 smp_tb_get(const __u8 *base, __u32 ofs, __u32 max, int w)
{
	__u64 v = 0;

	if (ofs > max - 8)
		return 0;
	if (w == 8)
		__builtin_memcpy(&v, base + ofs, 8);
	else if (w == 4)
		__builtin_memcpy(&v, base + ofs, 4);
	else if (w == 2)
		__builtin_memcpy(&v, base + ofs, 2);
	else
		v = base[ofs];
	return v;
}

/* The probe of smp_tb_add_fn: fn, its hash, and where the probe ended. */
struct smp_tb_probe {
	__u64 fn;
	__u32 h;
	__u32 k;    /* the slot the probe ended at */
	__u32 done; /* 1: a free slot at k, 2: fn is there already, 0: no free slot (or no buffer) */
};

/* bpf_loop callback: slot i of fn's probe sequence. */
static long smp_tb_probe_cb(__u32 i, void *ctx)
{
	struct smp_tb_probe *pr = ctx;
	__u32 zero = 0, k = (pr->h + i) & (SMP_FN_SLOTS - 1), x;
	struct smp_trace_buf *b = bpf_map_lookup_elem(&trace_buf, &zero);

	if (!b)
		return 1;
	x = b->fn_slot[k];
	pr->k = k;
	if (!x)
		pr->done = 1;
	else if (b->fn[(x - 1) & (NUPP_SMP_TRACE_FNS - 1)].fn == pr->fn)
		pr->done = 2;
	return pr->done ? 1 : 0;
}

/* Adds GCfunc* fn to the event's table of this CPU's trace copy once (open addressing on
 * its address: a trace's map names the same few functions in snapshot after snapshot). A
 * global function, verified once rather than at each of its three callers; its probe is a
 * bpf_loop, whose body is verified once rather than once per slot. */
__noinline int smp_tb_add_fn(__u64 fn)
{
	__u32 zero = 0;
	struct smp_trace_buf *b = bpf_map_lookup_elem(&trace_buf, &zero);
	struct smp_tb_probe pr = { .fn = fn, .h = (__u32)(((fn >> 3) * 0x9e3779b97f4a7c15ull) >> 57) };
	__u32 n;

	if (!b)
		return 0;
	n = b->ev.nfn;
	if (n > NUPP_SMP_TRACE_FNS)
		return 0; /* already more than fit */
	bpf_loop(SMP_FN_SLOTS, smp_tb_probe_cb, &pr, 0);
	if (pr.done == 2)
		return 0;
	if (n >= NUPP_SMP_TRACE_FNS || pr.done != 1) {
		b->ev.nfn = NUPP_SMP_TRACE_FNS + 1; /* more than fit */
		return 0;
	}
	b->fn[n & (NUPP_SMP_TRACE_FNS - 1)].fn = fn;
	b->fn_slot[pr.k & (SMP_FN_SLOTS - 1)] = (__u8)(n + 1);
	b->ev.nfn = n + 1;
	return 0;
}


/* bpf_loop callback: snapshot map entry j. A frame's function is the entry of the slot
 * below its SNAP_FRAME link entry (FR2, entries in slot order, lj_snap.c snapshot_slots);
 * slot 0 is the start frame's function. A KGC constant there is noted (PC words between
 * snapshots may add a constant that is no function: the reads below tell). */
static long smp_trace_scan_cb(__u32 j, void *ctx)
{
	__u32 zero = 0, e, prev, ref = 0, ofs, slot;
	struct smp_trace_buf *b = bpf_map_lookup_elem(&trace_buf, &zero);
	__u64 fn;

	if (!b || j >= b->nmap)
		return 1;
	ofs = b->map_ofs + 4 * j;
	if (ofs > NUPP_SMP_TRACE_MAX - 4)
		return 1;
	e = (__u32)smp_tb_get(b->ev.data, ofs, NUPP_SMP_TRACE_MAX + 4, 4);
	slot = e >> 24;
	if (slot == 0) {
		ref = e & 0xffff;
	} else if ((e & b->snap_frame) && j > 0 && slot >= b->fr2) {
		prev = (__u32)smp_tb_get(b->ev.data, ofs - 4, NUPP_SMP_TRACE_MAX + 4, 4);
		if ((prev >> 24) == slot - b->fr2)
			ref = prev & 0xffff;
	}
	/* Constants lie below REF_BIAS (0x8000), from nk on; a KGC's payload is ir[ref+1]. */
	if (!ref || ref >= 0x8000 || ref < b->nk || ref + 1 >= b->nins)
		return 0;
	ofs = b->irk_ofs + (ref - b->nk) * b->ir_size;
	if (ofs > NUPP_SMP_TRACE_MAX - 16 || smp_tb_get(b->ev.data, ofs + b->ir_o, NUPP_SMP_TRACE_MAX, 1) != b->ir_kgc)
		return 0;
	fn = smp_tb_get(b->ev.data, ofs + b->ir_size, NUPP_SMP_TRACE_MAX, 8) & b->gcvmask;
	if (fn)
		smp_tb_add_fn(fn);
	return 0;
}

/* bpf_loop callback: the trace's next constant from b->kref on, walked as the GC marks
 * them (lj_gc.c gc_traverse_trace: a 64-bit constant but KNULL takes two slots); a KGC
 * of type IRT_FUNC or IRT_PROTO is noted. Every function of the trace's frames is such a
 * constant (the map scan below keeps only KGC constants), or a closure whose prototype a
 * guard holds, which is; and the trace keeps each one alive. */
static long smp_trace_kscan_cb(__u32 j, void *ctx)
{
	__u32 zero = 0, ofs, ref;
	struct smp_trace_buf *b = bpf_map_lookup_elem(&trace_buf, &zero);
	__u64 fn;
	__u8 o, t;

	if (!b)
		return 1;
	ref = b->kref;
	if (ref >= b->ref_true || ref < b->nk || ref + 1 >= b->nins)
		return 1;
	ofs = b->irk_ofs + (ref - b->nk) * b->ir_size;
	if (ofs > NUPP_SMP_TRACE_MAX - 16)
		return 1;
	o = (__u8)smp_tb_get(b->ev.data, ofs + b->ir_o, NUPP_SMP_TRACE_MAX, 1);
	t = (__u8)smp_tb_get(b->ev.data, ofs + b->ir_t, NUPP_SMP_TRACE_MAX, 1) & b->irt_type;
	if (o == b->ir_kgc && (t == b->irt_func || t == b->irt_proto)) {
		fn = smp_tb_get(b->ev.data, ofs + b->ir_size, NUPP_SMP_TRACE_MAX, 8) & b->gcvmask;
		if (fn)
			smp_tb_add_fn(t == b->irt_proto ? fn | NUPP_SMP_TRACE_FN_PROTO : fn);
		if (b->ev.nfn > NUPP_SMP_TRACE_FNS)
			return 1;
	}
	b->kref = ref + 1 + (((b->irt_is64 >> (t & 31)) & 1) && o != b->ir_knull);
	return 0;
}

/* bpf_loop callback: names function i of the table (its GCfunc header, and for a Lua
 * function its prototype's fingerprint), read now while the trace keeps it alive; entry
 * fn 0 is the trace's start prototype (T->startpt), an odd fn a prototype constant. */
static long smp_trace_fn_cb(__u32 i, void *ctx)
{
	__u32 zero = 0, slot;
	struct smp_trace_buf *b = bpf_map_lookup_elem(&trace_buf, &zero);
	struct nupp_smp_trace_fn *f;
	struct smp_ptc *c;
	__u64 ffid;

	if (!b || i >= b->ev.nfn || i >= NUPP_SMP_TRACE_FNS)
		return 1;
	f = &b->fn[i & (NUPP_SMP_TRACE_FNS - 1)];
	f->kind = 0;
	if (!f->fn)
		goto proto; /* the start prototype: ptr is set */
	if (f->fn & NUPP_SMP_TRACE_FN_PROTO) {
		f->ptr = f->fn & ~NUPP_SMP_TRACE_FN_PROTO;
		goto proto;
	}
	if (bpf_probe_read_user(b->tmp, b->fn_span & 127, (const void *)f->fn) ||
	    smp_tb_get(b->tmp, b->fn_gct, 128, 1) != b->gct_func)
		return 0;
	ffid = smp_tb_get(b->tmp, b->fn_ffid, 128, 1);
	if (ffid == b->ff_c) {
		f->ptr = smp_tb_get(b->tmp, b->fn_cf, 128, 8);
		f->kind = NUPP_SMP_C;
		return 0;
	}
	if (ffid != b->ff_lua) {
		f->ptr = ffid;
		f->kind = NUPP_SMP_FF;
		return 0;
	}
	f->ptr = smp_tb_get(b->tmp, b->fn_pc, 128, 8) - b->pt_size;
proto:
	if (!f->ptr)
		return 0;
	slot = (__u32)(((f->ptr >> 3) * 0x9e3779b97f4a7c15ull) >> 55) & (SMP_PTC_ENTRIES - 1);
	c = bpf_map_lookup_elem(&trace_ptc, &slot);
	/* Its free reported from now on: userspace decodes the trace with its copy. */
	if (smp_proto_watch(b->ev.h.tgid, b->ev.h.g, f->ptr, b->ev.h.pgen)) {
		b->unwatched = 1;
		return 1;
	}
	if (c && c->tag == b->ptc_tag && c->pfrees == b->ptc_pfrees && c->pt == f->ptr) {
		f->chunkname = c->chunkname;
		f->firstline = c->firstline;
		f->sizebc = c->sizebc;
		f->sizept = c->sizept;
		f->kind = NUPP_SMP_LUA;
		return 0;
	}
	if (bpf_probe_read_user(b->tmp, b->pt_size & 255, (const void *)f->ptr))
		return 0;
	f->chunkname = smp_tb_get(b->tmp, b->pt_chunkname, 256, 8);
	f->firstline = (__s32)smp_tb_get(b->tmp, b->pt_firstline, 256, 4);
	f->sizebc = (__u32)smp_tb_get(b->tmp, b->pt_sizebc, 256, 4);
	f->sizept = (__u32)smp_tb_get(b->tmp, b->pt_sizept, 256, 4);
	f->kind = NUPP_SMP_LUA;
	if (c) {
		c->tag = b->ptc_tag;
		c->pfrees = b->ptc_pfrees;
		c->pt = f->ptr;
		c->chunkname = f->chunkname;
		c->firstline = f->firstline;
		c->sizebc = f->sizebc;
		c->sizept = f->sizept;
	}
	return 0;
}

/* Copies trace T (one block from T to the end of its snapshot map) and names the
 * functions of its frames; returns the outcome (enum nupp_smp_tcopy), b->ev.size set only
 * from the block's read on (smp_trace_copy states the rule). */
static __always_inline __u32 smp_trace_copy_all(struct smp_trace_buf *b, const struct nupp_lj_layout *lo, __u64 T)
{
	__u64 ir, snap, snapmap, irk, end, hsize = lo->T_size;
	__u32 nsnap, nmap, size;

	if (hsize > 512 || hsize < 16 || bpf_probe_read_user(b->ev.data, hsize & 511, (const void *)T))
		return NUPP_SMP_TC_HDRFAULT;
	b->ev.h.mcode = smp_tb_get(b->ev.data, lo->T_mcode, 512, 8);
	ir = smp_tb_get(b->ev.data, lo->T_ir, 512, 8);
	snap = smp_tb_get(b->ev.data, lo->T_snap, 512, 8);
	snapmap = smp_tb_get(b->ev.data, lo->T_snapmap, 512, 8);
	nsnap = (__u32)smp_tb_get(b->ev.data, lo->T_nsnap, 512, 2);
	nmap = (__u32)smp_tb_get(b->ev.data, lo->T_nsnapmap, 512, 4);
	b->nk = (__u32)smp_tb_get(b->ev.data, lo->T_nk, 512, 4);
	b->nins = (__u32)smp_tb_get(b->ev.data, lo->T_nins, 512, 4);
	irk = ir + (__u64)b->nk * lo->ir_size;
	end = snapmap + (__u64)nmap * 4;
	/* One block after the header (trace_save): IR, then snapshots, then the map. */
	if (b->nk > b->nins || irk < T + hsize || irk > T + hsize + 8 || snap < irk || snapmap < snap ||
	    snap + (__u64)nsnap * lo->snap_size > snapmap)
		return NUPP_SMP_TC_SHAPE;
	if (end - T > NUPP_SMP_TRACE_MAX)
		return NUPP_SMP_TC_TOOBIG;
	size = (__u32)(end - T);
	if (size > NUPP_SMP_TRACE_MAX)
		return NUPP_SMP_TC_TOOBIG;
	if (bpf_probe_read_user(b->ev.data, size, (const void *)T))
		return NUPP_SMP_TC_FAULT;
	b->ev.size = size;
	b->map_ofs = (__u32)(snapmap - T);
	b->nmap = nmap;
	b->irk_ofs = (__u32)(irk - T);
	b->snap_frame = lo->snap_frame;
	b->ir_kgc = lo->ir_kgc;
	b->ir_o = lo->ir_o;
	b->ir_size = lo->ir_size;
	b->fr2 = lo->fr2;
	b->gcvmask = lo->gcvmask;
	b->fn_gct = lo->fn_gct;
	b->fn_ffid = lo->fn_ffid;
	b->fn_pc = lo->fn_pc;
	b->fn_cf = lo->fn_cf;
	b->fn_span = (lo->fn_pc > lo->fn_cf ? lo->fn_pc : lo->fn_cf) + 8;
	b->pt_size = lo->pt_size;
	b->pt_chunkname = lo->pt_chunkname;
	b->pt_firstline = lo->pt_firstline;
	b->pt_sizebc = lo->pt_sizebc;
	b->pt_sizept = lo->pt_sizept;
	b->gct_func = lo->gct_func;
	b->ff_lua = lo->ff_lua;
	b->ff_c = lo->ff_c;
	b->kref = b->nk;
	b->ref_true = lo->ref_true;
	b->irt_is64 = lo->irt_is64;
	b->ir_t = lo->ir_t;
	b->irt_func = lo->irt_func;
	b->irt_proto = lo->irt_proto;
	b->irt_type = lo->irt_type;
	b->ir_knull = lo->ir_knull;
	__builtin_memset(b->fn_slot, 0, sizeof(b->fn_slot));
	/* The function constants (a few dozen entries), or when more than fit (or the walk
	 * stopped short), only those of the frames: the whole snapshot map, hundreds to
	 * thousands of entries. */
	bpf_loop(NUPP_SMP_TRACE_MAX / 8, smp_trace_kscan_cb, NULL, 0);
	if (b->ev.nfn >= NUPP_SMP_TRACE_FNS || b->kref < b->ref_true) {
		b->ev.nfn = 0;
		__builtin_memset(b->fn_slot, 0, sizeof(b->fn_slot));
		bpf_loop(NUPP_SMP_TRACE_MAX / 4, smp_trace_scan_cb, NULL, 0);
	}
	/* The start prototype too (fn 0), whose bytecode a snapshot may need. */
	smp_tb_add_fn(0);
	if (b->ev.nfn > NUPP_SMP_TRACE_FNS)
		return NUPP_SMP_TC_FNS;
	b->fn[(b->ev.nfn - 1) & (NUPP_SMP_TRACE_FNS - 1)].ptr = smp_tb_get(b->ev.data, lo->T_startpt, 512, 8);
	b->unwatched = 0;
	bpf_loop(NUPP_SMP_TRACE_FNS, smp_trace_fn_cb, NULL, 0);
	return b->unwatched ? NUPP_SMP_TC_UNWATCHED : NUPP_SMP_TC_COPIED;
}

/* Copies trace T and names its functions (smp_trace_copy_all); returns the outcome. One
 * rule for what is sent: b->ev.size is the copy's size when the outcome is
 * NUPP_SMP_TC_COPIED, and 0 for every other outcome (then userspace reads the trace from
 * the target). */
static __always_inline __u32 smp_trace_copy(struct smp_trace_buf *b, const struct nupp_lj_layout *lo, __u64 T)
{
	__u32 why = smp_trace_copy_all(b, lo, T);

	if (why != NUPP_SMP_TC_COPIED)
		b->ev.size = 0;
	return why;
}

/* Copies the trace of this CPU's walk (its scratch: the trace T, number and serial, of VM
 * g in process tgid, alive: the sampled thread runs it), names the functions of its
 * frames, and sends it as a TRACE_COPY event with pgen, the process's prototype
 * generation of the sample. Returns the outcome (enum nupp_smp_tcopy). A copy that is not
 * whole is not sent: userspace reads the trace from the target when it names the sample,
 * if it still lives. Sent without waking the reader unless 1 MB waits unread. A global
 * function: verified once, on its own. */
__noinline int smp_trace_copy_send(__u32 tgid, __u64 pgen)
{
	__u32 zero = 0, size, why, nfn, root = 0, traceno, serial;
	struct smp_scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	struct smp_trace_buf *b = bpf_map_lookup_elem(&trace_buf, &zero);
	struct nupp_smp_proc *p = bpf_map_lookup_elem(&procs, &tgid);
	__u64 arr = 0, R = 0, g, T;

	if (!s || !b || !p)
		return NUPP_SMP_TC_HDRFAULT;
	g = s->w.g;
	T = s->w.st.trace;
	traceno = s->w.st.traceno;
	serial = s->w.st.tserial;
	b->ev.h.kind = NUPP_SMP_EV_TRACE_COPY;
	b->ev.h.tgid = tgid;
	b->ev.h.g = g;
	b->ev.h.trace = T;
	b->ev.h.mcode = 0;
	b->ev.h.traceno = traceno;
	b->ev.h.serial = serial;
	b->ev.h.pgen = pgen;
	b->ev.size = 0;
	b->ev.nfn = 0;
	b->ev.start0 = 0;
	/* Prototype frees run on the VM's thread, not during this sample: an entry of
	 * trace_ptc filled at this count names no prototype freed since. */
	b->ptc_tag = (fc_epoch << 22) | (tgid & 0x3fffff);
	b->ptc_pfrees = *(volatile __u64 *)&p->pfrees;
	why = smp_trace_copy(b, &s->lo, T);
	size = b->ev.size; /* 0 unless copied whole */
	if (!size || size > NUPP_SMP_TRACE_MAX)
		return why;
	/* A side trace starts in its root's start frame: the root (alive while its side
	 * traces are) names that frame's prototype. */
	root = (__u32)smp_tb_get(b->ev.data, s->lo.T_root, 512, 2);
	if (root && !bpf_probe_read_user(&arr, 8, (const void *)(g + (__s64)s->lo.gg_g2j + s->lo.J_trace)) && arr &&
	    !bpf_probe_read_user(&R, 8, (const void *)(arr + 8ull * root)) && R)
		bpf_probe_read_user(&b->ev.start0, 8, (const void *)(R + s->lo.T_startpt));
	if (b->ev.start0 && smp_proto_watch(tgid, g, b->ev.start0, pgen))
		return NUPP_SMP_TC_UNWATCHED;
	/* The function table after the trace (all of them: nfn <= NUPP_SMP_TRACE_FNS;
	 * tested again as the bound of the read below). */
	nfn = b->ev.nfn;
	if (nfn <= NUPP_SMP_TRACE_FNS) {
		size = NUPP_SMP_TRACE_FN_OFS(size);
		if (size > NUPP_SMP_TRACE_MAX)
			size = NUPP_SMP_TRACE_MAX;
		bpf_probe_read_kernel(b->ev.data + size, nfn * sizeof(struct nupp_smp_trace_fn), b->fn);
		size += nfn * sizeof(struct nupp_smp_trace_fn);
	}
	if (bpf_ringbuf_output(&events, b, offsetof(struct nupp_smp_trace_event, data) + size, smp_proto_wakeup()))
		return NUPP_SMP_TC_RINGFULL;
	return why;
}

#endif /* NUPP_BPF_SAMPLER_TRACE_COPY_H */
