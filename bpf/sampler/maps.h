/* The sampler's knobs, counters and shared maps: what userspace sets between open and
 * load (rodata), the buffer epoch and in-flight marks of the drain's handshake, the
 * counters it reads, and every map but the walker's caches (walker.h) and the trace
 * copy's scratch (trace_copy.h). Definitions only, each saying which part writes it; no
 * code but the hash of pseen_n's slots. */
#ifndef NUPP_BPF_SAMPLER_MAPS_H
#define NUPP_BPF_SAMPLER_MAPS_H

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

/* Stacks sent (a mark of each in a direct-mapped array, nupp_smp_stack_slot; the stacks
 * go on stk_ring) and host samples (by IP) of both buffers, counts of each buffer in a map
 * of its own (counts0, counts1: userspace takes a whole map, walking its buckets once; two
 * maps named in two branches, not a map of maps, whose slots the kernel fills with an RCU
 * grace period each): every key carries its buffer (NUPP_SMP_*_BUF). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 2 * 32768); /* set at load: 2 x stk_slots */
	__type(key, __u32);
	__type(value, __u64); /* the key of the stack sent, 0: none (nupp_smp_stack_slot) */
} stacks SEC(".maps");

/* Slots of the stacks map per buffer (nupp_smp_stack_slots), set at load. */
const volatile __u32 stk_slots = 32768;

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

#endif /* NUPP_BPF_SAMPLER_MAPS_H */
