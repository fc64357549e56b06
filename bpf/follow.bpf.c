// SPDX-License-Identifier: GPL-2.0
/* The process follower: tells userspace, as it happens, when a followed process forks a
 * child (which is followed from that instant, in the kernel) or execs a new program, so
 * a session attaches to a wrapper's or a command's LuaJIT as it starts. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "nupp/follow_abi.h"

char LICENSE[] SEC("license") = "GPL";

/* Whether a child of a profiled process is profiled too (record --subprocesses); else
 * it is only watched. Set between open and load. */
const volatile bool subprocesses = false;

/* Events lost because the ring buffer was full (read by userspace). */
__u64 lost = 0;

/* tgid -> enum nupp_follow_value: the processes followed (the command, and every
 * descendant of it). The trace channel shares this map as its tgid filter, so a child is
 * in it from its fork on, before userspace has heard of it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NUPP_FOLLOW_MAX_PROCS);
	__type(key, __u32);
	__type(value, __u32);
} followed SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* Sends one event; a full ring buffer is counted. */
static __always_inline struct nupp_follow_event *follow_reserve(__u32 kind, __u32 pid, __u32 ppid)
{
	struct nupp_follow_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&lost, 1);
		return NULL;
	}
	e->kind = kind;
	e->pid = pid;
	e->ppid = ppid;
	e->pad = 0;
	e->path[0] = 0;
	return e;
}

/* A new task: a child process of a followed process is followed too. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(nupp_follow_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid, value;
	struct nupp_follow_event *e;
	__u32 *pv;

	if (ctgid == ptgid)
		return 0; /* a thread */
	pv = bpf_map_lookup_elem(&followed, &ptgid);
	if (!pv)
		return 0; /* not ours */
	value = subprocesses ? *pv : NUPP_FOLLOW_WATCHED;
	bpf_map_update_elem(&followed, &ctgid, &value, BPF_ANY);
	e = follow_reserve(NUPP_FOLLOW_FORK, ctgid, ptgid);
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

	if (!bpf_map_lookup_elem(&followed, &tgid))
		return 0;
	e = follow_reserve(NUPP_FOLLOW_EXEC, tgid, 0);
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

	if (p->pid != p->tgid || !bpf_map_lookup_elem(&followed, &tgid))
		return 0;
	bpf_map_delete_elem(&followed, &tgid);
	e = follow_reserve(NUPP_FOLLOW_EXIT, tgid, 0);
	if (e)
		bpf_ringbuf_submit(e, 0);
	return 0;
}
