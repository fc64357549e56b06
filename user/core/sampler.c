/* The sampler channel's lifecycle: opens bpf/sampler.bpf.c's object, sizes its maps from
 * the options (stacks and counts, the frame caches, the stack ring), loads it, opens one
 * CPU-clock perf event per online CPU with the sampling program on it, pauses, and frees
 * it all. Attaches no probe and reads no map or target memory: what the sampler is attached
 * to is sampler_attach.c's, its event ring sampler_events.c's, the drain sampler_drain.c's
 * (with sampler_stacks.c and sampler_name.c), its counters sampler_stats.c's. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "nupp/sampler.h"
#include "nupp_internal.h"
#include "sampler_internal.h"
#include "sampler_priv.h"
#include "sampler.skel.h"

/* perf_event_open(2). */
static int smp_perf_open(struct perf_event_attr *a, pid_t pid, int cpu)
{
	return (int)syscall(__NR_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* Parses /sys/devices/system/cpu/online ("0-1,4") into cpus[]; count or -errno. */
static int smp_online_cpus(int *cpus, int max)
{
	FILE *f = fopen("/sys/devices/system/cpu/online", "re");
	int n = 0, a, b;
	char sep;

	if (!f)
		return -errno;
	while (fscanf(f, "%d", &a) == 1) {
		b = a;
		if (fscanf(f, "%c", &sep) == 1 && sep == '-') {
			if (fscanf(f, "%d", &b) != 1)
				break;
			if (fscanf(f, "%c", &sep) != 1)
				sep = '\n';
		}
		for (; a <= b && n < max; a++)
			cpus[n++] = a;
		if (sep != ',')
			break;
	}
	fclose(f);
	return n ? n : -ENOENT;
}

/* The stack ring's size: the stacks of a second (two drain periods) of samples on every
 * CPU at the rate asked for, each a new stack of the full depth, as a power of two
 * between 1 and 64 MB. */
static __u32 smp_stk_ring_size(const struct nupp_sampler *s)
{
	int ncpu = libbpf_num_possible_cpus();
	__u64 want = (__u64)(s->opts.freq_hz ? s->opts.freq_hz : 1000) * (__u64)(ncpu > 0 ? ncpu : 1) *
		     (8 + NUPP_SMP_STACK_SIZE(smp_walk_depth(s)));
	__u32 size = 1u << 20;

	while (size < want && size < (64u << 20))
		size <<= 1;
	return size;
}

/* Sizes the frame cache: NUPP_SMP_FC_ENTRIES for each possible CPU (the first
 * NUPP_SMP_MAX_CPUS of them: a CPU past those caches no frame). 0 or -errno. */
static int smp_size_fcache(struct sampler_bpf *skel)
{
	int n = libbpf_num_possible_cpus(), e;

	if (n < 1)
		return nupp_fail(n < 0 ? n : -EINVAL, "cannot count the possible CPUs: %s", strerror(n < 0 ? -n : EINVAL));
	if (n > NUPP_SMP_MAX_CPUS)
		n = NUPP_SMP_MAX_CPUS;
	skel->rodata->fc_ncpu = (__u32)n;
	e = bpf_map__set_max_entries(skel->maps.fcache, (__u32)n * NUPP_SMP_FC_ENTRIES);
	e = e ? e : bpf_map__set_max_entries(skel->maps.fncache, (__u32)n * NUPP_SMP_FNC_ENTRIES);
	return e ? nupp_fail(e, "cannot size the frame cache: %s", strerror(-e)) : 0;
}

/* Frames BPF walks: the depth, and one more (its caller names the outermost kept). */
__u32 smp_walk_depth(const struct nupp_sampler *s)
{
	return s->opts.depth < NUPP_SMP_MAX_DEPTH ? (__u32)s->opts.depth + 1 : NUPP_SMP_MAX_DEPTH;
}

/* Loads the sampler and opens one CPU-clock event per online CPU. */
struct nupp_sampler *nupp_sampler_open(const struct nupp_sampler_opts *opts, int *err)
{
	return nupp_smp_open(opts, -1, err);
}

struct nupp_sampler *nupp_smp_open(const struct nupp_sampler_opts *opts, int followed_fd, int *err)
{
	struct nupp_sampler *s = calloc(1, sizeof(*s));
	int cpus[SMP_MAX_CPUS], i, e = 0;
	__u32 max_stacks;

	if (!s) {
		*err = -ENOMEM;
		return NULL;
	}
	for (i = 0; i < SMP_MAX_CPUS; i++)
		s->pfd[i] = -1;
	s->opts.sz = sizeof(s->opts);
	s->opts.freq_hz = 99;
	s->opts.depth = NUPP_SMP_DEFAULT_DEPTH;
	s->opts.max_stacks = NUPP_SMP_DEFAULT_STACKS;
	if (opts) {
		if (opts->freq_hz)
			s->opts.freq_hz = opts->freq_hz;
		if (opts->depth)
			s->opts.depth = opts->depth;
		if (opts->max_stacks)
			s->opts.max_stacks = opts->max_stacks;
		s->opts.lines = opts->lines;
		if (opts->sz >= offsetof(struct nupp_sampler_opts, full_filenames) + sizeof(opts->full_filenames))
			s->opts.full_filenames = opts->full_filenames;
	}
	if (s->opts.freq_hz < 1 || s->opts.depth < 1 || s->opts.depth > NUPP_SMP_MAX_DEPTH) {
		e = nupp_fail(-EINVAL, "invalid sampler options: frequency %d Hz, depth %d (1..%d)", s->opts.freq_hz,
			      s->opts.depth, NUPP_SMP_MAX_DEPTH);
		goto fail;
	}
	max_stacks = s->opts.max_stacks;
	s->skel = sampler_bpf__open();
	if (!s->skel) {
		e = -errno;
		nupp_fail(e, "cannot open the sampler BPF object: %s", strerror(-e));
		goto fail;
	}
	/* One frame more than kept when it fits: the outermost frame kept is named by its
	 * caller, as it would be in a stack that is not cut. */
	s->skel->rodata->max_depth = smp_walk_depth(s);
	{
		struct bpf_map *cmaps[] = { s->skel->maps.counts0, s->skel->maps.counts1 };

		/* Room for max_stacks in each buffer. */
		bpf_map__set_max_entries(s->skel->maps.hosts, NUPP_SMP_NBUF * max_stacks);
		for (i = 0; i < (int)NUPP_ARRAY_SIZE(cmaps); i++)
			bpf_map__set_max_entries(cmaps[i], max_stacks);
		/* The marks of the stacks sent: a slot costs 8 bytes, a mark no allocation. */
		s->stk_slots = nupp_smp_stack_slots(max_stacks);
		s->skel->rodata->stk_slots = s->stk_slots;
		bpf_map__set_max_entries(s->skel->maps.stacks, NUPP_SMP_NBUF * s->stk_slots);
		bpf_map__set_max_entries(s->skel->maps.stk_ring, smp_stk_ring_size(s));
	}
	e = smp_size_fcache(s->skel);
	if (e)
		goto fail;
	if (followed_fd >= 0) {
		e = bpf_map__reuse_fd(s->skel->maps.fol_followed, followed_fd);
		if (e) {
			nupp_fail(e, "cannot share the map of followed processes with the sampler: %s", strerror(-e));
			goto fail;
		}
	}
	/* The USDT programs are attached per binary by nupp_sampler_watch/add_pid. */
	e = sampler_bpf__load(s->skel);
	if (e) {
		nupp_fail(e, "cannot load the sampler BPF programs: %s (CAP_BPF and CAP_PERFMON are required; "
			  "run with sudo; the kernel needs BTF and bpf_loop, 5.17+)",
			  strerror(-e));
		goto fail;
	}
	/* The marks, read and cleared where they are (sampler_stacks.c). */
	s->marks_len = (size_t)NUPP_SMP_NBUF * s->stk_slots * sizeof(*s->marks);
	s->marks = mmap(NULL, s->marks_len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(s->skel->maps.stacks), 0);
	if (s->marks == MAP_FAILED) {
		s->marks = NULL;
		e = nupp_fail(-errno, "cannot map the sampler's stack marks: %s", strerror(errno));
		goto fail;
	}
	s->ncpu = smp_online_cpus(cpus, SMP_MAX_CPUS);
	if (s->ncpu < 0) {
		e = nupp_fail(s->ncpu, "cannot read the online CPUs: %s", strerror(-s->ncpu));
		goto fail;
	}
	for (i = 0; i < s->ncpu; i++) {
		struct perf_event_attr a = {
			.size = sizeof(a),
			.type = PERF_TYPE_SOFTWARE,
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.freq = 1,
			.sample_freq = (__u64)s->opts.freq_hz,
			.exclude_idle = 1,
		};

		s->pfd[i] = smp_perf_open(&a, -1, cpus[i]);
		if (s->pfd[i] < 0) {
			e = -errno;
			nupp_fail(e, "cannot open a CPU-clock perf event on CPU %d: %s (CAP_PERFMON is required; "
				  "check kernel.perf_event_max_sample_rate >= %d)",
				  cpus[i], strerror(-e), s->opts.freq_hz);
			goto fail;
		}
		s->plink[i] = bpf_program__attach_perf_event(s->skel->progs.nupp_sample, s->pfd[i]);
		if (!s->plink[i]) {
			e = -errno;
			nupp_fail(e, "cannot attach the sampler to CPU %d: %s", cpus[i], strerror(-e));
			goto fail;
		}
	}
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), smp_on_event, s, NULL);
	s->stk_rb = s->rb ? ring_buffer__new(bpf_map__fd(s->skel->maps.stk_ring), smp_on_stack, s, NULL) : NULL;
	if (!s->rb || !s->stk_rb) {
		e = -errno;
		nupp_fail(e, "cannot open the sampler's ring buffers: %s", strerror(-e));
		goto fail;
	}
	return s;
fail:
	nupp_sampler_close(s);
	*err = e ? e : -EINVAL;
	return NULL;
}

/* Pauses (true) or resumes (false) recording; the timer keeps firing. */
int nupp_sampler_pause(struct nupp_sampler *s, bool paused)
{
	s->skel->bss->paused = paused ? 1 : 0;
	return 0;
}

/* Detaches and frees. */
void nupp_sampler_close(struct nupp_sampler *s)
{
	int i, j;

	if (!s)
		return;
	if (s->where_due)
		smp_lost_where(s);
	for (i = 0; i < SMP_MAX_CPUS; i++) {
		bpf_link__destroy(s->plink[i]);
		if (s->pfd[i] >= 0)
			close(s->pfd[i]);
	}
	for (i = 0; i < s->nattach; i++)
		for (j = 0; j < SMP_PROBES; j++)
			bpf_link__destroy(s->attach[i].links[j]);
	for (i = 0; i < SMP_FOL_PROGS; i++)
		bpf_link__destroy(s->flink[i]);
	ring_buffer__free(s->rb);
	ring_buffer__free(s->stk_rb);
	if (s->stk_nb) {
		smp_stk_evict(s, 0, true, false);
		smp_stk_evict(s, 1, true, false);
	}
	free(s->stk);
	if (s->marks)
		munmap(s->marks, s->marks_len);
	for (i = 0; i < s->ntargets; i++) {
		nupp_sym_free(s->targets[i].sym);
		nupp_addrmap_free(s->targets[i].amap);
		nupp_traces_free(s->targets[i].traces);
	}
	sampler_bpf__destroy(s->skel);
	free(s);
}
