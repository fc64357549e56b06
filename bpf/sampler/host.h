/* A sample's outcomes other than a stack, and the sampled thread's own stack: smp_lose
 * counts a sample lost, by reason (lost); smp_host one of host code, by its IP (hosts,
 * hnew); smp_stack_top finds the mapping that holds the thread's SP (tstacks), by which
 * the walk driver proves a VM's C frame lies on this thread's stack. Walks nothing and
 * touches no count of a stack (record.h). */
#ifndef NUPP_BPF_SAMPLER_HOST_H
#define NUPP_BPF_SAMPLER_HOST_H

/* Counts a sample that is not reported as a stack, in buffer buf. */
static __always_inline int smp_lose(__u32 buf, __u32 reason)
{
	__u32 i = (buf & 1) * NUPP_SMP_LOST_N + (reason < NUPP_SMP_LOST_N ? reason : NUPP_SMP_LOST_BAD_FRAME);
	__u64 *n = bpf_map_lookup_elem(&lost, &i);

	if (n)
		*n += 1;
	return 0;
}

/* bpf_find_vma callback: the mapping that holds the address. */
static long smp_vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct smp_tstack *t = data;

	t->start = vma->vm_start;
	t->end = vma->vm_end;
	return 0;
}

/* The end of the sampled thread's stack mapping (the one that holds sp), 0 if unknown. */
static __always_inline __u64 smp_stack_top(__u32 tid, __u64 sp)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct smp_tstack *c = bpf_map_lookup_elem(&tstacks, &tid), t = {};
	__u64 born = task->start_time;

	if (c && c->born == born && sp >= c->start && sp < c->end)
		return c->end;
	/* Refused while the target's mmap lock is taken (-EBUSY): unknown, not cached. */
	if (bpf_find_vma(task, sp, smp_vma_cb, &t, 0) || !(sp >= t.start && sp < t.end))
		return 0;
	t.born = born;
	bpf_map_update_elem(&tstacks, &tid, &t, BPF_ANY);
	return t.end;
}

/* Counts a sample of host code (a thread or a moment outside every VM) by its IP
 * (a global function: verified once, not at each call). */
__noinline int smp_host(__u32 buf, __u32 tgid, __u32 tid, __u64 ip)
{
	struct nupp_smp_host_key k = { .tgid = tgid, .buf = buf & 1, .ip = ip, .tid = tid };
	__u64 one = 1, *n = bpf_map_lookup_elem(&hosts, &k);

	if (n) {
		__sync_fetch_and_add(n, 1);
		return 0;
	}
	if (bpf_map_update_elem(&hosts, &k, &one, BPF_NOEXIST) == 0) {
		__sync_fetch_and_add(&hnew[buf & 1], 1);
		return 0;
	}
	n = bpf_map_lookup_elem(&hosts, &k); /* another CPU created it */
	if (!n)
		return smp_lose(buf, NUPP_SMP_LOST_MAP_FULL);
	__sync_fetch_and_add(n, 1);
	return 0;
}

#endif /* NUPP_BPF_SAMPLER_HOST_H */
