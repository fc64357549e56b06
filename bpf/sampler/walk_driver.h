/* The walk driver: the global functions that run the walker (include/nupp/walk.h) on this
 * CPU's scratch, each verified once rather than in every state of its callers (a step;
 * the repeat, cache-hit and C-frame loops and the function reads behind the walker's
 * hooks, walker.h), one walk and its retry from another base, the settling of a walk's
 * prototypes (watched when it gave a stack, their cache entries dropped when not), the
 * walk counters (wstat), and the choice of the VM a sampled thread runs. Leaves its result
 * in the scratch's walk: counts and sends nothing (record.h), and watches prototypes only
 * through smp_proto_watch (proto.h). */
#ifndef NUPP_BPF_SAMPLER_WALK_DRIVER_H
#define NUPP_BPF_SAMPLER_WALK_DRIVER_H

/* Defined in proto.h, after the walk driver (the settling of a walk watches the
 * prototypes of its frames). */
__noinline int smp_proto_watch(__u32 tgid, __u64 g, __u64 pt, __u64 pgen);

/* This CPU's walk counters, or 0. */
static __always_inline struct smp_wstat *smp_wstat_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&wstat, &zero);
}

/* Adds what walk w did to this CPU's counters. */
static __always_inline void smp_wstat_walk(const struct nupp_walk *w)
{
	struct smp_wstat *ws = smp_wstat_get();

	if (!ws)
		return;
	ws->v[NUPP_SMP_WS_WALKS]++;
	ws->v[NUPP_SMP_WS_HITS] += w->fc_hits;
	ws->v[NUPP_SMP_WS_FNHITS] += w->fc_fns;
	ws->v[NUPP_SMP_WS_FILLS] += w->fc_fills;
	ws->v[NUPP_SMP_WS_LOOKS] += w->fc_looks;
	ws->v[NUPP_SMP_WS_STALE] += w->fc_stale;
	ws->v[NUPP_SMP_WS_PGREADS] += w->fc_pgreads;
	ws->v[NUPP_SMP_WS_READS] += w->rd_n;
	ws->v[NUPP_SMP_WS_RBYTES] += w->rd_bytes;
	ws->v[NUPP_SMP_WS_RWIN] += w->rd_win;
	ws->v[NUPP_SMP_WS_RCODE] += w->rd_code;
	ws->v[NUPP_SMP_WS_RFN] += w->rd_fn;
}

/* One frame of the walk of this CPU's scratch: 1 when the walk is over. A global
 * function: the verifier checks it once, on its own, instead of once for every state in
 * which smp_sample reaches bpf_loop (each attempt, each start mode). */
__noinline int smp_walk_frame(void)
{
	__u32 zero = 0;
	struct smp_scratch *s = bpf_map_lookup_elem(&scratch, &zero);

	if (!s)
		return 1;
	return nupp_walk_step(&s->w, &s->lo);
}

/* Recursive frames of this CPU's walk taken in a row (nupp_walk_repeat): how many. A
 * global function, verified once rather than in every state a step starts in. */
__noinline int smp_walk_repeat(void)
{
	__u32 zero = 0;
	struct smp_scratch *s = bpf_map_lookup_elem(&scratch, &zero);

	if (!s)
		return 0;
	return (int)nupp_walk_repeat(&s->w);
}

/* Frame cache hits of this CPU's walk taken in a row (nupp_walk_cached): how many. A
 * global function, as smp_walk_repeat. */
__noinline int smp_walk_cached(void)
{
	__u32 zero = 0;
	struct smp_scratch *s = bpf_map_lookup_elem(&scratch, &zero);

	if (!s)
		return 0;
	return (int)nupp_walk_cached(&s->w, &s->lo);
}

/* The frame of a C or fast function of this CPU's walk, from its facts (nupp_walk_cframe):
 * 1 when taken. A global function, as smp_walk_repeat. */
__noinline int smp_walk_cframe(void)
{
	__u32 zero = 0;
	struct smp_scratch *s = bpf_map_lookup_elem(&scratch, &zero);

	if (!s)
		return 0;
	return nupp_walk_cframe(&s->w, &s->lo);
}

/* The CALL instruction before return PC pc of this CPU's walk (nupp_walk_call_ins): a
 * global function, verified once rather than in every state the step reaches it in. */
__noinline int smp_walk_call_ins(__u64 pc, __u32 *ins)
{
	__u32 zero = 0;
	struct smp_scratch *s = bpf_map_lookup_elem(&scratch, &zero);

	if (!s || !ins)
		return -1;
	return nupp_walk_call_ins(&s->w, &s->lo, pc, ins);
}

/* The CALL before return PC pc from this CPU's frame cache (nupp_walk_fc_call_ins): 1
 * with *ins, or 0. A global function, as smp_walk_call_ins. */
__noinline int smp_walk_fc_call_ins(__u64 tag, __u64 pc, __u32 *ins)
{
	__u32 zero = 0;
	struct smp_scratch *s = bpf_map_lookup_elem(&scratch, &zero);

	if (!s || !ins)
		return 0;
	return nupp_walk_fc_call_ins(&s->w, tag, pc, ins);
}

/* The facts of function fn from this CPU's frame cache into the walk's memo entry of fn
 * (nupp_walk_fc_fn_get): 1, or 0. A global function, as smp_walk_call_ins. */
__noinline int smp_walk_fc_fn_get(__u64 fn)
{
	__u32 zero = 0;
	struct smp_scratch *s = bpf_map_lookup_elem(&scratch, &zero);

	if (!s || !fn_cache)
		return 0;
	return nupp_walk_fc_fn_get(&s->w, fn, &s->w.fns[nupp_walk_slot(fn)]);
}

/* Keeps the facts of function fn, in the walk's memo entry of fn, in this CPU's frame
 * cache (nupp_walk_fc_fn_fill). A global function, as smp_walk_call_ins. */
__noinline int smp_walk_fc_fn_fill(__u64 fn)
{
	__u32 zero = 0;
	struct smp_scratch *s = bpf_map_lookup_elem(&scratch, &zero);

	if (!s || !fn_cache)
		return 0;
	nupp_walk_fc_fn_fill(&s->w, fn, &s->w.fns[nupp_walk_slot(fn)]);
	return 0;
}

/* What this CPU's walk uses of function fn (nupp_walk_func), into its memo entry of fn: 0,
 * 1 when fn is unreadable or not a function, 2 when its prototype is unreadable. A
 * global function, as smp_walk_call_ins. */
__noinline int smp_walk_func(__u64 fn)
{
	__u32 zero = 0;
	struct smp_scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	struct nupp_walk_fn *m = 0;

	if (!s)
		return 1;
	return nupp_walk_func(&s->w, &s->lo, fn, &m);
}

/* bpf_loop callback: one frame of the walk. */
static long smp_walk_cb(__u32 i, void *ctx)
{
	return smp_walk_frame() ? 1 : 0;
}

/* bpf_loop callback: settles prototype note i of this CPU's walk (smp_walk_settle). */
static long smp_settle_cb(__u32 i, void *ctx)
{
	__u32 zero = 0, ok = *(int *)ctx;
	struct smp_scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	struct nupp_walk_met *m;
	struct nupp_walk_fc *c;

	if (!s || i >= s->w.nmet || i >= NUPP_WALK_MET)
		return 1;
	m = &s->w.met[i & (NUPP_WALK_MET - 1)];
	/* A function's facts (include/nupp/walk.h nupp_walk_fc_fn_fill): kept when the walk
	 * proved its frames, else dropped; no prototype to watch. */
	if (m->key & 1) {
		if (!ok) {
			c = nupp_walk_fc_fn(&s->w, s->w.fc_tag, m->fn);
			if (c)
				c->tag = 0;
		}
		return 0;
	}
	if (ok) {
		__u32 wi = (__u32)((m->pt >> 3) ^ (m->pt >> 11)) & (SMP_WC - 1);

		if (s->wc_pt[wi] == m->pt && s->wc_tgid[wi] == s->met_tgid && s->wc_gen[wi] == m->gen)
			return 0; /* watched by this CPU, not freed since */
		if (!smp_proto_watch(s->met_tgid, s->met_g, m->pt, s->met_pgen)) {
			s->wc_pt[wi] = m->pt;
			s->wc_tgid[wi] = s->met_tgid;
			s->wc_gen[wi] = m->gen;
			return 0;
		}
		s->w.unwatched = 1;
	}
	/* Not proven (a failed walk), or not watched: its cache entry is dropped. */
	if (m->key) {
		c = nupp_walk_fc_look(&s->w, s->w.fc_tag, m->fn, m->key, 0);
		if (c && c->proto == m->pt)
			c->tag = 0;
	}
	return 0;
}

/* After a walk of this CPU's scratch: when it gave a stack (ok), the prototypes of the
 * frames it read are watched (one that cannot be loses the sample: w.unwatched); else
 * they are not (its frames are not proven), and the cache entries it filled are dropped.
 * A global function: verified once. */
__noinline int smp_walk_settle(int ok)
{
	int k = ok ? 1 : 0;

	bpf_loop(NUPP_WALK_MET, smp_settle_cb, &k, 0);
	return 0;
}

/* One walk of the stack of VM g on the sampled thread (registers r) into this CPU's
 * scratch, whose layout and cache tags are set, from the start base how; sets *vmstate
 * once the VM's state is read. Returns 1 when the walk gave a stack, else 0 (the result
 * is in the scratch's walk). A global function: the verifier checks it once, on its own,
 * not once for each attempt and each state its caller reaches it in. */
__noinline int smp_walk_try(const struct nupp_walk_regs *r, __u64 g, __u32 how, __s32 *vmstate)
{
	__u32 zero = 0;
	struct smp_scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	__s32 vms = 0;
	int err;

	if (!s || !r || !vmstate)
		return 0;
	vms = *vmstate;
	err = nupp_walk_start(&s->w, &s->lo, g, r, max_depth, how, &vms);
	*vmstate = vms;
	if (err) {
		s->w.result = err;
		return 0;
	}
	if (s->w.mode == NUPP_WALK_TRACE)
		nupp_walk_trace(&s->w, &s->lo, vms, r->ip);
	bpf_loop(NUPP_WALK_MAX_ITER(max_depth), smp_walk_cb, NULL, 0);
	if (s->w.result == NUPP_WALK_RUN)
		nupp_walk_cut(&s->w); /* out of iterations: a cut stack */
	if (s->w.result == NUPP_WALK_DONE && !s->w.st.depth)
		s->w.result = NUPP_WALK_BAD_FRAME; /* no frame at all is not a stack */
	if (s->w.nmet)
		smp_walk_settle(s->w.result == NUPP_WALK_DONE);
	smp_wstat_walk(&s->w);
	return s->w.result == NUPP_WALK_DONE;
}

/* Walks the stack of VM g on the sampled thread into this CPU's scratch: the start
 * rules, then a retry from another base when the first walk fails. Leaves the result in
 * the scratch's walk; returns the VM's vmstate (0 when it could not be read). */
static __always_inline __s32 smp_walk(struct smp_scratch *s, const struct nupp_walk_regs *r, __u64 g)
{
	__u32 attempt, how = NUPP_WALK_BASE_AUTO;
	__s32 vmstate = 0;

	for (attempt = 0; attempt < 2; attempt++) {
		if (smp_walk_try(r, g, how, &vmstate))
			break;
		how = nupp_walk_retry(&s->w, &s->lo, vmstate, attempt, r->ip);
		if (!how)
			break;
	}
	return vmstate;
}

/* Picks the VM the sampled thread runs: the one whose DISPATCH is r14 when the IP is in
 * the interpreter; else (C code, a trace, the GC, the JIT) the only open VM, which
 * nupp_walk_start proves by its C frame on the thread's stack, or with several VMs the
 * one whose C frame is there. Also sets r->stk_top. Returns the slot, NUPP_SMP_MAX_VMS
 * for none (the thread runs host code). A global function: verified once. */
__noinline __u32 smp_pick_vm(struct nupp_smp_proc *p, struct nupp_walk_regs *r, __u32 tid, __u64 *g)
{
	__u64 cand, only = 0, L = 0, cf = 0;
	__u32 i, n, live = 0, only_i = 0;
	int in_vm;

	if (!p || !r || !g)
		return NUPP_SMP_MAX_VMS;
	cand = r->r14 + (__s64)p->lo.gg_disp2g;
	n = p->nvm;
	in_vm = r->ip >= p->lo.vm_begin && r->ip < p->lo.vm_end;
	for (i = 0; i < NUPP_SMP_MAX_VMS; i++) {
		__u64 gi = p->g[i];

		if (i >= n)
			break;
		if (!gi)
			continue; /* a closed VM's slot, or one being filled */
		if (in_vm && gi == cand) {
			*g = cand;
			return i;
		}
		live = live ? 2 : 1; /* one, or more (fewer states for the verifier) */
		only = gi;
		only_i = i;
	}
	if (!live)
		return NUPP_SMP_MAX_VMS; /* no VM open (yet, or any more): host code */
	r->stk_top = smp_stack_top(tid, r->sp);
	if (live == 1) {
		*g = only;
		return only_i;
	}
	if (!r->stk_top)
		return NUPP_SMP_MAX_VMS;
	for (i = 0; i < NUPP_SMP_MAX_VMS; i++) {
		__u64 gi = p->g[i];

		if (i >= n)
			break;
		if (!gi || bpf_probe_read_user(&L, 8, (const void *)(gi + p->lo.g_cur_L)) || !L ||
		    bpf_probe_read_user(&cf, 8, (const void *)(L + p->lo.L_cframe)))
			continue;
		cf &= p->lo.cframe_rawmask;
		if (cf && cf >= r->sp && cf < r->stk_top) {
			*g = gi;
			return i;
		}
	}
	return NUPP_SMP_MAX_VMS;
}

#endif /* NUPP_BPF_SAMPLER_WALK_DRIVER_H */
