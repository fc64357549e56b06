/* The record path of one sample of a target's thread: its process's layout and the cache
 * tags set in this CPU's scratch, its stack walked (walk_driver.h), then counted in its
 * buffer's counts map under (tgid, thread, zone, stack), the stack sent on stk_ring before
 * its first count; a sample that is no stack counted as host code or lost (host.h); a
 * trace's first sample handed to the trace copy (smp_trace_copy_send, trace_copy.h, once
 * per incarnation: tcopied). Writes counts0, counts1, stacks, stk_ring and lost_where;
 * changes the walk only through the walk driver and watches no prototype itself. */
#ifndef NUPP_BPF_SAMPLER_RECORD_H
#define NUPP_BPF_SAMPLER_RECORD_H

/* Defined in trace_copy.h, the last part (the first sample of a trace copies it). */
__noinline int smp_trace_copy_send(__u32 tgid, __u64 pgen);

/* Notes that this CPU's sample ran in the trace of its walk (scratch s), and copies the
 * trace when no CPU did yet for this incarnation (smp_trace_copy_send). */
static __always_inline void smp_trace_seen(struct smp_scratch *s, __u32 tgid, __u64 pgen)
{
	struct nupp_walk_tc *c = &s->w.tc[s->w.tc_slot & (NUPP_WALK_TC - 1)];
	struct smp_tcopied_key k = {};
	__u32 why, one = 1;

	if (c->T != s->w.st.trace || c->serial != s->w.st.tserial || c->seen)
		return;
	k.T = s->w.st.trace;
	k.tgid = tgid;
	k.serial = s->w.st.tserial;
	if (!bpf_map_lookup_elem(&tcopied, &k)) {
		why = (__u32)smp_trace_copy_send(tgid, pgen);
		if (why >= NUPP_SMP_TC_N)
			why = NUPP_SMP_TC_SHAPE;
		__sync_fetch_and_add(&tcopy[why & (NUPP_SMP_TC_N - 1)], 1);
		/* A full ring buffer: the next sample tries again. */
		if (why == NUPP_SMP_TC_RINGFULL)
			return;
		bpf_map_update_elem(&tcopied, &k, &one, BPF_ANY);
	}
	c->seen = 1;
}

/* Sends the stack of walk w (its key set) on the stack ring, up to its depth: 0, or -1
 * when the ring is full. */
static __always_inline int smp_stack_send(struct nupp_walk *w)
{
	__u32 d = w->st.depth;
	__u64 size;

	if (d > NUPP_SMP_MAX_DEPTH)
		d = NUPP_SMP_MAX_DEPTH;
	size = 8 + NUPP_SMP_STACK_SIZE(d);
	if (size > sizeof(struct nupp_smp_stack_rec))
		return -1;
	return bpf_ringbuf_output(&stk_ring, &w->st_key, size, BPF_RB_NO_WAKEUP) ? -1 : 0;
}

/* Counts a sample of the stack of walk w under key in cm, its buffer's counts map: 0, 1
 * when it sent the stack (new in this buffer), -1 when a map is full, -2 when the stack
 * ring is. */
static __always_inline int smp_count(void *cm, struct nupp_smp_count_key *key, struct nupp_walk *w, __u32 state,
				     struct smp_wstat *ws)
{
	struct nupp_smp_count *c = bpf_map_lookup_elem(cm, key), init = {};
	__u64 t0 = 0, t1 = 0, *mark, was;
	__u32 slot;
	int isnew = 0, marked;

	if (!c) {
		slot = nupp_smp_stack_slot(key->stack, stk_slots);
		mark = bpf_map_lookup_elem(&stacks, &slot);
		if (!mark)
			return -1;
		if (time_stats)
			t0 = bpf_ktime_get_ns();
		was = *(volatile __u64 *)mark;
		if (was != key->stack || !key->stack) {
			/* Sent before its first count (both within this sample, which a drain
			 * waits for): a buffer's counts never name a stack userspace cannot
			 * have. Marked, unless another CPU's sample took the slot meanwhile
			 * (sent all the same: userspace keeps one copy). */
			marked = __sync_val_compare_and_swap(mark, was, key->stack) == was;
			w->st_key = key->stack;
			if (time_stats)
				t1 = bpf_ktime_get_ns();
			if (smp_stack_send(w)) {
				/* Not sent: not marked either (another CPU's sample of it in
				 * between is counted, and lost unnamed at the drain). */
				if (marked)
					__sync_val_compare_and_swap(mark, key->stack, 0);
				return -2;
			}
			isnew = 1;
			if (ws) {
				ws->v[NUPP_SMP_WS_NEWSTACK]++;
				if (time_stats) {
					ws->v[NUPP_SMP_WS_MARK_NS] += t1 - t0;
					ws->v[NUPP_SMP_WS_RING_NS] += bpf_ktime_get_ns() - t1;
				}
			}
		}
		/* A new count is created holding this sample: no lookup after. EEXIST (a
		 * racing CPU created it) adds to it below; a full map fails the lookup. */
		if (state < NUPP_SMP_NSTATES)
			init.n[state] = 1;
		if (bpf_map_update_elem(cm, key, &init, BPF_NOEXIST) == 0) {
			if (ws)
				ws->v[NUPP_SMP_WS_NEWCOUNT]++;
			return isnew;
		}
		c = bpf_map_lookup_elem(cm, key);
		if (!c)
			return -1;
	}
	if (state < NUPP_SMP_NSTATES)
		__sync_fetch_and_add(&c->n[state], 1);
	return isnew;
}

/* One sample of a target's thread, counted into buffer buf: its Lua stack when it runs a
 * VM, else host code. */
static __always_inline int smp_sample(struct nupp_smp_proc *p, __u32 tgid, __u32 tid, __u32 buf)
{
	__u64 g = 0, zaddr;
	__u32 zero = 0, vi, state, zone = 0;
	struct smp_scratch *s;
	struct pt_regs *ur;
	struct nupp_walk_regs r = {};
	struct nupp_smp_count_key key = {};
	__s32 vmstate;
	__u64 pgen, pfrees, t0 = 0, t1 = 0;
	__u8 fc_ok;
	int err;
	struct smp_wstat *ws;

	/* User registers also for samples taken in kernel mode (in a syscall: the frame saved
	 * at kernel entry). */
	ur = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!ur)
		return smp_lose(buf, NUPP_SMP_LOST_NO_VM);
	r.ip = ur->ip;
	r.rbx = ur->bx;
	r.rdx = ur->dx;
	r.rbp = ur->bp;
	r.r14 = ur->r14;
	r.sp = ur->sp;
	/* No VM known yet (before vm_open, or a process that is not LuaJIT yet). */
	if (!p->layout_ok)
		return smp_host(buf, tgid, tid, r.ip);
	/* Frees happen on the VM's own thread: a sample of it may interrupt luajit:proto_free's
	 * program, but the prototype being freed is in no frame of the thread's stack. */
	pgen = p->pgen;
	pfrees = p->pfrees;
	vi = smp_pick_vm(p, &r, tid, &g);
	if (vi >= NUPP_SMP_MAX_VMS)
		return smp_host(buf, tgid, tid, r.ip);
	zaddr = p->zone_addr[vi & (NUPP_SMP_MAX_VMS - 1)];
	fc_ok = p->fc_ok[vi & (NUPP_SMP_MAX_VMS - 1)];
	/* A VM whose prototype lifetime probes are not attached (another LuaJIT binary in
	 * the process): its frames could not be named with proof. */
	if (!fc_ok)
		return smp_lose(buf, NUPP_SMP_LOST_NO_VM);
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	/* Copy the layout only when this CPU last sampled another process. */
	if (s->lo_tgid != tgid || s->lo.vm_begin != p->lo.vm_begin) {
		__builtin_memcpy(&s->lo, &p->lo, sizeof(s->lo));
		s->lo_tgid = tgid;
	}
	/* tgid < 2^22 (PID_MAX_LIMIT): the tag names the process, the epoch and the
	 * count of frees past what an entry keeps of it. */
	s->w.fc_tag = nupp_walk_fc_tag(fc_epoch, tgid, pfrees);
	/* Frees happen on the VM's thread, and none of a prototype of this stack during this
	 * sample: entries filled (or checked) at this count of prototype frees name no
	 * prototype freed since. */
	s->w.fc_pg = pfrees;
	/* Trace cache entries hold the VM's newest trace serial (include/nupp/walk.h). */
	s->w.tc_tag = (fc_epoch << 22) | (tgid & 0x3fffff);
	/* For the walker's hook: the prototypes it meets are watched at this generation. */
	s->met_tgid = tgid;
	s->met_g = g;
	s->met_pgen = pgen;
	if (time_stats)
		t0 = bpf_ktime_get_ns();
	vmstate = smp_walk(s, &r, g);
	ws = smp_wstat_get();
	if (ws) {
		ws->v[NUPP_SMP_WS_SAMPLES]++;
		if (s->w.result == NUPP_WALK_DONE)
			ws->v[NUPP_SMP_WS_FRAMES] += s->w.st.depth;
	}
	if (time_stats) {
		t1 = bpf_ktime_get_ns();
		if (ws)
			ws->v[NUPP_SMP_WS_WALK_NS] += t1 - t0;
	}
	if (s->w.result == NUPP_WALK_NOT_RUNNING)
		return smp_host(buf, tgid, tid, r.ip); /* this thread does not run the VM now */
	if (s->w.result != NUPP_WALK_DONE) {
		__u32 where = (((s->w.mode * 2 + (s->w.iter ? 1 : 0)) << 11) | (s->w.why & 2047)) & 16383;
		__u64 one = 1, *n = bpf_map_lookup_elem(&lost_where, &where);

		if (n)
			__sync_fetch_and_add(n, 1);
		else if (bpf_map_update_elem(&lost_where, &where, &one, BPF_NOEXIST) &&
			 (n = bpf_map_lookup_elem(&lost_where, &where)))
			__sync_fetch_and_add(n, 1); /* another CPU created it */
		return smp_lose(buf, (__u32)s->w.result - 1);
	}
	/* A prototype of the stack could not be watched (pseen full): its free would not be
	 * reported, so no name could be proven. */
	if (s->w.unwatched)
		return smp_lose(buf, NUPP_SMP_LOST_MAP_FULL);
	if (zaddr && nupp_zone_read(zaddr, &zone))
		return smp_lose(buf, NUPP_SMP_LOST_READ_FAULT);
	key.tgid = tgid | (buf ? NUPP_SMP_TGID_BUF : 0);
	key.zone = zone;
	key.tid = tid;
	/* Incarnations of a prototype at one address are counted apart: the key holds the
	 * free generation of each frame's prototype, and on a trace the trace epochs read
	 * before the walk (the VM's traces change on its own thread, never during this
	 * sample). Samples of one key saw the same incarnations, so the generation of the
	 * first, stored with the stack, names them all; a prototype freed elsewhere starts
	 * no new stack. */
	s->w.st.pgen = pgen;
	/* A trace stack's hash holds the trace's serial: each incarnation is counted apart. */
	key.stack = (nupp_walk_key(&s->w) & ~NUPP_SMP_STACK_BUF) | (buf ? NUPP_SMP_STACK_BUF : 0);
	/* The first sample of a trace copies it, alive now, for userspace to name its
	 * samples by (once per incarnation: the trace cache entry remembers it, and the
	 * tcopied map across CPUs). */
	if ((s->w.st.flags & NUPP_SMP_F_MCODE) && s->w.st.tserial) {
		smp_trace_seen(s, tgid, pgen);
		if (time_stats && ws)
			ws->v[NUPP_SMP_WS_COPY_NS] += bpf_ktime_get_ns() - t1;
	}
	state = nupp_walk_state(&s->lo, vmstate);
	/* A counted stack was sent before its count was created: one lookup in the common
	 * case. A new one has its mark read (a stack sent already: another thread's or zone's
	 * count, another CPU's), then set and the stack sent. Each buffer has its stacks sent
	 * for its counts (userspace empties both maps of a buffer together). */
	if (time_stats)
		t0 = bpf_ktime_get_ns();
	err = (buf & 1) ? smp_count(&counts1, &key, &s->w, state, ws) : smp_count(&counts0, &key, &s->w, state, ws);
	if (err < 0)
		return smp_lose(buf, err == -2 ? NUPP_SMP_LOST_RING_FULL : NUPP_SMP_LOST_MAP_FULL);
	if (time_stats && ws) {
		__u64 now = bpf_ktime_get_ns();

		ws->v[NUPP_SMP_WS_STORE_NS] += now - t1;
		ws->v[NUPP_SMP_WS_COUNT_NS] += now - t0;
		ws->v[NUPP_SMP_WS_TIMED]++;
		if (err) {
			ws->v[NUPP_SMP_WS_NEW_NS] += now - t0;
			ws->v[NUPP_SMP_WS_NEW_TIMED]++;
		}
	}
	return 0;
}

#endif /* NUPP_BPF_SAMPLER_RECORD_H */
