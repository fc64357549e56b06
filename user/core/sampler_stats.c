/* What the sampler reports about itself: its programs' kernel cost, the outcomes of trace
 * copies and of walks, the prototypes watched and freed (the BPF counters), and where
 * walks failed (the lost_where map, for -v). Changes nothing but lost_where, which it
 * empties as it reports it; none of it is a sample. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "nupp/sampler.h"
#include "nupp_internal.h"
#include "sampler_priv.h"
#include "sampler.skel.h"

/* Reports where walks failed and empties the lost_where map (only the places that lost
 * a sample are in it). */
void smp_lost_where(struct nupp_sampler *s)
{
	int fd = bpf_map__fd(s->skel->maps.lost_where);
	__u32 key, next;
	__u64 n;

	/* Each key read is deleted: the next is looked for from the start again. */
	while (bpf_map_get_next_key(fd, NULL, &next) == 0) {
		key = next;
		if (bpf_map_lookup_elem(fd, &key, &n))
			n = 0;
		if (bpf_map_delete_elem(fd, &key))
			break;
		nupp_pr(NUPP_DEBUG, "walk lost %llu samples: mode %u iter>0 %u, include/nupp/walk_frame.h:%u\n",
			(unsigned long long)n, key >> 12, (key >> 11) & 1, key & 2047);
	}
}

/* Counts n samples lost as 'symbolize' for cause why: the causes are few static texts,
 * told apart by address; past the table's room they share its last slot. */
void smp_sym_lost(struct nupp_sampler *s, const char *why, __u64 n)
{
	int i;

	if (!n)
		return;
	for (i = 0; i < SMP_SYM_CAUSES - 1; i++)
		if (!s->sym_lost[i].why || s->sym_lost[i].why == why)
			break;
	if (i == SMP_SYM_CAUSES - 1 && s->sym_lost[i].why != why)
		why = "other causes";
	s->sym_lost[i].why = why;
	s->sym_lost[i].n += n;
}

int nupp_sampler_symbolize_causes(struct nupp_sampler *s, const char **why, __u64 *n, int max)
{
	int i, k = 0;

	for (i = 0; i < SMP_SYM_CAUSES && k < max; i++)
		if (s->sym_lost[i].why) {
			why[k] = s->sym_lost[i].why;
			n[k++] = s->sym_lost[i].n;
		}
	return k;
}

/* Adds the run time and count of a program. */
static int smp_prog_stats(struct bpf_program *prog, __u64 *run_time_ns, __u64 *run_cnt)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len))
		return -errno;
	*run_time_ns += info.run_time_ns;
	*run_cnt += info.run_cnt;
	return 0;
}

/* Kernel cost so far of the sampling program. */
int nupp_sampler_stats(struct nupp_sampler *s, __u64 *run_time_ns, __u64 *run_cnt)
{
	*run_time_ns = *run_cnt = 0;
	return smp_prog_stats(s->skel->progs.nupp_sample, run_time_ns, run_cnt);
}

/* Kernel cost so far of the prototype lifetime program (luajit:proto_free; a prototype
 * is watched by the sample that meets it first, in the sampling program). */
int nupp_sampler_proto_stats(struct nupp_sampler *s, __u64 *run_time_ns, __u64 *run_cnt)
{
	*run_time_ns = *run_cnt = 0;
	return smp_prog_stats(s->skel->progs.nupp_smp_proto_free, run_time_ns, run_cnt);
}

/* Outcomes of the trace copies made at first samples so far (the BPF tcopy[] counters). */
int nupp_sampler_trace_copies(struct nupp_sampler *s, __u64 *counts, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		counts[i] = i < NUPP_SMP_TC_N ? __atomic_load_n(&s->skel->bss->tcopy[i], __ATOMIC_RELAXED) : 0;
	return 0;
}

/* Prototypes watched so far (met by a sample or a trace copy: each is named by its
 * first sample's event), and frees of watched prototypes reported. */
int nupp_sampler_proto_counts(struct nupp_sampler *s, __u64 *watched, __u64 *freed)
{
	*watched = __atomic_load_n(&s->skel->bss->pwatched, __ATOMIC_RELAXED);
	*freed = __atomic_load_n(&s->skel->bss->pfreed, __ATOMIC_RELAXED);
	return 0;
}

/* Every prototype reported dead so far (the batches of luajit:proto_free). */
int nupp_sampler_proto_dead(struct nupp_sampler *s, __u64 *dead)
{
	*dead = __atomic_load_n(&s->skel->bss->pdead, __ATOMIC_RELAXED);
	return 0;
}

/* What the samples' walks did so far (the BPF wstat counters, summed over CPUs). */
int nupp_sampler_walk_stats(struct nupp_sampler *s, __u64 *counts, size_t n)
{
	int ncpu = libbpf_num_possible_cpus(), c, e = 0;
	__u64 *v;
	size_t i;

	for (i = 0; i < n; i++)
		counts[i] = 0;
	if (ncpu < 1)
		return nupp_fail(ncpu < 0 ? ncpu : -EINVAL, "cannot count the possible CPUs");
	v = calloc((size_t)ncpu * NUPP_SMP_WS_N, sizeof(*v));
	if (!v)
		return nupp_fail(-ENOMEM, "out of memory");
	if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.wstat), &(__u32){ 0 }, v))
		e = nupp_fail(-errno, "cannot read the walk counters: %s", strerror(errno));
	else
		for (c = 0; c < ncpu; c++)
			for (i = 0; i < n && i < NUPP_SMP_WS_N; i++)
				counts[i] += v[(size_t)c * NUPP_SMP_WS_N + i];
	free(v);
	return e;
}

/* Name of trace copy outcome i (enum nupp_smp_tcopy), or NULL. */
const char *nupp_sampler_tcopy_name(int i)
{
	static const char *const names[NUPP_SMP_TC_N] = {
		[NUPP_SMP_TC_COPIED] = "copied",     [NUPP_SMP_TC_UNWATCHED] = "unwatched",
		[NUPP_SMP_TC_HDRFAULT] = "hdrFault", [NUPP_SMP_TC_SHAPE] = "shape",
		[NUPP_SMP_TC_TOOBIG] = "tooBig",     [NUPP_SMP_TC_FAULT] = "readFault",
		[NUPP_SMP_TC_FNS] = "tooManyFns",    [NUPP_SMP_TC_RINGFULL] = "ringFull",
	};

	return i >= 0 && i < NUPP_SMP_TC_N ? names[i] : NULL;
}

