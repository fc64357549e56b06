// SPDX-License-Identifier: GPL-2.0
/* luajit:trace_abort / trace_blacklist consumer: abort rows counted in a kernel hash map. */
/* UAPI headers, not vmlinux.h: nothing here reads a kernel structure, and without CO-RE
 * relocations libbpf need not read the kernel's BTF (5.5 MB) to load this object. */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <stdbool.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "nupp/trace_abi.h"
#include "nupp/severity.h"
#include "nupp/lj_layout.h"
#define NUPP_ZONE_READ(dst, size, addr) bpf_probe_read_user(dst, size, (const void *)(unsigned long)(addr))
#include "nupp/zone_abi.h"
#include "nupp/follow_abi.h"

char LICENSE[] SEC("license") = "GPL";

/* Set between open and load. */
const volatile bool include_benign = false;

/* Toggled by userspace at any time (nupp_trace_pause). */
volatile __u32 paused = 0;

/* Read and reset by userspace (atomic exchange on the mmaped .bss). */
struct nupp_trace_counters counters = {};

/* Set by userspace (nupp_trace_follow) before the probes are attached to every process
 * of a binary: only the processes tgids says are profiled are counted. */
volatile __u32 filter_tgids = 0;

/* tgid -> enum nupp_follow_value: the process follower's map (bpf/follow.bpf.c), which
 * userspace hands to the follower when it loads it, so a followed child is counted from
 * its fork on, even one that lives a few ms and is gone before userspace knows of it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NUPP_FOLLOW_MAX_PROCS);
	__type(key, __u32);
	__type(value, __u32);
} tgids SEC(".maps");

/* (tgid, severity, err, info, location, zone) -> count; max_entries set at run time. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NUPP_TRACE_MAX_SITES);
	__type(key, struct nupp_trace_key);
	__type(value, __u64);
} aborts SEC(".maps");

/* tgid -> address of the process's luajit_bpf_vmlist, whose zone_tv[i] points to the
 * current zone path id of the VM in slot i (nupp.zone writes it; include/nupp/lj_layout.h).
 * LRU: entries of processes that exited are never deleted, and a followed tree may start
 * more processes than it holds. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} vmlists SEC(".maps");

/* tid -> the trace_blacklist event that the same thread's next trace_abort completes. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NUPP_TRACE_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct nupp_trace_pending);
} pending SEC(".maps");

/* Scratch space: the key (312 bytes) and the payload do not fit the 512-byte stack. */
struct nupp_trace_scratch {
	struct nupp_trace_key key;
	struct nupp_lj_usdt_abort ab;
	__u64 vmg[NUPP_LJ_VMLIST_MAX]; /* the g[] of the process's luajit_bpf_vmlist */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nupp_trace_scratch);
} scratch SEC(".maps");

/* Copies up to NUPP_TRACE_NAME_MAX bytes of a name from the target into l. */
static __always_inline void trace_copy_name(struct nupp_trace_loc *l, __u64 ptr, __u32 len)
{
	__u32 n = len;

	if (n > NUPP_TRACE_NAME_MAX) {
		n = NUPP_TRACE_NAME_MAX;
		l->truncated = 1;
		__sync_fetch_and_add(&counters.truncated, 1);
	}
	l->namelen = n;
	if (n && bpf_probe_read_user(l->name, n & (NUPP_TRACE_NAME_MAX * 2 - 1), (void *)ptr)) {
		__builtin_memset(l->name, 0, NUPP_TRACE_NAME_MAX);
		l->namelen = 0;
		l->kind = 0;
		__sync_fetch_and_add(&counters.read_faults, 1);
	}
}

/* Fills a key location from a payload location: the name bytes are read now, while
 * LuaJIT holds the proto (lj_trace.c trace_abort runs before anything can free it). */
static __always_inline void trace_copy_loc(struct nupp_trace_loc *l, const struct nupp_lj_usdt_loc *u)
{
	l->kind = u->kind;
	l->line = u->line;
	if (u->kind == 'p') {
		l->pt = u->pt; /* lj_debug_pushloc prints "%p:%d" of the proto */
		return;
	}
	trace_copy_name(l, u->name, u->namelen);
}

/* The zone id open in VM g of the process whose luajit_bpf_vmlist is at vl: the slot
 * of g, then the number its zone_tv[] entry points to; 0 when g has no slot or a read
 * fails (counted). */
static __always_inline __u32 trace_zone(__u64 vl, __u64 g, struct nupp_trace_scratch *s)
{
	__u32 i, zone = 0;

	if (bpf_probe_read_user(s->vmg, sizeof(s->vmg), (void *)(vl + __builtin_offsetof(struct nupp_lj_vmlist, g)))) {
		__sync_fetch_and_add(&counters.zone_faults, 1);
		return 0;
	}
	for (i = 0; i < NUPP_LJ_VMLIST_MAX; i++)
		if (s->vmg[i] == g)
			break;
	if (i == NUPP_LJ_VMLIST_MAX)
		return 0;
	if (nupp_zone_read(vl + __builtin_offsetof(struct nupp_lj_vmlist, zone_tv) + i * sizeof(__u64), &zone)) {
		__sync_fetch_and_add(&counters.zone_faults, 1);
		return 0;
	}
	return zone;
}

/* Whether the current process's events are counted (the tgid filter, when it is on);
 * count says whether an event refused is added to counters.not_followed. */
static __always_inline bool trace_followed(__u32 tgid, bool count)
{
	__u32 *v;

	if (!filter_tgids)
		return true;
	v = bpf_map_lookup_elem(&tgids, &tgid);
	if (v && *v == NUPP_FOLLOW_PROFILED)
		return true;
	if (count)
		__sync_fetch_and_add(&counters.not_followed, 1);
	return false;
}

/* Adds one to the row of key; a full map is counted, never silent. */
static __always_inline void trace_count(struct nupp_trace_key *key)
{
	__u64 one = 1, *v;
	long err;

	v = bpf_map_lookup_elem(&aborts, key);
	if (v) {
		__sync_fetch_and_add(v, 1);
		return;
	}
	err = bpf_map_update_elem(&aborts, key, &one, BPF_NOEXIST);
	if (err == -EEXIST) {
		v = bpf_map_lookup_elem(&aborts, key);
		if (v)
			__sync_fetch_and_add(v, 1);
	} else if (err) {
		__sync_fetch_and_add(&counters.map_full, 1);
	}
}

/* luajit:vm_open(g, L, &luajit_bpf_layout): where the process's zone ids are, from its
 * first VM on, so its first aborts get their zone before userspace has looked. The cookie
 * is the distance from luajit_bpf_layout to luajit_bpf_vmlist in the same ELF object. */
SEC("usdt")
int BPF_USDT(trace_vm_open, __u64 g, __u64 L, __u64 layout)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__s64 delta = (__s64)bpf_usdt_cookie(ctx);
	__u64 vl;

	if (!delta)
		return 0;
	/* A VM opened is not an event of the abort table: not counted when refused. */
	if (!trace_followed(tgid, false))
		return 0;
	/* The image that opens a VM is the current one (an exec replaces any earlier). */
	vl = layout + (__u64)delta;
	bpf_map_update_elem(&vmlists, &tgid, &vl, BPF_ANY);
	return 0;
}

/* luajit:trace_blacklist(g, LJ_USDTLoc *start, err, opcode, penalty): fires in penalty_pc
 * just before blacklist_pc, and trace_abort(action 2) follows on the same thread
 * (lj_trace.c trace_abort -> penalty_pc). The row is counted once, by that abort. */
SEC("usdt")
int BPF_USDT(trace_blacklist, __u64 g, __u64 locp, __s32 err, __u32 op, __u32 val)
{
	struct nupp_lj_usdt_loc loc;
	struct nupp_trace_pending p = {};
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;

	if (!trace_followed(id >> 32, true))
		return 0;
	if (paused) {
		__sync_fetch_and_add(&counters.paused, 1);
		return 0;
	}
	__sync_fetch_and_add(&counters.blacklist_events, 1);
	if (bpf_probe_read_user(&loc, sizeof(loc), (void *)locp) == 0) {
		p.pt = loc.pt;
		p.pos = loc.pos;
	}
	p.err = err;
	if (bpf_map_update_elem(&pending, &tid, &p, BPF_ANY))
		__sync_fetch_and_add(&counters.bl_unmatched, 1);
	return 0;
}

/* luajit:trace_abort(g, traceno, err, info, action, LJ_USDTAbort *), after the penalty
 * block of lj_trace.c trace_abort and before its "abort" vmevent; also attached to
 * luajit:trace_abort_benign (the same arguments, fired instead for an abort of ordinary
 * trace formation) when those are counted (include_benign). */
SEC("usdt")
int BPF_USDT(trace_abort, __u64 g, __u32 traceno, __s32 err, __s32 info, __u32 action, __u64 abp)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32, zero = 0;
	struct nupp_trace_pending *p;
	struct nupp_trace_scratch *s;
	struct nupp_trace_key *k;
	__u64 *zaddr;
	__u8 sev;

	if (!trace_followed(tgid, true))
		return 0;
	/* Complete (or refute) a blacklist event of this thread first, paused or not. */
	p = bpf_map_lookup_elem(&pending, &tid);
	if (p) {
		bpf_map_delete_elem(&pending, &tid);
		if (action != NUPP_LJ_ACT_BLACKLIST)
			__sync_fetch_and_add(&counters.bl_unmatched, 1);
	} else if (action == NUPP_LJ_ACT_BLACKLIST && !paused) {
		__sync_fetch_and_add(&counters.bl_unmatched, 1);
	}
	if (paused) {
		__sync_fetch_and_add(&counters.paused, 1);
		return 0;
	}
	/* LuaJIT sends the "abort" vmevent only when a trace number was allocated
	 * (lj_trace.c trace_abort: "if (traceno)"): count what jit.attach sees. */
	if (traceno == 0) {
		__sync_fetch_and_add(&counters.unreported, 1);
		return 0;
	}
	sev = nupp_severity_of(err, action);
	if (sev == NUPP_TRACE_SEV_INFO && !include_benign) {
		__sync_fetch_and_add(&counters.benign_skipped, 1);
		return 0;
	}
	__sync_fetch_and_add(&counters.total_aborts, 1);
	if (sev == NUPP_TRACE_SEV_BLACKLIST)
		__sync_fetch_and_add(&counters.blacklisted, 1);

	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	k = &s->key;
	__builtin_memset(k, 0, sizeof(*k));
	k->tgid = tgid;
	k->err = err;
	k->severity = sev;
	zaddr = bpf_map_lookup_elem(&vmlists, &tgid);
	if (zaddr && *zaddr)
		k->zone = trace_zone(*zaddr, g, s);
	if (bpf_probe_read_user(&s->ab, sizeof(s->ab), (void *)abp)) {
		/* No location or info: counted as a row with an empty location. */
		__sync_fetch_and_add(&counters.read_faults, 1);
		trace_count(k);
		return 0;
	}
	trace_copy_loc(&k->loc, &s->ab.abort);
	if (s->ab.errstr) {
		/* A string error object: the reason is the string (jit/v.lua fmterr). */
		k->info_kind = NUPP_LJ_INFO_ERRSTR;
		k->aux.kind = '"';
		trace_copy_name(&k->aux, s->ab.errstr, s->ab.errstrlen);
	} else if (nupp_severity_takes_info(err)) {
		k->info_kind = s->ab.info_kind;
		if (s->ab.info_kind == NUPP_LJ_INFO_LUAFUNC)
			trace_copy_loc(&k->aux, &s->ab.infoloc);
		else
			k->info = s->ab.info;
	}
	trace_count(k);
	return 0;
}
