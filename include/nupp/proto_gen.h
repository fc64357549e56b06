/* The prototype free/generation protocol: what a free of a GCproto changes, in which
 * order, and which samples each incarnation of a prototype address covers. The one place
 * that states it; BPF (bpf/sampler/proto.h, the walker's frame cache) and the host (the
 * symbolizer's prototype ledger, user/core/symbolize_ledger.c) both call these functions.
 * Fixed-width types; compiles as BPF and host C. Touches no map and no target memory.
 *
 * The counters, per process (struct nupp_smp_proc) and per block of target memory:
 *   pgen      the prototype generation: every sample, trace copy and PROTO_NEW carries
 *             the pgen it read; +1 for each free of a prototype a sample or trace copy met
 *             (a watched one). A free of another prototype changes nothing.
 *   pfrees    the same frees, counted for the frame cache tag (nupp_walk_fc_tag).
 *   block     the free generation of the block that holds the GCproto (the walker's
 *             pfree_gen table, nupp_walk_pgen_slot): a frame cache entry is checked
 *             against it, so an entry naming a freed prototype never matches again.
 *
 * A free (luajit:proto_free, before the memory can be reused) bumps the block, then
 * pfrees, then pgen, each a full barrier, so that a walk which reads the new pfrees or
 * pgen finds the block already bumped (nupp_pgen_free). Its PROTO_FREE event carries the
 * new pgen. A free whose event is lost is counted (nlost): the host cannot tell which
 * prototype died at that generation, and refuses the samples up to it.
 *
 * On the host, an incarnation of an address covers the samples of generations [lo, hi):
 * lo is the generation of the first sample (or trace copy) that met it alive, and its
 * free at generation gen ends it at nupp_pgen_end(lo, gen) -- never an empty range, as a
 * sample of generation lo saw it. A sample at generation E saw, for each prototype
 * address of its frames, the incarnation that the first free of that address with a
 * generation > E ended (or the live one). */
#ifndef NUPP_PROTO_GEN_H
#define NUPP_PROTO_GEN_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* A free of a watched prototype: bumps its block's free generation (*block), then the
 * process's count of frees (*pfrees), then its generation (*pgen), in that order, each a
 * full barrier; returns the new generation, which the free's event carries. */
static inline __attribute__((always_inline)) __u64 nupp_pgen_free(__u32 *block, __u64 *pfrees, __u64 *pgen)
{
	__sync_fetch_and_add(block, 1);
	__sync_fetch_and_add(pfrees, 1);
	return __sync_fetch_and_add(pgen, 1) + 1;
}

/* The end (exclusive) of the generations of an incarnation born at lo that a free at
 * generation gen ended: its samples are those of [lo, nupp_pgen_end(lo, gen)). */
static inline __attribute__((always_inline)) __u64 nupp_pgen_end(__u64 lo, __u64 gen)
{
	return gen > lo ? gen : lo + 1;
}

#endif /* NUPP_PROTO_GEN_H */
