/* The frame walker (include/nupp/walk.h) as the sampler compiles it: the hooks it is built
 * with (user-memory reads, the frame and function caches, the free generations of
 * prototype blocks, the global functions of walk_driver.h that run a step's loops), the
 * walker itself, and the cache maps its hooks index, one row per CPU (fcache, fncache).
 * Owns fc_ncpu, fcache, fncache and pfree_gen (bumped only by a watched prototype's free,
 * proto.h). Runs no walk and counts no sample: walk_driver.h and record.h do. The first
 * part, after vmlinux.h, the libbpf headers and nupp/sampler_abi.h. */
#ifndef NUPP_BPF_SAMPLER_WALKER_H
#define NUPP_BPF_SAMPLER_WALKER_H

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

#endif /* NUPP_BPF_SAMPLER_WALKER_H */
