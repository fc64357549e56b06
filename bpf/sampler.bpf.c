// SPDX-License-Identifier: GPL-2.0
/* The sampler channel: CPU-clock perf_event samples of LuaJIT stacks and VM states,
 * aggregated in the kernel per (tgid, thread, zone, stack); VM lifetime and the frees of
 * prototypes met by samples from USDT; each trace copied, and each prototype watched,
 * at its first sample. */
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

#define NUPP_WALK_READ(dst, sz, addr) bpf_probe_read_user((dst), (sz), (const void *)(unsigned long)(addr))
/* The walker's frame cache: 16384 x 64 bytes per CPU, 2 ways a set, each CPU's in a row
 * of one array map (smp_fc_entry). */
#define NUPP_WALK_FC NUPP_SMP_FC_ENTRIES
#define NUPP_WALK_FC_ENTRY(w, i) smp_fc_entry(i)
#define NUPP_WALK_FNC NUPP_SMP_FNC_ENTRIES
#define NUPP_WALK_FNC_ENTRY(w, i) smp_fnc_entry(i)
struct nupp_walk_fc;
static __always_inline struct nupp_walk_fc *smp_fc_entry(__u32 i);
static __always_inline struct nupp_walk_fc *smp_fnc_entry(__u32 i);
/* The free generations of target memory blocks: global data, bumped by luajit:proto_free
 * (of a prototype met) on the freeing CPU, read by every CPU's walks (all processes
 * share it). */
#define NUPP_WALK_PGEN 16384
#define NUPP_WALK_PGEN_AT(w, i) (*(volatile __u32 *)&pfree_gen[(i) & (NUPP_WALK_PGEN - 1)])
__u32 pfree_gen[NUPP_WALK_PGEN];
/* The prototypes of a walk's frames are noted, to be watched once the walk gave a stack
 * (smp_walk_settle), so their frees are reported. */
#define NUPP_WALK_WATCH 1
/* The CALL before a return PC, from the frame cache or read, and a function's facts kept
 * in the frame cache, by global functions (on this CPU's walk, whose memo entry of the
 * function is m). */
#define NUPP_WALK_CALL_INS(w, lo, pc, ins) smp_walk_call_ins(pc, ins)
#define NUPP_WALK_FC_CALL_INS(w, tag, pc, ins) smp_walk_fc_call_ins(tag, pc, ins)
#define NUPP_WALK_FC_FN_GET(w, fn, m) smp_walk_fc_fn_get(fn)
#define NUPP_WALK_FC_FN_FILL(w, fn, m) smp_walk_fc_fn_fill(fn)
/* What a step uses of a function (nupp_walk_func), by a global function: its memo entry. */
#define NUPP_WALK_FUNC(w, lo, fn, out) (*(out) = &(w)->fns[nupp_walk_slot(fn)], smp_walk_func(fn))
__noinline int smp_walk_call_ins(__u64 pc, __u32 *ins);
__noinline int smp_walk_fc_call_ins(__u64 tag, __u64 pc, __u32 *ins);
__noinline int smp_walk_fc_fn_get(__u64 fn);
__noinline int smp_walk_fc_fn_fill(__u64 fn);
__noinline int smp_walk_func(__u64 fn);
/* The repeat and cache-hit loops of a step, by global functions of this CPU's walk. */
#define NUPP_WALK_REPEAT_RUN(w) smp_walk_repeat()
#define NUPP_WALK_CACHED_RUN(w, lo) smp_walk_cached()
#define NUPP_WALK_CFRAME_RUN(w, lo) smp_walk_cframe()
__noinline int smp_walk_repeat(void);
__noinline int smp_walk_cached(void);
__noinline int smp_walk_cframe(void);
#include "nupp/walk.h"
#include "nupp/zone_abi.h"

/* CPUs with a frame cache: CPU c's entries are fcache[c * NUPP_WALK_FC ...]; userspace
 * sets it, and fcache's max_entries to fc_ncpu * NUPP_WALK_FC, before load. A plain array,
 * not a per-CPU one: an entry is one address computation away, where a per-CPU array
 * reads a per-CPU pointer first (a walk through functions met in no order touches twice
 * the memory, tests/bench/bench_floor.sh lkr32 against lka32). */
const volatile __u32 fc_ncpu = 1;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NUPP_WALK_FC); /* fc_ncpu * NUPP_WALK_FC, set at load */
	__type(key, __u32);
	__type(value, struct nupp_walk_fc);
} fcache SEC(".maps");

/* The function caches, laid out as the frame caches (NUPP_WALK_FNC each). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NUPP_WALK_FNC); /* fc_ncpu * NUPP_WALK_FNC, set at load */
	__type(key, __u32);
	__type(value, struct nupp_walk_fc);
} fncache SEC(".maps");

/* Entry i of this CPU's part of cache map (n entries a CPU, a power of two), or 0 (a
 * CPU without one caches nothing). No sample runs inside another on one CPU (perf_event
 * programs do not nest), so a CPU's entries are only ever written by one walk at a time,
 * as a per-CPU map's would be. */
static __always_inline struct nupp_walk_fc *smp_cache_entry(void *map, __u32 n, __u32 i)
{
	__u32 cpu = bpf_get_smp_processor_id(), k;

	if (cpu >= fc_ncpu)
		return 0;
	k = cpu * n + (i & (n - 1));
	return bpf_map_lookup_elem(map, &k);
}

/* Entry i of this CPU's frame cache, or 0. */
static __always_inline struct nupp_walk_fc *smp_fc_entry(__u32 i)
{
	return smp_cache_entry(&fcache, NUPP_WALK_FC, i);
}

/* Entry i of this CPU's function cache, or 0. */
static __always_inline struct nupp_walk_fc *smp_fnc_entry(__u32 i)
{
	return smp_cache_entry(&fncache, NUPP_WALK_FNC, i);
}

char LICENSE[] SEC("license") = "GPL";

/* -- Knobs (rodata, set between open and load) and state ----------------------- */

const volatile __u32 max_depth = NUPP_SMP_DEFAULT_DEPTH; /* frames per stack */
int paused = 0;                                          /* pause flag: one test per sample */
/* Buffer epoch: samples count into the maps of buffer (epoch & 1); userspace bumps it. */
__u64 epoch = 0;
/* Per-CPU in-flight markers: odd while a sample runs on the CPU (one cache line each).
 * A sample marks itself before it reads the epoch, userspace reads the marks after it
 * bumps it (both with full barriers): a CPU not marked has no sample of the old buffer. */
struct nupp_smp_inflight inflight[NUPP_SMP_MAX_CPUS] __attribute__((aligned(64))) = {};
/* Frame cache epoch: bumped by every VM opened or closed, by userspace when it adds a
 * process; part of every cache entry's tag (a prototype freed bumps pfree_gen). */
__u64 fc_epoch = 1;
/* Outcomes of the trace copies made at a trace's first sample (enum nupp_smp_tcopy). */
__u64 tcopy[NUPP_SMP_TC_N] = {};
/* Prototypes watched (smp_proto_watch), and frees of watched prototypes reported. */
__u64 pwatched = 0, pfreed = 0;
/* Prototypes luajit:proto_free reported dead (watched or not). */
__u64 pdead = 0;
/* Host keys created in each buffer since userspace last emptied it (none: the drain
 * skips the hosts map). */
__u64 hnew[NUPP_SMP_NBUF] = {};
_Static_assert((NUPP_SMP_TC_N & (NUPP_SMP_TC_N - 1)) == 0, "tcopy[] is indexed by a mask");

/* -- Maps (sizes set at run time by user/core/sampler.c) ------------------------------ */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NUPP_SMP_MAX_TARGETS);
	__type(key, __u32); /* tgid */
	__type(value, struct nupp_smp_proc);
} procs SEC(".maps");

/* A thread's own stack: the mapping that held its SP, for the proof that a VM's C frame
 * lies on it (bpf_find_vma once per thread, again when SP leaves it). */
struct smp_tstack {
	__u64 start, end; /* the mapping [start, end) */
	__u64 born;       /* the task's start_time: a reused tid is another thread */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NUPP_SMP_MAX_THREADS);
	__type(key, __u32); /* tid */
	__type(value, struct smp_tstack);
} tstacks SEC(".maps");

/* Per-CPU scratch: the walk state (with its stack) and a copy of the layout. */
#define SMP_WC 256 /* entries of a CPU's cache of prototypes watched (power of two) */

struct smp_scratch {
	struct nupp_walk w;
	struct nupp_lj_layout lo;
	__u32 lo_tgid; /* process whose layout lo is */
	__u32 met_tgid; /* the sample's process, VM and prototype generation (smp_walk_settle) */
	__u64 met_g, met_pgen;
	/* Prototypes this CPU watched lately (smp_walk_settle), direct-mapped: a prototype
	 * is still watched while the free generation of its block is the one it had then
	 * (its free, reported, bumps it), so a frame read again costs no lookup of pseen. */
	__u64 wc_pt[SMP_WC];
	__u32 wc_tgid[SMP_WC], wc_gen[SMP_WC];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct smp_scratch);
} scratch SEC(".maps");
/* A per-CPU map's value is at most 32 KB (the kernel's PCPU_MIN_UNIT_SIZE). */
_Static_assert(sizeof(struct smp_scratch) <= 32768, "the per-CPU scratch must fit a per-CPU value");

/* Stacks sent (by hash: a mark; the stacks go on stk_ring) and host samples (by IP) of
 * both buffers, counts of each buffer in a map of its own (counts0, counts1:
 * userspace takes a whole map, walking its buckets once; two maps named in two branches,
 * not a map of maps, whose slots the kernel fills with an RCU grace period each): every
 * key carries its buffer (NUPP_SMP_*_BUF). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u32); /* NUPP_SMP_STACK_SENT */
} stacks SEC(".maps");

/* The stacks themselves (struct nupp_smp_stack_rec, up to their depth), sent once per
 * buffer: a copy of the frames used, not of a value as large as the deepest stack, and
 * userspace takes them from the ring without a lookup each. No wakeups: userspace empties
 * the ring at each drain (its size, set at load, holds a second of new stacks). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 * 1024 * 1024);
} stk_ring SEC(".maps");

_Static_assert(__builtin_offsetof(struct nupp_walk, st) == __builtin_offsetof(struct nupp_walk, st_key) + 8,
	       "a stack record is st_key then st");
_Static_assert(sizeof(struct nupp_smp_stack_rec) == 8 + sizeof(struct nupp_smp_stack), "stack record size");

struct smp_counts_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct nupp_smp_count_key);
	__type(value, struct nupp_smp_count);
} counts0 SEC(".maps"), counts1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct nupp_smp_host_key);
	__type(value, __u64);
} hosts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NUPP_SMP_NBUF * NUPP_SMP_LOST_N); /* [buffer][reason] */
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* Lifetime events; prototype frees carry up to 16 KB each, and a module's prototypes die
 * together (all of them at lua_close). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 * 1024 * 1024);
} events SEC(".maps");

/* Per-CPU scratch of a prototype event: header and data, sent with its real size. */
struct smp_proto_buf {
	struct nupp_smp_proto_event h;
	__u8 data[NUPP_SMP_PT_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct smp_proto_buf);
} proto_buf SEC(".maps");

/* Per-CPU scratch of a prototype watched by a sample (smp_proto_watch): its own, since a
 * sample can interrupt luajit:proto_free's program on the CPU (uprobe programs do not
 * keep perf_event programs out), whose event is being built in proto_buf. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct smp_proto_buf);
} seen_buf SEC(".maps");

/* What the walks did (enum nupp_smp_wstat), per CPU: for diagnosis. */
struct smp_wstat {
	__u64 v[NUPP_SMP_WS_N];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct smp_wstat);
} wstat SEC(".maps");

/* Keep what walks read of functions (the function cache): off only in the benchmarks,
 * which compare the two on one process at once. */
const volatile __u32 fn_cache = 1;

/* Time the walk and the store of every sample (bpf_ktime_get_ns, 3 reads a sample)
 * into wstat: set by the benchmarks only. */
const volatile __u32 time_stats = 0;

/* Samples lost in the walk, by (mode, walker source line): for diagnosis. A hash that
 * holds only the places that lost a sample (creating 16,384 per-CPU counters took 12-17 ms
 * of every start, and reading them copied them all). */
#define SMP_WHERE_MAX 4096
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SMP_WHERE_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32); /* (mode, iter > 0, walker line < 2048) */
	__type(value, __u64);
} lost_where SEC(".maps");

/* Traces copied at a sample (smp_trace_seen): one copy per incarnation of a trace, by
 * whichever CPU samples it first; the least recently used are forgotten (a trace sampled
 * again after that is copied again, which userspace takes as the same). */
struct smp_tcopied_key {
	__u64 T;      /* GCtrace* */
	__u32 tgid;
	__u32 serial; /* its serial: another trace at T has another */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384); /* preallocated: 1.3 MB */
	__type(key, struct smp_tcopied_key);
	__type(value, __u32);
} tcopied SEC(".maps");

/* Prototypes watched: those a sample or a trace copy has met (a sample's frame, a
 * trace's function) since they were made. luajit:proto_free reports the free of a
 * watched prototype only (with its copy and a new generation): userspace can only hold
 * names of prototypes met, and a prototype no sample met costs its free a read of
 * pseen_n. A prototype is watched from the first sample that names it (before it is
 * counted) until its free. (The entries of a process that exits without freeing its
 * prototypes stay: a later process with its PID misses the names of the prototypes at
 * those addresses sent at first samples, and is named while alive.) Preallocated: a
 * trace copy watches its functions in one run of the program, more than a map
 * allocating as it goes can give it (its per-CPU cache refills between runs). */
struct smp_pseen_key {
	__u32 tgid;
	__u32 pad;
	__u64 pt; /* GCproto* */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NUPP_SMP_PSEEN_MAX);
	__type(key, struct smp_pseen_key);
	__type(value, __u8);
} pseen SEC(".maps");

/* How many watched prototypes hash to each slot (smp_pseen_slot): a free whose slot holds
 * none was of no watched prototype, found without a lookup of pseen (whose buckets span
 * megabytes: one lookup there cost a luajit:proto_free 300 ns, most of it a miss of the
 * TLB and the cache). Small: a slot is one cache line of a few pages. */
#define SMP_PSEEN_SLOTS 1024
__u32 pseen_n[SMP_PSEEN_SLOTS];

static __always_inline __u32 smp_pseen_slot(__u32 tgid, __u64 pt)
{
	return (__u32)((((pt >> 3) ^ tgid) * 0x9e3779b97f4a7c15ull) >> 54) & (SMP_PSEEN_SLOTS - 1);
}

__noinline int smp_trace_copy_send(__u32 tgid, __u64 pgen);
__noinline int smp_proto_watch(__u32 tgid, __u64 g, __u64 pt, __u64 pgen);

/* -- Sampling ------------------------------------------------------------------- */

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

/* Counts a sample of the stack of walk w under key in cm, its buffer's counts map: 0, -1
 * when a map is full, -2 when the stack ring is. */
static __always_inline int smp_count(void *cm, struct nupp_smp_count_key *key, struct nupp_walk *w, __u32 state,
				     struct smp_wstat *ws)
{
	struct nupp_smp_count *c = bpf_map_lookup_elem(cm, key), init = {};
	__u32 sent = NUPP_SMP_STACK_SENT;
	int err;

	if (!c) {
		err = bpf_map_update_elem(&stacks, &key->stack, &sent, BPF_NOEXIST);
		if (err && err != -17 /* EEXIST: sent before */)
			return -1;
		if (!err) {
			/* Sent before its first count (both within this sample, which a drain
			 * waits for): a buffer's counts never name a stack userspace cannot
			 * have. Not sent: not marked sent either (another CPU's sample of it
			 * in between is counted, and lost unnamed at the drain). */
			w->st_key = key->stack;
			if (smp_stack_send(w)) {
				bpf_map_delete_elem(&stacks, &key->stack);
				return -2;
			}
			if (ws)
				ws->v[NUPP_SMP_WS_NEWSTACK]++;
		}
		/* A new count is created holding this sample: no lookup after. EEXIST (a
		 * racing CPU created it) adds to it below; a full map fails the lookup. */
		if (state < NUPP_SMP_NSTATES)
			init.n[state] = 1;
		if (bpf_map_update_elem(cm, key, &init, BPF_NOEXIST) == 0) {
			if (ws)
				ws->v[NUPP_SMP_WS_NEWCOUNT]++;
			return 0;
		}
		c = bpf_map_lookup_elem(cm, key);
		if (!c)
			return -1;
	}
	if (state < NUPP_SMP_NSTATES)
		__sync_fetch_and_add(&c->n[state], 1);
	return 0;
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
	 * case. A new one is marked sent first, with BPF_NOEXIST: a stack sent already
	 * (another thread's or zone's count, another CPU) fails at once, so it is not looked
	 * up before (a count not found is nearly always a new stack). Each buffer has its
	 * stacks sent for its counts (userspace empties both maps of a buffer together). */
	err = (buf & 1) ? smp_count(&counts1, &key, &s->w, state, ws) : smp_count(&counts0, &key, &s->w, state, ws);
	if (err)
		return smp_lose(buf, err == -2 ? NUPP_SMP_LOST_RING_FULL : NUPP_SMP_LOST_MAP_FULL);
	if (time_stats && ws) {
		ws->v[NUPP_SMP_WS_STORE_NS] += bpf_ktime_get_ns() - t1;
		ws->v[NUPP_SMP_WS_TIMED]++;
	}
	return 0;
}

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

/* Adds one to the free generation of the block that holds GCproto pt: the frame cache
 * entries that name it are dropped (its memory may hold another prototype next). */
static __always_inline void smp_pfree_bump(__u64 pt)
{
	__sync_fetch_and_add(&pfree_gen[nupp_walk_pgen_slot(pt)], 1);
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
 * the frame cache entries that lie in it are dropped (smp_pfree_bump), and its
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
	/* The block's generation first, then the count (both full barriers): a sample
	 * that reads the new count finds the block bumped. */
	smp_pfree_bump(k.pt);
	__sync_fetch_and_add(&p->pfrees, 1);
	gen = __sync_fetch_and_add(&p->pgen, 1) + 1;
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

/* -- Trace copies (at a trace's first sample) --------------------------------------- */

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
	__u8 ir_t, irt_func, irt_type, ir_knull;
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
 * of type IRT_FUNC is noted. Every function of the trace's frames is such a constant
 * (the map scan below keeps only KGC constants), and the trace keeps each one alive. */
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
	if (o == b->ir_kgc && t == b->irt_func) {
		fn = smp_tb_get(b->ev.data, ofs + b->ir_size, NUPP_SMP_TRACE_MAX, 8) & b->gcvmask;
		if (fn)
			smp_tb_add_fn(fn);
		if (b->ev.nfn > NUPP_SMP_TRACE_FNS)
			return 1;
	}
	b->kref = ref + 1 + (((b->irt_is64 >> (t & 31)) & 1) && o != b->ir_knull);
	return 0;
}

/* bpf_loop callback: names function i of the table (its GCfunc header, and for a Lua
 * function its prototype's fingerprint), read now while the trace keeps it alive; entry
 * fn 0 is the trace's start prototype (T->startpt). */
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
