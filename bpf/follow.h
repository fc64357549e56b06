/* The process follower's maps and programs: they tell userspace, as it happens, when a
 * followed process forks a child (which is followed from that instant, in the kernel) or
 * execs a new program, so a session attaches to a wrapper's or a command's LuaJIT as it
 * starts. Built into the sampler's object (one read of the kernel's BTF for both, a
 * sampler that follows) and into follow.bpf.c alone (a session without the sampler).
 * Includer: vmlinux.h, bpf_helpers.h and bpf_tracing.h first. */
#ifndef NUPP_BPF_FOLLOW_H
#define NUPP_BPF_FOLLOW_H

#include <bpf/bpf_core_read.h>

#include "nupp/follow_abi.h"

/* Whether a child of a profiled process is profiled too (record --subprocesses); else
 * it is only watched. Set by userspace before the programs are attached. */
volatile __u32 fol_subprocesses = 0;

/* Events lost because the ring buffer was full. */
__u64 fol_lost = 0;

/* tgid -> enum nupp_follow_value: the processes followed (the command, and every
 * descendant of it). The trace channel shares this map as its tgid filter, so a child is
 * in it from its fork on, before userspace has heard of it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NUPP_FOLLOW_MAX_PROCS);
	__type(key, __u32);
	__type(value, __u32);
} fol_followed SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} fol_events SEC(".maps");

/* Sends one event; a full ring buffer is counted. */
static __always_inline struct nupp_follow_event *fol_reserve(__u32 kind, __u32 pid, __u32 ppid)
{
	struct nupp_follow_event *e = bpf_ringbuf_reserve(&fol_events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&fol_lost, 1);
		return NULL;
	}
	e->kind = kind;
	e->pid = pid;
	e->ppid = ppid;
	e->pad = 0;
	e->path[0] = 0;
	return e;
}

/* An includer that samples processes defines NUPP_FOLLOW_FORK_HOOK(ptgid, ctgid): called
 * when a profiled child is forked, before the child runs, so it is sampled from its
 * first instruction. */
#ifdef NUPP_FOLLOW_FORK_HOOK
static __always_inline void NUPP_FOLLOW_FORK_HOOK(__u32 ptgid, __u32 ctgid);
#endif
/* ... and NUPP_FOLLOW_EXEC_HOOK(tgid): called when a followed process execs, before the
 * new program runs (what it knew of the old program's memory is void). */
#ifdef NUPP_FOLLOW_EXEC_HOOK
static __always_inline void NUPP_FOLLOW_EXEC_HOOK(__u32 tgid);
#endif

/* A new task: a child process of a followed process is followed too. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(nupp_follow_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid, value;
	struct nupp_follow_event *e;
	__u32 *pv;

	if (ctgid == ptgid)
		return 0; /* a thread */
	pv = bpf_map_lookup_elem(&fol_followed, &ptgid);
	if (!pv)
		return 0; /* not ours */
	value = fol_subprocesses ? *pv : NUPP_FOLLOW_WATCHED;
	bpf_map_update_elem(&fol_followed, &ctgid, &value, BPF_ANY);
#ifdef NUPP_FOLLOW_FORK_HOOK
	if (value == NUPP_FOLLOW_PROFILED)
		NUPP_FOLLOW_FORK_HOOK(ptgid, ctgid);
#endif
	e = fol_reserve(NUPP_FOLLOW_FORK, ctgid, ptgid);
	if (e)
		bpf_ringbuf_submit(e, 0);
	return 0;
}

/* A followed process runs a new program. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(nupp_follow_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	struct nupp_follow_event *e;

	if (!bpf_map_lookup_elem(&fol_followed, &tgid))
		return 0;
#ifdef NUPP_FOLLOW_EXEC_HOOK
	NUPP_FOLLOW_EXEC_HOOK(tgid);
#endif
	e = fol_reserve(NUPP_FOLLOW_EXEC, tgid, 0);
	if (!e)
		return 0;
	bpf_probe_read_kernel_str(e->path, sizeof(e->path), BPF_CORE_READ(bprm, filename));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* A followed process is gone (its group leader exits last of its threads here). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(nupp_follow_exit, struct task_struct *p)
{
	__u32 tgid = p->tgid;
	struct nupp_follow_event *e;

	if (p->pid != p->tgid || !bpf_map_lookup_elem(&fol_followed, &tgid))
		return 0;
	bpf_map_delete_elem(&fol_followed, &tgid);
	e = fol_reserve(NUPP_FOLLOW_EXIT, tgid, 0);
	if (e)
		bpf_ringbuf_submit(e, 0);
	return 0;
}

#endif /* NUPP_BPF_FOLLOW_H */
