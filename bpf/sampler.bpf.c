// SPDX-License-Identifier: GPL-2.0
/* The sampler channel: CPU-clock perf_event samples of LuaJIT stacks and VM states,
 * aggregated in the kernel per (tgid, thread, zone, stack); VM lifetime and the frees of
 * prototypes met by samples from USDT; each trace copied, and each prototype watched,
 * at its first sample. This file holds the programs (the entry points) and a few helpers
 * only they use; the parts they run are headers of bpf/sampler/, one object with them,
 * included in the order they use one another (each program after the parts it runs). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>
#include <bpf/bpf_core_read.h>

#include "nupp/sampler_abi.h"
/* The process follower's programs, attached only when the session follows processes:
 * in this object they cost no second read and parse of the kernel's BTF. A profiled
 * child is sampled from its fork (smp_on_fork); an exec voids its VMs (smp_on_exec). */
#define NUPP_FOLLOW_FORK_HOOK smp_on_fork
#define NUPP_FOLLOW_EXEC_HOOK smp_on_exec
#include "follow.h"

/* The frame walker, its hooks and caches (fcache, fncache). */
#include "sampler/walker.h"

char LICENSE[] SEC("license") = "GPL";

/* Knobs, counters and the maps the parts share. */
#include "sampler/maps.h"
/* Host and lost samples; the sampled thread's stack mapping. */
#include "sampler/host.h"
/* The walk driver: the walker run on this CPU's scratch, the VM a thread runs. */
#include "sampler/walk_driver.h"
/* One sample's record path: walked, counted, its stack sent. */
#include "sampler/record.h"

/* -- Sampling (perf_event) -------------------------------------------------------- */

/* Notes this CPU-clock tick of the CPU (every tick, of any task, so that each interval
 * is one tick's) and returns 1 when it is to be dropped as time the hypervisor took
 * (nupp_smp_steal_tick). The steal clock is the run queue's, as the scheduler last read
 * it (kernels built without steal accounting have none: nothing is dropped). */
static __always_inline int smp_steal(struct bpf_perf_event_data *ctx, __u32 cpu, __u64 id)
{
	struct task_struct *task;
	struct cfs_rq *cfs;
	__u64 steal;

	if (!bpf_core_field_exists(struct rq, prev_steal_time_rq) ||
	    !bpf_core_field_exists(struct sched_entity, cfs_rq) || !bpf_core_field_exists(struct cfs_rq, rq))
		return 0;
	/* Loads through the kernel's own pointers (BTF-typed: a fault reads 0). */
	task = bpf_get_current_task_btf();
	cfs = task->se.cfs_rq;
	if (!cfs || !cfs->rq)
		return 0;
	steal = cfs->rq->prev_steal_time_rq;
	if (!steal)
		return 0;
	return nupp_smp_steal_tick(&inflight[cpu], bpf_ktime_get_ns(), steal, ctx->sample_period, id);
}

/* The CPU-clock sample: walk the running Lua stack (or name the host code) and count it,
 * marked in flight on this CPU while it reads or writes a buffer. */
SEC("perf_event")
int nupp_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id;
	__u32 tgid, tid, cpu, buf;
	int stolen;
	struct nupp_smp_proc *p;
	struct smp_wstat *ws;

	if (paused)
		return 0;
	cpu = bpf_get_smp_processor_id() & (NUPP_SMP_MAX_CPUS - 1);
	id = bpf_get_current_pid_tgid();
	stolen = smp_steal(ctx, cpu, id);
	tgid = id >> 32;
	tid = (__u32)id;
	p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p)
		return 0;
	/* The hypervisor's time, not the task's: not a sample of it. */
	if (stolen) {
		ws = smp_wstat_get();
		if (ws)
			ws->v[NUPP_SMP_WS_STOLEN]++;
		return 0;
	}
	__sync_fetch_and_add(&inflight[cpu].n, 1); /* a full barrier: then read the epoch */
	buf = (__u32)(*(volatile __u64 *)&epoch) & 1;
	smp_sample(p, tgid, tid, buf);
	__sync_fetch_and_add(&inflight[cpu].n, 1);
	return 0;
}

/* -- VM lifetime (USDT) ---------------------------------------------------------- */

/* Sends a lifetime event to userspace, waking the reader as wake says (ringbuf flags). */
static __always_inline void smp_event(__u32 kind, __u32 tgid, __u64 g, __u64 T, __u64 mcode, __u32 traceno,
				       struct nupp_smp_proc *p, __u64 pgen, __u64 wake)
{
	struct nupp_smp_event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);

	if (!ev) {
		/* A trace event lost: userspace starts over (as for a prototype free). */
		if (p)
			__sync_fetch_and_add(&p->nlost, 1);
		return;
	}
	ev->pgen = pgen;
	ev->kind = kind;
	ev->tgid = tgid;
	ev->g = g;
	ev->trace = T;
	ev->mcode = mcode;
	ev->traceno = traceno;
	ev->serial = 0;
	bpf_ringbuf_submit(ev, wake);
}

/* The address of the zone_tv slot of VM g (include/nupp/zone_abi.h) in the process's
 * luajit_bpf_vmlist, found from &luajit_bpf_layout and the distance between the two
 * symbols in their ELF object (the probe's cookie, 0 when unknown): lua_open puts g in
 * its vmlist slot before vm_open fires (scripts/luajit-usdt.patch), so a VM opened under
 * the sampler has its zones read from its first sample. 0 when not found. */
static __always_inline __u64 smp_zone_slot(__u64 layout, __s64 delta, __u64 g)
{
	__u64 vl = layout + (__u64)delta, gs[NUPP_LJ_VMLIST_MAX];
	__u32 i;

	if (!delta || bpf_probe_read_user(gs, sizeof(gs), (const void *)(vl + __builtin_offsetof(struct nupp_lj_vmlist, g))))
		return 0;
	for (i = 0; i < NUPP_LJ_VMLIST_MAX; i++)
		if (gs[i] == g)
			return vl + __builtin_offsetof(struct nupp_lj_vmlist, zone_tv) + i * sizeof(__u64);
	return 0;
}

/* luajit:vm_open(g, L, &luajit_bpf_layout): a target's new VM is sampled from now on. */
SEC("usdt")
int BPF_USDT(nupp_smp_vm_open, __u64 g, __u64 L, __u64 layout)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, i, n;
	struct nupp_smp_proc *p = bpf_map_lookup_elem(&procs, &tgid);
	__u64 zslot;

	if (!p)
		return 0;
	if (!p->layout_ok && bpf_probe_read_user(&p->lo, sizeof(p->lo), (const void *)layout) == 0 &&
	    p->lo.magic == NUPP_LJ_LAYOUT_MAGIC && p->lo.version == NUPP_LJ_LAYOUT_VERSION &&
	    p->lo.size == sizeof(p->lo))
		p->layout_ok = 1;
	n = p->nvm;
	for (i = 0; i < NUPP_SMP_MAX_VMS; i++) {
		if (i >= n)
			break;
		if (p->g[i] == g)
			goto sent;
	}
	/* Threads open VMs concurrently: reserve a slot atomically; slots are never reused
	 * (like luajit_bpf_vmlist), a closed VM leaves 0. */
	zslot = smp_zone_slot(layout, (__s64)bpf_usdt_cookie(ctx), g);
	n = __sync_fetch_and_add(&p->nvm, 1);
	if (n < NUPP_SMP_MAX_VMS) {
		p->zone_addr[n & (NUPP_SMP_MAX_VMS - 1)] = zslot;
		/* This program fires, so luajit:proto_free of the same binary is attached too
		 * (nupp_sampler_watch attaches it first). */
		p->fc_ok[n & (NUPP_SMP_MAX_VMS - 1)] = 1;
		p->g[n & (NUPP_SMP_MAX_VMS - 1)] = g;
	} else {
		__sync_fetch_and_add(&p->nvm, -1);
	}
sent:
	__sync_fetch_and_add(&fc_epoch, 1);
	smp_event(NUPP_SMP_EV_VM_OPEN, tgid, g, 0, 0, 0, 0, 0, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/* luajit:vm_close(g): stop attributing samples to this VM. */
SEC("usdt")
int BPF_USDT(nupp_smp_vm_close, __u64 g)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, i, n;
	struct nupp_smp_proc *p = bpf_map_lookup_elem(&procs, &tgid);

	if (!p)
		return 0;
	n = p->nvm;
	for (i = 0; i < NUPP_SMP_MAX_VMS; i++) {
		if (i >= n)
			break;
		if (p->g[i] == g) {
			p->g[i] = 0;
			break;
		}
	}
	__sync_fetch_and_add(&fc_epoch, 1);
	smp_event(NUPP_SMP_EV_VM_CLOSE, tgid, g, 0, 0, 0, 0, 0, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/* Userspace's change to a process's entry (struct nupp_smp_proc_set), made in place
 * with the same atomic slot reservation as vm_open: the counters the probes add to are
 * never written. Returns 0, or -ENOENT when the process has no entry, -ENOSPC when a VM
 * found no slot, -ESRCH when the zone's VM is not known. */
#ifndef ENOENT
#define ENOENT 2 /* errno values (vmlinux.h has none) */
#define ESRCH 3
#define ENOSPC 28
#endif

SEC("syscall")
int nupp_smp_proc_set(struct nupp_smp_proc_set *a)
{
	struct nupp_smp_proc *p;
	__u32 tgid = a->tgid, nvm = a->nvm, i, j, n;
	int ret = 0;

	p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p)
		return -ENOENT;
	if (a->set_layout && !p->layout_ok) {
		__builtin_memcpy(&p->lo, &a->lo, sizeof(p->lo));
		p->layout_ok = 1;
	}
	/* Unrolled: the context takes constant offsets only. */
#pragma unroll
	for (i = 0; i < NUPP_SMP_MAX_VMS; i++) {
		__u64 g = a->g[i];
		__u8 fc = a->fc_ok[i];

		if (i >= nvm)
			break;
		n = p->nvm;
		for (j = 0; j < NUPP_SMP_MAX_VMS; j++) {
			if (j >= n || p->g[j] == g)
				break;
		}
		if (j >= n || j >= NUPP_SMP_MAX_VMS) {
			j = __sync_fetch_and_add(&p->nvm, 1);
			if (j >= NUPP_SMP_MAX_VMS) {
				__sync_fetch_and_add(&p->nvm, -1);
				ret = -ENOSPC;
				continue;
			}
			if (fc)
				p->fc_ok[j & (NUPP_SMP_MAX_VMS - 1)] = 1;
			p->g[j & (NUPP_SMP_MAX_VMS - 1)] = g;
		} else if (fc) {
			p->fc_ok[j & (NUPP_SMP_MAX_VMS - 1)] = 1;
		}
	}
	if (a->set_zone) {
		__u64 zg = a->zone_g, za = a->zone_addr;

		n = p->nvm;
		for (j = 0; j < NUPP_SMP_MAX_VMS; j++) {
			if (j >= n)
				break;
			if (p->g[j] == zg) {
				p->zone_addr[j] = za;
				return ret;
			}
		}
		ret = -ESRCH;
	}
	return ret;
}

/* -- Prototype frees (USDT) ------------------------------------------------------- */

/* Prototype watch and free (smp_proto_watch, smp_pfree_one). */
#include "sampler/proto.h"

/* luajit:proto_free(g, pts, n): n prototypes of VM g die, their addresses at pts[0..n)
 * (a batch: the VM frees them after this probe). */
SEC("usdt")
int nupp_smp_proto_free(struct pt_regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, zero = 0;
	struct nupp_smp_proc *p = bpf_map_lookup_elem(&procs, &tgid);
	struct smp_pfree_ctx c = { .tgid = tgid };
	long g = 0, pts = 0, n = 0;

	if (!p)
		return 0;
	/* No layout yet: no sample of the process can exist, so no generation is needed
	 * (and user/core/sampler_attach.c writes this entry whole when it sets the layout). */
	if (!p->layout_ok) {
		__sync_fetch_and_add(&fc_epoch, 1);
		return 0;
	}
	c.p = p;
	c.b = bpf_map_lookup_elem(&proto_buf, &zero);
	if (!c.b || bpf_usdt_arg(ctx, 0, &g) || bpf_usdt_arg(ctx, 1, &pts) || bpf_usdt_arg(ctx, 2, &n) ||
	    n <= 0 || n > NUPP_LJ_PROTO_FREE_MAX)
		goto lost;
	c.g = (__u64)g;
	c.pts = (__u64)pts;
	__sync_fetch_and_add(&pdead, (__u64)n);
	bpf_loop((__u32)n, smp_pfree_one, &c, 0);
	return 0;
lost:
	/* Which prototypes died is unknown: every frame cache entry goes (a new epoch) and
	 * userspace starts over. */
	__sync_fetch_and_add(&fc_epoch, 1);
	__sync_fetch_and_add(&p->nlost, 1);
	return 0;
}

/* Trace copies (smp_trace_copy_send): the last part, used by record.h's smp_trace_seen. */
#include "sampler/trace_copy.h"

/* -- Forks ---------------------------------------------------------------------- */

/* A profiled process forked a child that is profiled too: the child runs its parent's
 * VMs at the same addresses (its memory is a copy), so it takes a copy of the parent's
 * VMs, layout and zone slots and is sampled from its first instruction, before
 * userspace hears of it. Its prototype history starts afresh, as a process's added by
 * userspace does (generation 0, no free met, none lost): its names are read from its own
 * memory, by a symbolizer that knows nothing of the parent's. Frame cache entries of an
 * earlier process with the child's tgid die. */
static __always_inline void smp_on_fork(__u32 ptgid, __u32 ctgid)
{
	struct nupp_smp_proc *p = bpf_map_lookup_elem(&procs, &ptgid), *c;

	if (!p || bpf_map_update_elem(&procs, &ctgid, p, BPF_NOEXIST))
		return;
	c = bpf_map_lookup_elem(&procs, &ctgid);
	if (c) {
		c->pgen = 0;
		c->pfrees = 0;
		c->nlost = 0;
	}
	__sync_fetch_and_add(&fc_epoch, 1);
}

/* A sampled process execs: the VMs and layout of its old program are gone with its
 * memory. The entry stays, empty, so the new program's VMs are recorded as they open
 * (luajit:vm_open), as for a command that execs our LuaJIT. */
static __always_inline void smp_on_exec(__u32 tgid)
{
	struct nupp_smp_proc *p = bpf_map_lookup_elem(&procs, &tgid);
	__u32 i;

	if (!p)
		return;
	p->nvm = 0;
	p->layout_ok = 0;
	for (i = 0; i < NUPP_SMP_MAX_VMS; i++) {
		p->g[i] = 0;
		p->fc_ok[i] = 0;
		p->zone_addr[i] = 0;
	}
	__sync_fetch_and_add(&fc_epoch, 1);
}
