/* The sampler channel: perf_event CPU-clock BPF sampling of LuaJIT stacks and VM states. */
#ifndef NUPP_SAMPLER_H
#define NUPP_SAMPLER_H

#include <stdbool.h>
#include <sys/types.h>

#include "nupp/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

struct nupp_sampler;

struct nupp_sampler_opts {
	size_t sz;          /* sizeof(struct nupp_sampler_opts) */
	int freq_hz;        /* samples per second per thread (default 99) */
	int depth;          /* frames per stack (default 64, at most 256); deeper stacks keep
			     * their leaf-most frames under a "[truncated]" root frame */
	bool lines;         /* name Lua frames module:line (current line) instead of module:name */
	__u32 max_stacks;   /* size of the counts map (default 16384) */
	bool full_filenames; /* modules are the chunk's full path, not jit.p's basename */
};

/* Loads the sampler BPF programs and opens one CPU-clock event per online CPU.
 * Nothing is sampled until a target is added. NULL and *err = -errno on failure;
 * nupp_errmsg() says which capability or kernel feature is missing. */
struct nupp_sampler *nupp_sampler_open(const struct nupp_sampler_opts *opts, int *err);

/* Samples every thread of a running process (VMs found with nupp_vm_find). */
int nupp_sampler_add_pid(struct nupp_sampler *s, pid_t pid);

/* Watches an ELF object with our probes (luajit or libluajit.so) for VMs opened by
 * pid (-1: any process), so a process started after this call is sampled from its
 * first instruction once added with nupp_sampler_add_pid (which then may find no VM). */
int nupp_sampler_watch(struct nupp_sampler *s, const char *binary, pid_t pid);

/* Sets where a VM's current zone path id is found: the address of a u64 in the target
 * that points to the Lua number holding the id (its luajit_bpf_vmlist.zone_tv slot,
 * read with nupp_zone_read, include/nupp/zone_abi.h); 0 = no zones, the default. Rows of
 * id 0 get zone path "", others "#<id>" until a zone module names them. 0, or -ENOENT if
 * pid/g is not sampled. */
int nupp_sampler_set_zone_addr(struct nupp_sampler *s, pid_t pid, __u64 g, __u64 zone_addr);

/* Pauses (true) or resumes (false) recording; the timer keeps firing. */
int nupp_sampler_pause(struct nupp_sampler *s, bool paused);

/* Services ring buffers (VM and prototype lifetime events, trace copies) for up to timeout_ms. */
int nupp_sampler_poll(struct nupp_sampler *s, int timeout_ms);

/* Reads the BPF counts, names every frame and adds them to out (rows with zone path
 * and stack, lost counters). Can be called more than once; each call drains. */
int nupp_sampler_drain(struct nupp_sampler *s, struct nupp_sample_set *out);

/* Kernel cost so far: total BPF run time and runs of the sampling program (0 when
 * kernel.bpf_stats_enabled is off). */
int nupp_sampler_stats(struct nupp_sampler *s, __u64 *run_time_ns, __u64 *run_cnt);
/* The same for the prototype lifetime program (luajit:proto_free: one run for a batch of
 * up to NUPP_LJ_PROTO_FREE_MAX prototypes that die). */
int nupp_sampler_proto_stats(struct nupp_sampler *s, __u64 *run_time_ns, __u64 *run_cnt);
/* What became of the copies of traces made at their first samples so far (no probe
 * watches traces: their cost is the sampling program's): counts[i] for outcome i of
 * enum nupp_smp_tcopy (include/nupp/sampler_abi.h: 0 sent with a whole copy, the others
 * why not), i < n; nupp_sampler_tcopy_name(i) names outcome i ("copied", "unwatched",
 * ...; NULL past the last). 0 or -errno. */
int nupp_sampler_trace_copies(struct nupp_sampler *s, __u64 *counts, size_t n);
/* The causes of the samples lost as 'symbolize' so far: why[i] (a static text) lost n[i]
 * samples, i < the count returned (at most max). */
int nupp_sampler_symbolize_causes(struct nupp_sampler *s, const char **why, __u64 *n, int max);
/* Prototypes watched so far (the first sample or trace copy that met each one sent its
 * name; no probe fires when a prototype is made) and the frees of watched prototypes
 * reported (with a copy of each); a prototype no sample met costs its free a read of a
 * counter. */
int nupp_sampler_proto_counts(struct nupp_sampler *s, __u64 *watched, __u64 *freed);
/* Every prototype luajit:proto_free reported dead so far, watched or not. */
int nupp_sampler_proto_dead(struct nupp_sampler *s, __u64 *dead);
const char *nupp_sampler_tcopy_name(int i);

/* What the samples' walks did so far: counts[i] for counter i of enum nupp_smp_wstat
 * (include/nupp/sampler_abi.h: samples walked, frames, frame cache hits, fills, lookups,
 * entries refused by a prototype free, reads of target memory, stacks stored), summed
 * over CPUs, i < n. 0 or -errno. */
int nupp_sampler_walk_stats(struct nupp_sampler *s, __u64 *counts, size_t n);

/* Detaches and frees. */
void nupp_sampler_close(struct nupp_sampler *s);

#ifdef __cplusplus
}
#endif
#endif /* NUPP_SAMPLER_H */
