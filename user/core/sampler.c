/* The sampler channel: loads bpf/sampler.bpf.c, opens one CPU-clock event per online
 * CPU, learns target VMs, and turns the kernel's counts into named stack rows. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "nupp/sampler.h"
#include "nupp_internal.h"
#include "sampler_internal.h"
#include "sampler.skel.h"

_Static_assert(NUPP_SMP_LOST_NO_VM == NUPP_LOST_NO_VM && NUPP_SMP_LOST_READ_FAULT == NUPP_LOST_READ_FAULT &&
		       NUPP_SMP_LOST_BAD_FRAME == NUPP_LOST_BAD_FRAME &&
		       NUPP_SMP_LOST_TRUNCATED == NUPP_LOST_TRUNCATED && NUPP_SMP_LOST_MAP_FULL == NUPP_LOST_MAP_FULL,
	       "BPF loss indexes must equal enum nupp_lost");

#define SMP_MAX_CPUS 1024
#define SMP_MAX_ATTACH 32
#define SMP_PROBES 3

/* One target process and its per-process name caches. */
struct smp_target {
	pid_t pid;
	struct nupp_lj_layout lo;
	int have_layout;
	struct nupp_sym *sym;
	struct nupp_traces *traces;
	__u64 pgen;  /* prototype generation when the current drain began */
	__u64 nlost; /* prototype free events lost, as last seen */
	int reset;   /* an event could not be recorded: forget the records at the drain */
	struct nupp_addrmap *amap; /* mappings and symbols: host code, C functions, call sites */
	bool amap_read;            /* mappings read in this drain */
	/* Interpreter call sites (return addresses) checked for helper samples. */
	struct smp_site {
		__u64 ra;
		int cpcall; /* ... for a sample under a protected call it made (NUPP_SMP_F_CPCALL) */
		int ok;     /* what it stored: NUPP_SMP_SYNC_* */
	} sites[64];
	int nsites;
	/* Prototypes met that may be read at once (nupp_sym_prefetch), refilled with time. */
	double pf_tokens;
	__u64 pf_us;
};

/* USDT probes attached for one (binary, pid). */
/* The process follower's programs (bpf/follow.h): fork, exec, exit. */
#define SMP_FOL_PROGS 3

struct smp_attach {
	char binary[512];
	pid_t pid;
	__u64 cookie; /* vm_open's: &luajit_bpf_vmlist - &luajit_bpf_layout, 0 unknown */
	struct bpf_link *links[SMP_PROBES];
};

struct nupp_sampler {
	struct nupp_sampler_opts opts;
	struct sampler_bpf *skel;
	int ncpu;
	int pfd[SMP_MAX_CPUS];
	struct bpf_link *plink[SMP_MAX_CPUS];
	struct ring_buffer *rb;
	struct ring_buffer *stk_rb; /* the stacks sent (stk_ring), emptied at each drain */
	__u64 stk_lost;             /* stack records refused (malformed; out of memory) */
	struct bpf_link *flink[SMP_FOL_PROGS]; /* the process follower's programs, once attached */
	bool fol_ring;             /* its ring buffer is read with the sampler's */
	struct smp_target targets[NUPP_SMP_MAX_TARGETS];
	int ntargets;
	struct smp_attach attach[SMP_MAX_ATTACH];
	int nattach;
	long ev_left;     /* events the current poll may still handle */
	__u64 ev_handled; /* events handled (for -v) */
	/* Walks failed since lost_where was last read (done at most every SMP_WHERE_US, and
	 * at close), and when it may be read next. */
	bool where_due;
	__u64 where_next;
	/* Stacks of the stacks map held here too (struct smp_stk), by key, and per buffer
	 * from the least recently counted to the most (old[b] .. new[b]); drains so far. */
	struct smp_stk **stk;
	size_t stk_nb, stk_n[NUPP_SMP_NBUF];
	struct smp_stk *stk_old[NUPP_SMP_NBUF], *stk_new[NUPP_SMP_NBUF];
	__u64 drains;
};

/* A stack BPF sent for a buffer (the stack ring), held by userspace while the stacks map
 * keeps its mark for the samples of that buffer that count it again: a drain deletes
 * marks (and lets go of the stacks) only of stacks its buffer has not counted for
 * SMP_STK_IDLE drains of it, and, when the buffer holds more than half its room, of the
 * least recently counted down to three eighths. A mark is deleted only while its buffer
 * is being drained, when no count of that buffer refers to it: a sample that needs the
 * stack again sends it again before counting it. */
struct smp_stk {
	struct smp_stk *next;         /* in its hash bucket */
	struct smp_stk *older, *newer; /* in its buffer's list, by the drain that last counted it */
	__u64 key;  /* the stack key, with its buffer's bit */
	__u64 used; /* the drain that last counted it */
	size_t size;
	struct nupp_smp_stack *rec; /* the frames used only (size bytes) */
	/* The name a drain gave it for process name_tgid (a record names the same frames
	 * in every drain: its prototype generation and trace serial say which), with the
	 * frame table its frames were recorded in (nupp_frame_table.id); NULL: none yet. */
	char *name;
	__u32 name_tgid;
	bool name_cut;
	unsigned long long name_table;
};

/* Drains of its buffer a stack may go uncounted and stay: a minute at record's period
 * (500 ms, two buffers). Keeping one costs memory only (bounded by the crowding rule);
 * deleting one costs an interrupt, and a program's stacks mostly come back (luacheck:
 * 4,000 stacks in 10 s, of which a window of 16 drains at 200 ms deleted most). */
#define SMP_STK_IDLE 60

/* Least time between two reads of the lost_where diagnosis map. */
#define SMP_WHERE_US 10000000

/* Events handled per nupp_sampler_poll: a target that loads and frees code without
 * pause must not keep the caller from draining. */
#define SMP_POLL_EVENTS 4096
/* Events a drain handles before it names (and between naming rounds): all of them,
 * unless the target sends faster than they are read. */
#define SMP_DRAIN_EVENTS 65536
/* Prototypes met read at once a second at most (smp_prefetch). */
#define SMP_PREFETCH_RATE 4096
/* Returned by the ring buffer callback when the poll's budget is spent. */
#define SMP_EV_BUDGET (-EOVERFLOW)

/* Monotonic microseconds. */
static __u64 smp_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000 + (__u64)ts.tv_nsec / 1000;
}

/* process_vm_readv reader for the symbolizer and trace cache. */
static int smp_read(void *ctx, __u64 addr, void *buf, size_t len)
{
	return nupp_vm_read((pid_t)(long)ctx, addr, buf, len);
}

/* Vectored process_vm_readv reader for the symbolizer. */
static int smp_readv(void *ctx, const struct nupp_read_seg *seg, int n)
{
	return nupp_vm_readv((pid_t)(long)ctx, seg, n);
}

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

/* The target entry of pid, or NULL. */
static struct smp_target *smp_target(struct nupp_sampler *s, pid_t pid)
{
	int i;

	for (i = 0; i < s->ntargets; i++)
		if (s->targets[i].pid == pid)
			return &s->targets[i];
	return NULL;
}

static int smp_target_ready(struct nupp_sampler *s, struct smp_target *t);

/* A prototype met or freed: the symbolizer learns which incarnation a generation saw. */
static void smp_on_proto(struct nupp_sampler *s, struct smp_target *t, const struct nupp_smp_proto_event *ev,
			 size_t size)
{
	const char *data = (const char *)(ev + 1);
	int e;

	if (smp_target_ready(s, t) && !t->sym)
		return; /* no symbolizer (ENOMEM): nothing of the process is named */
	if (size < sizeof(*ev) || size - sizeof(*ev) < ev->size) {
		t->reset = 1; /* a free not recorded is a lost free: start over at the drain */
		return;
	}
	if (ev->kind == NUPP_SMP_EV_PROTO_KSTR)
		e = nupp_sym_kstrs(t->sym, ev->pt, ev->pgen, data, ev->size);
	else if (ev->kind == NUPP_SMP_EV_PROTO_NEW)
		e = nupp_sym_born(t->sym, ev->pt, ev->pgen, ev->chunkname, ev->firstline, ev->sizebc, data, ev->size,
				  ev->full);
	else if (ev->kind == NUPP_SMP_EV_PROTO_COPY)
		e = nupp_sym_copied(t->sym, ev->pt, ev->pgen, ev->chunkname, ev->firstline, ev->sizebc, data,
				    ev->size, ev->full);
	else
		e = nupp_sym_freed(t->sym, ev->pt, ev->pgen, ev->chunkname, ev->firstline, ev->sizebc, data,
				   ev->size, ev->full);
	if (e)
		nupp_pr(NUPP_DEBUG, "PID %d: prototype event: %s\n", (int)t->pid, strerror(-e));
}

static void smp_handle_event(struct nupp_sampler *s, void *data, size_t size);

static __u32 smp_walk_depth(const struct nupp_sampler *s);
static struct smp_stk *smp_stk_get(struct nupp_sampler *s, __u64 k);
static struct smp_stk *smp_stk_add(struct nupp_sampler *s, __u64 k, const struct nupp_smp_stack *rec, size_t size);

/* A stack the sampler sent (struct nupp_smp_stack_rec, up to its depth): held for its key
 * (a drain finds it there when it counts it), unless held already. One that cannot be
 * held (malformed, or out of memory) has its mark deleted, so that BPF sends it again. */
static int smp_on_stack(void *ctx, void *data, size_t size)
{
	struct nupp_sampler *s = ctx;
	const struct nupp_smp_stack_rec *r = data;
	size_t hdr = offsetof(struct nupp_smp_stack_rec, st) + offsetof(struct nupp_smp_stack, frames);

	if (size < hdr)
		return 0;
	if (smp_stk_get(s, r->key))
		return 0;
	if (r->st.depth > smp_walk_depth(s) || hdr + (size_t)r->st.depth * sizeof(r->st.frames[0]) > size ||
	    !smp_stk_add(s, r->key, &r->st, NUPP_SMP_STACK_SIZE(r->st.depth))) {
		s->stk_lost++;
		bpf_map_delete_elem(bpf_map__fd(s->skel->maps.stacks), &r->key);
	}
	return 0;
}

/* Ring buffer callback: handles the event; once the poll's budget is spent, stops the
 * poll (libbpf has consumed this event already; the rest wait for the next poll). */
static int smp_on_event(void *ctx, void *data, size_t size)
{
	struct nupp_sampler *s = ctx;

	smp_handle_event(s, data, size);
	s->ev_handled++;
	return --s->ev_left > 0 ? 0 : SMP_EV_BUDGET;
}

/* A VM, trace or prototype lifetime event. */
static void smp_handle_event(struct nupp_sampler *s, void *data, size_t size)
{
	const struct nupp_smp_event *ev = data;
	struct smp_target *t;

	if (size < sizeof(__u32) * 2)
		return;
	t = smp_target(s, (pid_t)ev->tgid);
	if (!t)
		return;
	if (ev->kind == NUPP_SMP_EV_PROTO_NEW || ev->kind == NUPP_SMP_EV_PROTO_FREE ||
	    ev->kind == NUPP_SMP_EV_PROTO_KSTR || ev->kind == NUPP_SMP_EV_PROTO_COPY) {
		smp_on_proto(s, t, data, size);
		return;
	}
	if (size < sizeof(*ev))
		return;
	switch (ev->kind) {
	case NUPP_SMP_EV_VM_CLOSE:
		/* The process's code is mapped now; it may be gone by the next drain. */
		if (t->amap)
			nupp_addrmap_refresh(t->amap);
		break;
	case NUPP_SMP_EV_VM_OPEN:
		if (t->amap)
			nupp_addrmap_refresh(t->amap);
		if (!t->have_layout) {
			struct nupp_smp_proc p;
			__u32 key = ev->tgid;

			if (!bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.procs), &key, &p) && p.layout_ok) {
				t->lo = p.lo;
				t->have_layout = 1;
			}
		}
		break;
	case NUPP_SMP_EV_TRACE_COPY:
		/* A trace as BPF copied it at its first sample (struct nupp_smp_trace_event),
		 * decoded when the drain names that sample. One not kept costs only a read of
		 * the trace then, if it still lives. */
		if (!smp_target_ready(s, t)) {
			int e = nupp_traces_add_copy(t->traces, data, size);

			if (e)
				nupp_pr(NUPP_DEBUG, "PID %d: trace copy not kept: %s\n", (int)t->pid, strerror(-e));
		}
		break;
	}
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
static __u32 smp_walk_depth(const struct nupp_sampler *s)
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
	s->opts.max_stacks = 16384;
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
		struct bpf_map *maps[] = { s->skel->maps.stacks, s->skel->maps.hosts };
		struct bpf_map *cmaps[] = { s->skel->maps.counts0, s->skel->maps.counts1 };

		/* Room for max_stacks in each buffer. */
		for (i = 0; i < (int)NUPP_ARRAY_SIZE(maps); i++)
			bpf_map__set_max_entries(maps[i], NUPP_SMP_NBUF * max_stacks);
		for (i = 0; i < (int)NUPP_ARRAY_SIZE(cmaps); i++)
			bpf_map__set_max_entries(cmaps[i], max_stacks);
		/* The marks of stacks sent are allocated as they are made (preallocating 2 x
		 * max_stacks of them costs every start, for stacks most runs never meet). */
		bpf_map__set_map_flags(s->skel->maps.stacks, bpf_map__map_flags(s->skel->maps.stacks) | BPF_F_NO_PREALLOC);
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

/* Attaches the VM and prototype lifetime probes of binary for pid (-1: every process). */
static int smp_attach_probes(struct nupp_sampler *s, const char *binary, pid_t pid)
{
	/* proto_free before vm_open: a VM seen opening has its prototype frees watched, which
	 * its samples' frame cache relies on (bpf/sampler.bpf.c). Traces and prototypes are
	 * made without a probe: the first sample that meets one copies (a trace) or watches
	 * it (a prototype, whose free is then reported). */
	static const char *const names[SMP_PROBES] = { "proto_free", "vm_close", "vm_open" };
	struct bpf_program *progs[SMP_PROBES] = {
		s->skel->progs.nupp_smp_proto_free,
		s->skel->progs.nupp_smp_vm_close,
		s->skel->progs.nupp_smp_vm_open,
	};
	LIBBPF_OPTS(bpf_usdt_opts, vm_open_opts);
	struct smp_attach *a;
	int i, e;

	for (i = 0; i < s->nattach; i++)
		if (strcmp(s->attach[i].binary, binary) == 0 && (s->attach[i].pid == -1 || s->attach[i].pid == pid))
			return 0;
	/* vm_open finds a new VM's zone slot from &luajit_bpf_layout and its cookie. */
	vm_open_opts.usdt_cookie = nupp_vm_vmlist_cookie(binary);
	if (s->nattach == SMP_MAX_ATTACH)
		return nupp_fail(-ENOSPC, "too many watched binaries (%d)", SMP_MAX_ATTACH);
	a = &s->attach[s->nattach];
	memset(a, 0, sizeof(*a));
	snprintf(a->binary, sizeof(a->binary), "%s", binary);
	a->pid = pid;
	a->cookie = vm_open_opts.usdt_cookie;
	for (i = 0; i < SMP_PROBES; i++) {
		a->links[i] = bpf_program__attach_usdt(progs[i], pid, binary, "luajit", names[i],
						       progs[i] == s->skel->progs.nupp_smp_vm_open ? &vm_open_opts : NULL);
		if (!a->links[i]) {
			const char *name = names[i];

			e = -errno;
			while (i-- > 0)
				bpf_link__destroy(a->links[i]);
			return nupp_fail(e, "cannot attach to luajit:%s in %s: %s (is it our LuaJIT build?)", name,
					 binary, strerror(-e));
		}
	}
	s->nattach++;
	return 0;
}

/* Watches an ELF object with our probes for VMs opened by pid (-1: any process). */
int nupp_sampler_watch(struct nupp_sampler *s, const char *binary, pid_t pid)
{
	return smp_attach_probes(s, binary, pid > 0 ? pid : -1);
}

/* Makes the change a to a process's entry in the kernel (nupp_smp_proc_set); 0 or
 * -errno (the program's own: -ENOENT, -ENOSPC, -ESRCH). */
static int smp_proc_set(struct nupp_sampler *s, struct nupp_smp_proc_set *a)
{
	LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = a, .ctx_size_in = sizeof(*a));
	int e;

	e = bpf_prog_test_run_opts(bpf_program__fd(s->skel->progs.nupp_smp_proc_set), &run);
	if (e)
		return -errno;
	return (int)run.retval;
}

/* Samples every thread of a running process (VMs found with nupp_vm_find). */
int nupp_sampler_add_pid(struct nupp_sampler *s, pid_t pid)
{
	struct nupp_vm vms[NUPP_SMP_MAX_VMS];
	struct nupp_smp_proc_set a;
	struct nupp_smp_proc p;
	struct smp_target *t;
	__u32 key = (__u32)pid;
	int fd = bpf_map__fd(s->skel->maps.procs), n, i, e;

	if (pid <= 0)
		return nupp_fail(-EINVAL, "invalid PID %d", (int)pid);
	t = smp_target(s, pid);
	if (!t) {
		if (s->ntargets == NUPP_SMP_MAX_TARGETS)
			return nupp_fail(-ENOSPC, "too many target processes (%d)", NUPP_SMP_MAX_TARGETS);
		t = &s->targets[s->ntargets++];
		memset(t, 0, sizeof(*t));
		t->pid = pid;
		t->amap = nupp_addrmap_new(pid);
	}
	if (t->amap)
		nupp_addrmap_refresh(t->amap);
	/* Enter the tgid first, so a vm_open firing from now on is recorded by BPF. */
	memset(&p, 0, sizeof(p));
	if (bpf_map_update_elem(fd, &key, &p, BPF_NOEXIST) && errno != EEXIST)
		return nupp_fail(-errno, "cannot add PID %d to the sampler: %s (at most %d processes)", (int)pid,
				 strerror(errno), NUPP_SMP_MAX_TARGETS);
	n = nupp_vm_find(pid, vms, NUPP_SMP_MAX_VMS);
	if (n < 0)
		return n;
	if (n == 0)
		return 0; /* no VM yet: vm_open (nupp_sampler_watch) fills it in */
	/* Without the prototype lifetime probes no name could be proven. */
	e = smp_attach_probes(s, vms[0].path, pid);
	if (e)
		return e;
	memset(&a, 0, sizeof(a));
	a.tgid = key;
	a.set_layout = 1;
	a.lo = vms[0].layout;
	for (i = 0; i < n && i < NUPP_SMP_MAX_VMS; i++) {
		a.g[a.nvm] = vms[i].g;
		/* The frame cache needs this VM's prototype frees watched: its binary's probes. */
		a.fc_ok[a.nvm++] = strcmp(vms[i].path, vms[0].path) == 0;
	}
	/* Entries cached for an earlier process with this PID die. */
	__atomic_fetch_add(&s->skel->data->fc_epoch, 1, __ATOMIC_SEQ_CST);
	e = smp_proc_set(s, &a);
	if (e == -ENOSPC)
		nupp_pr(NUPP_WARN, "PID %d: more than %d VMs, the others are not sampled\n", (int)pid, NUPP_SMP_MAX_VMS);
	else if (e)
		return nupp_fail(e, "cannot update the VMs of PID %d: %s", (int)pid, strerror(-e));
	if (bpf_map_lookup_elem(fd, &key, &p))
		return nupp_fail(-errno, "PID %d left the sampler: %s", (int)pid, strerror(errno));
	t->lo = p.lo;
	t->have_layout = 1;
	return 0;
}

/* Sets the address of a VM's current zone id (u32; 0 = no zones). */
int nupp_sampler_set_zone_addr(struct nupp_sampler *s, pid_t pid, __u64 g, __u64 zone_addr)
{
	struct nupp_smp_proc_set a;
	struct nupp_smp_proc p;
	__u32 key = (__u32)pid, i;
	int fd = bpf_map__fd(s->skel->maps.procs), e;

	if (bpf_map_lookup_elem(fd, &key, &p))
		return nupp_fail(-ENOENT, "PID %d is not sampled", (int)pid);
	/* Set already (by vm_open): nothing to change. */
	for (i = 0; i < p.nvm && i < NUPP_SMP_MAX_VMS; i++)
		if (p.g[i] == g && p.zone_addr[i] == zone_addr)
			return 0;
	memset(&a, 0, sizeof(a));
	a.tgid = key;
	a.set_zone = 1;
	a.zone_g = g;
	a.zone_addr = zone_addr;
	e = smp_proc_set(s, &a);
	if (e == -ESRCH || e == -ENOENT)
		return nupp_fail(-ENOENT, "PID %d has no VM %#llx", (int)pid, (unsigned long long)g);
	return e;
}

/* Pauses (true) or resumes (false) recording; the timer keeps firing. */
int nupp_sampler_pause(struct nupp_sampler *s, bool paused)
{
	s->skel->bss->paused = paused ? 1 : 0;
	return 0;
}

/* Reads the prototypes met since the last poll while they live, SMP_PREFETCH_RATE a
 * second at most (a target that makes prototypes without pause has most of them read
 * when a sample needs them). */
static void smp_prefetch(struct nupp_sampler *s)
{
	__u64 now = smp_now_us();
	int i;

	for (i = 0; i < s->ntargets; i++) {
		struct smp_target *t = &s->targets[i];

		if (!t->sym)
			continue;
		if (!t->pf_us)
			t->pf_tokens = SMP_PREFETCH_RATE;
		else
			t->pf_tokens += (double)(now - t->pf_us) * SMP_PREFETCH_RATE / 1e6;
		if (t->pf_tokens > SMP_PREFETCH_RATE)
			t->pf_tokens = SMP_PREFETCH_RATE;
		t->pf_us = now;
		t->pf_tokens -= nupp_sym_prefetch(t->sym, (int)t->pf_tokens);
	}
}

int nupp_smp_add_ring(struct nupp_sampler *s, int map_fd, int (*fn)(void *ctx, void *data, size_t size),
		      void *ctx)
{
	int e = ring_buffer__add(s->rb, map_fd, fn, ctx);

	return e ? nupp_fail(e, "cannot read a ring buffer with the sampler's: %s", strerror(-e)) : 0;
}

int nupp_smp_follow(struct nupp_sampler *s, bool subprocesses, int (*fn)(void *ctx, void *data, size_t size),
		    void *ctx)
{
	struct bpf_program *progs[SMP_FOL_PROGS] = { s->skel->progs.nupp_follow_fork,
						     s->skel->progs.nupp_follow_exec,
						     s->skel->progs.nupp_follow_exit };
	int i, e;

	if (s->flink[0])
		return 0;
	s->skel->bss->fol_subprocesses = subprocesses ? 1 : 0;
	/* Its ring first: programs attached are then always read (a failure leaves none). */
	if (!s->fol_ring) {
		e = nupp_smp_add_ring(s, bpf_map__fd(s->skel->maps.fol_events), fn, ctx);
		if (e)
			return e;
		s->fol_ring = true;
	}
	for (i = 0; i < SMP_FOL_PROGS; i++) {
		s->flink[i] = bpf_program__attach(progs[i]);
		if (!s->flink[i]) {
			e = -errno;
			while (i-- > 0) {
				bpf_link__destroy(s->flink[i]);
				s->flink[i] = NULL;
			}
			return nupp_fail(e, "cannot attach the process follower to sched_process_fork/exec/exit: %s",
					 strerror(-e));
		}
	}
	return 0;
}

bool nupp_smp_zone_slots(struct nupp_sampler *s, const char *binary)
{
	int i;

	for (i = 0; i < s->nattach; i++)
		if (strcmp(s->attach[i].binary, binary) == 0 && s->attach[i].cookie)
			return true;
	return false;
}

int nupp_smp_epoll_fd(struct nupp_sampler *s)
{
	return ring_buffer__epoll_fd(s->rb);
}

int nupp_smp_followed_fd(struct nupp_sampler *s)
{
	return bpf_map__fd(s->skel->maps.fol_followed);
}

/* Services ring buffers (VM, trace and prototype lifetime events) for up to timeout_ms,
 * at most SMP_POLL_EVENTS events. */
int nupp_sampler_poll(struct nupp_sampler *s, int timeout_ms)
{
	int n;

	s->ev_left = SMP_POLL_EVENTS;
	n = ring_buffer__poll(s->rb, timeout_ms);
	/* Prototype events do not wake us (bpf/sampler.bpf.c): read what is there. */
	if (n >= 0 && s->ev_left > 0)
		n = ring_buffer__consume(s->rb);
	smp_prefetch(s);
	return n < 0 && n != -EINTR && n != SMP_EV_BUDGET ? n : 0;
}

/* Handles the events sent so far, up to max: 0 when none is left, 1 when the budget ran
 * out first (the target sends faster than we read). */
static int smp_consume(struct nupp_sampler *s, long max)
{
	int n;

	s->ev_left = max;
	n = ring_buffer__consume(s->rb);
	return n == SMP_EV_BUDGET;
}

/* Makes sure a target has its symbolizer and trace cache. */
static int smp_target_ready(struct nupp_sampler *s, struct smp_target *t)
{
	if (!t->have_layout) {
		struct nupp_smp_proc p;
		__u32 key = (__u32)t->pid;

		if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.procs), &key, &p) || !p.layout_ok)
			return -ENOENT;
		t->lo = p.lo;
		t->have_layout = 1;
	}
	if (!t->sym) {
		t->sym = nupp_sym_new(t->pid, &t->lo, s->opts.lines, smp_read, (void *)(long)t->pid);
		if (t->sym) {
			nupp_sym_set_full_filenames(t->sym, s->opts.full_filenames);
			nupp_sym_set_readv(t->sym, smp_readv);
		}
		if (t->sym && t->amap)
			nupp_sym_set_addrmap(t->sym, t->amap);
	}
	if (!t->traces)
		t->traces = nupp_traces_new(&t->lo, smp_read, (void *)(long)t->pid);
	if (t->traces && t->sym)
		nupp_traces_set_sym(t->traces, t->sym);
	return t->sym && t->traces ? 0 : -ENOMEM;
}

/* lost_reason of a row whose generation is ahead of the prototype frees read so far, or
 * whose name needs a string read while the GC sweeps; such rows wait up to SMP_WAIT_US
 * in a drain, then are lost. */
#define SMP_ROW_WAIT (-2)
#define SMP_WAIT_US 50000

/* A counted stack of a drain, named (stack) or lost (lost_reason). */
struct smp_row {
	struct nupp_smp_count_key key;
	struct nupp_smp_count c;
	const struct nupp_smp_stack *st; /* the frames used only (held in held) */
	size_t size;                      /* of st */
	struct smp_stk *held;
	bool named_before; /* its name is held's, made in an earlier drain */
	bool borrowed;     /* stack is held's name, not a copy: never freed by the row */
	char *stack;
	int lost_reason;
	bool cut; /* named with a [truncated] root */
};

/* Lets go of r's name (freed when it is the row's own). */
static void smp_row_unname(struct smp_row *r)
{
	if (!r->borrowed)
		free(r->stack);
	r->stack = NULL;
	r->borrowed = false;
}

/* Samples of a count. */
static __u64 smp_total(const struct nupp_smp_count *c)
{
	__u64 total = 0;
	int i;

	for (i = 0; i < NUPP_SMP_NSTATES; i++)
		total += c->n[i];
	return total;
}

/* C helpers the interpreter calls without storing BASE in L->base and PC in SAVE_PC
 * first (every `call extern` of vm_x64.dasc was read: lj_tab_len 3209, lj_tab_get 1293,
 * lj_tab_next 1360, lj_tab_getinth 800/1434, lj_gc_barrieruv 3473/3501; L->base but not
 * SAVE_PC: lj_func_closeuv 3535, lj_dispatch_ins/stitch/profile 2242/2352/2368,
 * lj_ccallback_leave 2730; neither, or not from a Lua frame: the rest). Calls through the
 * PLT (libm: log, pow, frexp, modf, sin ... 1746-1821, 3339) have no symbol here and are
 * refused with them. */
static const char *const smp_nosync[] = {
	"lj_tab_len",	     "lj_tab_get",	   "lj_tab_next",	   "lj_tab_getinth",
	"lj_gc_barrieruv",   "lj_func_closeuv",	   "lj_dispatch_ins",	   "lj_dispatch_stitch",
	"lj_dispatch_profile", "lj_ccallback_enter", "lj_ccallback_leave", "lj_state_growstack",
	"lj_trace_exit",     "lj_err_trace",	   "lj_ffh_coroutine_wrap_err",
};

/* Helpers of smp_nosync called right after `mov L:RB->base, BASE` (vm_x64.dasc 3531,
 * 2238, 2348, 2365) that leave L->base alone: the frame at L->base is the leaf, its PC
 * unknown (lj_dispatch_ins/profile and lj_dispatch_stitch store SAVE_PC themselves,
 * lj_dispatch.c:406/544/525). lj_ccallback_leave is not one: it pops the callback's
 * frames (lj_ccallback.c). */
static const char *const smp_sync_base[] = { "lj_func_closeuv", "lj_dispatch_ins", "lj_dispatch_stitch",
					     "lj_dispatch_profile" };

/* Helpers of smp_nosync that store both before every protected call they make: the JIT
 * compiler's, lj_trace_ins (lj_trace.c:821), comes after setcframe_pc and L->base from
 * vm_inshook (lj_dispatch.c:406-417) or cont_stitch (lj_dispatch.c:525-529). */
static const char *const smp_sync_cpcall[] = { "lj_dispatch_ins", "lj_dispatch_stitch" };

/* What the interpreter stored before calling the C helper named callee (with cpcall:
 * before a protected call it made). */
int nupp_smp_sync_of(const char *callee, bool cpcall)
{
	int sync = NUPP_SMP_SYNC_BOTH;
	size_t k;

	for (k = 0; k < NUPP_ARRAY_SIZE(smp_nosync); k++)
		if (strcmp(callee, smp_nosync[k]) == 0)
			sync = NUPP_SMP_SYNC_NONE;
	for (k = 0; sync == NUPP_SMP_SYNC_NONE && k < NUPP_ARRAY_SIZE(smp_sync_base); k++)
		if (strcmp(callee, smp_sync_base[k]) == 0)
			sync = NUPP_SMP_SYNC_BASE;
	for (k = 0; cpcall && k < NUPP_ARRAY_SIZE(smp_sync_cpcall); k++)
		if (strcmp(callee, smp_sync_cpcall[k]) == 0)
			sync = NUPP_SMP_SYNC_BOTH;
	return sync;
}

/* Is a helper's sample a stack, given what its call site stored? */
bool nupp_smp_helper_keep(struct nupp_smp_stack *st, int sync)
{
	if (sync == NUPP_SMP_SYNC_NONE)
		return false;
	if (sync == NUPP_SMP_SYNC_BOTH)
		return !(st->flags & NUPP_SMP_F_NOPC); /* SAVE_PC stored but not in the leaf */
	if (st->depth && st->frames[0].kind == NUPP_SMP_LUA)
		st->frames[0].pos = -1;
	return true;
}

/* What the interpreter stored before the call that returns to ra (with cpcall: before
 * the protected call the sample is under), NUPP_SMP_SYNC_*. A direct call is decoded
 * (E8 rel32) and its callee named; an indirect one is a fast function's fallback handler
 * (fff_fallback syncs both, vm_x64.dasc:2129-2143). */
static int smp_site_sync(struct smp_target *t, __u64 ra, bool cpcall)
{
	unsigned char ins[5];
	char name[128];
	__u64 callee;
	__s32 rel;
	int i, ok = NUPP_SMP_SYNC_NONE;

	for (i = 0; i < t->nsites; i++)
		if (t->sites[i].ra == ra && t->sites[i].cpcall == cpcall)
			return t->sites[i].ok;
	if (!t->amap || nupp_addrmap_read(t->amap, ra - 5, ins, 5))
		goto out; /* the code cannot be read: not proven */
	if (ins[0] != 0xe8) {
		ok = NUPP_SMP_SYNC_BOTH;
		goto out;
	}
	memcpy(&rel, ins + 1, 4);
	callee = ra + (__s64)rel;
	/* A routine of the interpreter itself, or a PLT stub (no symbol): not proven. */
	if ((callee >= t->lo.vm_begin && callee < t->lo.vm_end) ||
	    nupp_addrmap_sym(t->amap, callee, NULL, name, sizeof(name)))
		goto out;
	ok = nupp_smp_sync_of(name, cpcall);
out:
	i = t->nsites < (int)NUPP_ARRAY_SIZE(t->sites) ? t->nsites++ : (int)(ra % NUPP_ARRAY_SIZE(t->sites));
	t->sites[i].ra = ra;
	t->sites[i].cpcall = cpcall;
	t->sites[i].ok = ok;
	return ok;
}

/* Names one counted stack (again). */
static void smp_name_row(struct nupp_sampler *s, struct smp_row *r)
{
	struct nupp_smp_frame fr[NUPP_SMP_MAX_DEPTH + 64];
	struct smp_target *t = smp_target(s, (pid_t)r->key.tgid);
	struct nupp_smp_stack *hst = NULL;
	char *str;
	int n, e, keep;

	smp_row_unname(r);
	r->named_before = false;
	r->lost_reason = NUPP_LOST_SYMBOLIZE;
	r->cut = (r->st->flags & NUPP_SMP_F_CUT) != 0;
	if (!t || smp_target_ready(s, t))
		return;
	/* A helper's sample: L->base and SAVE_PC are its Lua stack only if its call synced
	 * (its leaf's line may be unknown: marked in a copy, the held record stays as read). */
	if (r->st->flags & NUPP_SMP_F_HELPER) {
		int sync = smp_site_sync(t, r->st->callsite, (r->st->flags & NUPP_SMP_F_CPCALL) != 0);

		if (!(hst = malloc(r->size)))
			return;
		memcpy(hst, r->st, r->size);
		if (!nupp_smp_helper_keep(hst, sync)) {
			r->lost_reason = NUPP_LOST_BAD_FRAME;
			free(hst);
			return;
		}
	}
	n = nupp_traces_expand(t->traces, hst ? hst : r->st, fr, (int)NUPP_ARRAY_SIZE(fr));
	free(hst);
	if (n == -E2BIG) {
		r->lost_reason = NUPP_LOST_TRUNCATED;
		return;
	}
	/* Deeper than the depth (the extra frame walked, inlined frames): the leaf-most are
	 * kept, the outermost of them named by its caller, which is dropped. */
	keep = n;
	if (n > s->opts.depth) {
		keep = s->opts.depth;
		n = keep + 1;
		r->cut = true;
	}
	e = n < 0 ? n : nupp_sym_stack(t->sym, fr, n, r->st->pgen, &r->stack);
	if (!e && n > keep) {
		char *semi = strchr(r->stack, ';');

		memmove(r->stack, semi ? semi + 1 : r->stack + strlen(r->stack),
			strlen(semi ? semi + 1 : r->stack + strlen(r->stack)) + 1);
	}
	if (e == -EAGAIN) {
		r->stack = NULL;
		r->lost_reason = SMP_ROW_WAIT;
		return;
	}
	if (e) {
		nupp_pr(NUPP_DEBUG, "PID %u: %llu samples not named (%s): %s trace %u depth %u flags %#x gen %llu\n",
			r->key.tgid, (unsigned long long)smp_total(&r->c), strerror(-e),
			n < 0 ? "trace expansion" : "symbolization", r->st->traceno, r->st->depth, r->st->flags,
			(unsigned long long)r->st->pgen);
		r->stack = NULL;
		return;
	}
	if (r->cut) {
		str = malloc(strlen(r->stack) + sizeof("[truncated];"));
		if (!str) {
			free(r->stack);
			r->stack = NULL;
			return;
		}
		sprintf(str, "[truncated];%s", r->stack);
		free(r->stack);
		r->stack = str;
	}
	r->lost_reason = -1;
}

/* Adds a named row to out, or counts its samples lost. */
static int smp_add_row(struct smp_row *r, struct nupp_sample_set *out)
{
	struct nupp_sample_row row = { 0 };
	char zone[32];

	if (!r->stack) {
		out->lost[r->lost_reason >= 0 ? r->lost_reason : NUPP_LOST_SYMBOLIZE] += smp_total(&r->c);
		return 0;
	}
	/* No zone module yet: id 0 is the path "", others keep their number. */
	if (r->key.zone)
		snprintf(zone, sizeof(zone), "#%u", r->key.zone);
	else
		zone[0] = 0;
	row.pid = (pid_t)r->key.tgid;
	row.tid = (pid_t)r->key.tid;
	row.count = smp_total(&r->c);
	row.compiled = r->c.n[NUPP_SMP_COMPILED];
	row.interpreted = r->c.n[NUPP_SMP_INTERPRETED];
	row.ccode = r->c.n[NUPP_SMP_CCODE];
	row.collecting = r->c.n[NUPP_SMP_COLLECTING];
	row.compiling = r->c.n[NUPP_SMP_COMPILING];
	if (r->cut)
		out->cut_samples += row.count;
	return nupp_sample_set_add(out, zone, r->stack, &row); /* also counts out->samples */
}

/* Gives each symbolizer its process's open VMs (their GC phase decides string reads). */
static void smp_refresh_vms(struct nupp_sampler *s)
{
	int i;

	for (i = 0; i < s->ntargets; i++) {
		struct smp_target *t = &s->targets[i];
		struct nupp_smp_proc p;
		__u32 key = (__u32)t->pid;

		if (t->sym && !bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.procs), &key, &p))
			nupp_sym_set_vms(t->sym, p.g, (int)(p.nvm < NUPP_SMP_MAX_VMS ? p.nvm : NUPP_SMP_MAX_VMS));
	}
}

/* Names row r as an earlier drain named its record for the same process and frame
 * table (nothing to read or record again): 1, or 0 when it must be named. */
static int smp_name_held(struct smp_row *r, unsigned long long table)
{
	const struct smp_stk *c = r->held;

	if (!c || !c->name || c->name_tgid != r->key.tgid || c->name_table != table)
		return 0;
	smp_row_unname(r);
	r->stack = c->name; /* read until the rows are added: no later name replaces it sooner */
	r->borrowed = true;
	r->cut = c->name_cut;
	r->lost_reason = 0;
	r->named_before = true;
	return 1;
}

/* Gives name (taken, not copied) to c, for process tgid and frame table table. */
static void smp_stk_give_name(struct smp_stk *c, char *name, __u32 tgid, bool cut, unsigned long long table)
{
	free(c->name);
	c->name = name;
	c->name_tgid = tgid;
	c->name_cut = cut;
	c->name_table = table;
}

/* Keeps a copy of name as c's (a failed copy only costs the name). */
static void smp_stk_name(struct smp_stk *c, const char *name, __u32 tgid, bool cut, unsigned long long table)
{
	char *copy = strdup(name);

	if (copy)
		smp_stk_give_name(c, copy, tgid, cut, table);
}

/* Keeps the names this drain gave with their records, for later drains: each row's own
 * name moves to its record (the row borrows it back). After the rows are added: a name
 * a record gives up may be one that rows borrowed. */
static void smp_hold_names(struct smp_row *rows, size_t n, unsigned long long table)
{
	struct smp_row *r;
	size_t j;

	for (j = 0; j < n; j++) {
		r = &rows[j];
		if (!r->stack || !r->held || r->named_before || r->borrowed)
			continue;
		smp_stk_give_name(r->held, r->stack, r->key.tgid, r->cut, table);
		r->borrowed = true;
	}
}

/* Names the rows of one drain. A name read from the target is proven by the events read
 * after it (a prototype freed after the events were read was freed after it was read);
 * while an event read after naming may change a name, the target's rows are named again.
 * A row whose record was named in an earlier drain for ft takes that name. */
static void smp_name_rows(struct nupp_sampler *s, struct smp_row *rows, size_t n,
			  const struct nupp_frame_table *ft)
{
	int i, round;
	bool behind;
	size_t j;
	__u64 deadline = smp_now_us() + SMP_WAIT_US;

	for (i = 0; i < s->ntargets; i++)
		if (s->targets[i].sym)
			nupp_sym_begin(s->targets[i].sym);
	for (j = 0; j < n; j++) {
		if (smp_name_held(&rows[j], ft->id))
			continue;
		smp_name_row(s, &rows[j]);
		/* Keep reading events while naming: the ring buffer must not fill. */
		if (j % 64 == 63)
			smp_consume(s, SMP_POLL_EVENTS);
	}
	for (round = 0; round < 64; round++) {
		bool again = false, waiting = false;

		/* Names read in the last round are proven only by every event sent before
		 * them: while events are left unread, read on (and start no new round). */
		behind = smp_consume(s, SMP_DRAIN_EVENTS);
		if (behind) {
			if (smp_now_us() >= deadline)
				break;
			continue;
		}
		smp_refresh_vms(s);
		for (i = 0; i < s->ntargets; i++) {
			struct smp_target *t = &s->targets[i];
			bool all = t->sym && nupp_sym_suspect(t->sym);

			if (!t->sym)
				continue;
			if (all)
				nupp_sym_begin(t->sym);
			for (j = 0; j < n; j++) {
				if (rows[j].key.tgid != (__u32)t->pid || (!all && rows[j].lost_reason != SMP_ROW_WAIT))
					continue;
				again = true;
				smp_name_row(s, &rows[j]);
				waiting |= rows[j].lost_reason == SMP_ROW_WAIT;
			}
		}
		if (!again)
			return;
		/* A sample's generation is ahead of the frees read (one is being sent), or a
		 * name needs a string of a dead prototype while its VM sweeps: wait a little.
		 * Renaming for other reasons stops after 8 rounds. */
		if (waiting && smp_now_us() < deadline)
			usleep(1000);
		else if (round >= 7)
			break;
	}
	/* Still changing: names given in the last round are not proven. */
	behind = smp_consume(s, SMP_DRAIN_EVENTS);
	for (i = 0; i < s->ntargets; i++) {
		struct smp_target *t = &s->targets[i];
		bool all = t->sym && (behind || nupp_sym_suspect(t->sym));

		for (j = 0; j < n; j++)
			if (rows[j].key.tgid == (__u32)t->pid && (all || rows[j].lost_reason == SMP_ROW_WAIT)) {
				smp_row_unname(&rows[j]);
				rows[j].lost_reason = NUPP_LOST_SYMBOLIZE;
			}
	}
}

/* Reports where walks failed and empties the lost_where map (only the places that lost
 * a sample are in it). */
static void smp_lost_where(struct nupp_sampler *s)
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
		nupp_pr(NUPP_DEBUG, "walk lost %llu samples: mode %u iter>0 %u, include/nupp/walk.h:%u\n",
			(unsigned long long)n, key >> 12, (key >> 11) & 1, key & 2047);
	}
}

/* Makes BPF count into the other buffer and waits until no sample of the old one is in
 * flight; returns the old buffer (0 or 1), which nothing writes until the next flip. */
static int smp_flip(struct nupp_sampler *s)
{
	__u64 e = __atomic_load_n(&s->skel->bss->epoch, __ATOMIC_SEQ_CST), v, t0;
	int ncpu = libbpf_num_possible_cpus(), c;

	__atomic_store_n(&s->skel->bss->epoch, e + 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (c = 0; c < ncpu && c < NUPP_SMP_MAX_CPUS; c++) {
		v = __atomic_load_n(&s->skel->bss->inflight[c].n, __ATOMIC_SEQ_CST);
		if (!(v & 1))
			continue;
		/* A sample runs there (a few microseconds): wait for its end. */
		t0 = smp_now_us();
		while (__atomic_load_n(&s->skel->bss->inflight[c].n, __ATOMIC_SEQ_CST) == v &&
		       smp_now_us() - t0 < 100000)
			sched_yield();
	}
	return (int)(e & 1);
}

/* Is a key of buffer buf? */
typedef bool (*smp_key_of)(const void *key, int buf);

/* Grows the key and value arrays of a take to cap elements; 0 or -ENOMEM (both arrays
 * stay valid for the caller to free). */
static int smp_grow(char **k, char **v, size_t cap, size_t ksz, size_t vsz)
{
	char *nk = realloc(*k, cap * ksz), *nv;

	if (nk)
		*k = nk;
	nv = realloc(*v, cap * vsz);
	if (nv)
		*v = nv;
	return nk && nv ? 0 : -ENOMEM;
}

/* Deletes n keys of ksz bytes in batches; a key the kernel refuses (gone already) is
 * deleted alone, then the rest in a batch again. */
static void smp_delete_keys(int fd, const char *keys, size_t n, size_t ksz)
{
	size_t i;
	LIBBPF_OPTS(bpf_map_batch_opts, opts);

	for (i = 0; i < n;) {
		__u32 cnt = (__u32)(n - i);

		if (bpf_map_delete_batch(fd, keys + i * ksz, &cnt, &opts) == 0)
			break;
		i += cnt;
		if (!cnt)
			bpf_map_delete_elem(fd, keys + i++ * ksz);
	}
}

/* Reads and deletes the elements of buffer buf of a hash map (BPF writes only the other
 * buffer's, adding them at the head of their buckets, so the walk misses none of buf's):
 * *keys and *vals get malloc'ed arrays; the count, or -errno. */
static long smp_take(int fd, size_t ksz, size_t vsz, smp_key_of of, int buf, void **keys, void **vals)
{
	size_t cap = 1024, n = 0, i;
	char *k = malloc(cap * ksz), *v = malloc(cap * vsz);
	char prev[64], cur[64];
	int have = 0;

	if (!k || !v)
		goto nomem;
	while (bpf_map_get_next_key(fd, have ? prev : NULL, cur) == 0) {
		memcpy(prev, cur, ksz);
		have = 1;
		if (!of(cur, buf) || bpf_map_lookup_elem(fd, cur, v + n * vsz))
			continue;
		memcpy(k + n * ksz, cur, ksz);
		if (++n == cap && smp_grow(&k, &v, cap *= 2, ksz, vsz))
			goto nomem;
	}
	for (i = 0; i < n; i++)
		bpf_map_delete_elem(fd, k + i * ksz);
	*keys = k;
	*vals = v;
	return (long)n;
nomem:
	free(k);
	free(v);
	return -ENOMEM;
}

/* Keys read per lookup batch (a bucket never holds more: the maps hold 16384). */
#define SMP_BATCH 4096

/* smp_take with batched syscalls: the map is read SMP_BATCH elements per call and buf's
 * elements deleted in batches, instead of three calls per element (of NULL: every
 * element is buf's, each batch is deleted as it is read). -ENOTSUP when the kernel
 * cannot (the caller falls back to smp_take). */
static long smp_take_batch(int fd, size_t ksz, size_t vsz, smp_key_of of, int buf, void **keys, void **vals)
{
	size_t cap = SMP_BATCH, n = 0, i, m;
	char *k = malloc(cap * ksz), *v = malloc(cap * vsz);
	__u64 in[8], out[8];
	bool first = true, end = false;
	LIBBPF_OPTS(bpf_map_batch_opts, opts);

	if (!k || !v)
		goto nomem;
	while (!end) {
		__u32 cnt = SMP_BATCH;
		int r;

		if (cap - n < SMP_BATCH && smp_grow(&k, &v, cap = 2 * cap + SMP_BATCH, ksz, vsz))
			goto nomem;
		if (of)
			r = bpf_map_lookup_batch(fd, first ? NULL : in, out, k + n * ksz, v + n * vsz, &cnt, &opts);
		else
			r = bpf_map_lookup_and_delete_batch(fd, first ? NULL : in, out, k + n * ksz, v + n * vsz, &cnt,
							    &opts);
		if (r && errno != ENOENT && first) {
			free(k);
			free(v);
			return -ENOTSUP;
		}
		end = r != 0;
		n += cnt;
		memcpy(in, out, sizeof(in));
		first = false;
	}
	if (!of) {
		*keys = k;
		*vals = v;
		return (long)n;
	}
	/* Keep buf's elements, in order. */
	for (i = m = 0; i < n; i++)
		if (of(k + i * ksz, buf)) {
			if (m != i) {
				memcpy(k + m * ksz, k + i * ksz, ksz);
				memcpy(v + m * vsz, v + i * vsz, vsz);
			}
			m++;
		}
	smp_delete_keys(fd, k, m, ksz);
	*keys = k;
	*vals = v;
	return (long)m;
nomem:
	free(k);
	free(v);
	return -ENOMEM;
}

/* Buffers of count, host and stack keys. */
static bool smp_count_of(const void *key, int buf)
{
	return !!(((const struct nupp_smp_count_key *)key)->tgid & NUPP_SMP_TGID_BUF) == !!buf;
}

static bool smp_host_of(const void *key, int buf)
{
	return ((const struct nupp_smp_host_key *)key)->buf == (__u32)buf;
}

static bool smp_stack_of(const void *key, int buf)
{
	__u64 h;

	memcpy(&h, key, 8);
	return !!(h & NUPP_SMP_STACK_BUF) == !!buf;
}

/* Bucket of stack key k among nb (a power of two). */
static size_t smp_stk_bucket(__u64 k, size_t nb)
{
	return (size_t)((k * 0x9e3779b97f4a7c15ull) >> 20) & (nb - 1);
}

/* The stack held for key k, or NULL. */
static struct smp_stk *smp_stk_get(struct nupp_sampler *s, __u64 k)
{
	struct smp_stk *c;

	if (!s->stk_nb)
		return NULL;
	for (c = s->stk[smp_stk_bucket(k, s->stk_nb)]; c; c = c->next)
		if (c->key == k)
			return c;
	return NULL;
}

/* Takes c out of its buffer's list (c->older and c->newer are left as they were). */
static void smp_stk_unlist(struct nupp_sampler *s, struct smp_stk *c)
{
	int b = !!(c->key & NUPP_SMP_STACK_BUF);

	if (c->older)
		c->older->newer = c->newer;
	else if (s->stk_old[b] == c)
		s->stk_old[b] = c->newer;
	if (c->newer)
		c->newer->older = c->older;
	else if (s->stk_new[b] == c)
		s->stk_new[b] = c->older;
}

/* Marks c counted in this drain: the newest of its buffer's list, which stays ordered by
 * the drain that last counted each stack. */
static void smp_stk_used(struct nupp_sampler *s, struct smp_stk *c)
{
	int b = !!(c->key & NUPP_SMP_STACK_BUF);

	c->used = s->drains;
	if (s->stk_new[b] == c)
		return;
	smp_stk_unlist(s, c);
	c->older = s->stk_new[b];
	c->newer = NULL;
	if (c->older)
		c->older->newer = c;
	else
		s->stk_old[b] = c;
	s->stk_new[b] = c;
}

/* Holds a copy of rec (size bytes) for key k; NULL when out of memory. */
static struct smp_stk *smp_stk_add(struct nupp_sampler *s, __u64 k, const struct nupp_smp_stack *rec, size_t size)
{
	size_t n = s->stk_n[0] + s->stk_n[1], b;
	struct smp_stk *c;

	if (n + 1 > s->stk_nb) {
		size_t nb = s->stk_nb ? 2 * s->stk_nb : 4096, i;
		struct smp_stk **t = calloc(nb, sizeof(*t)), *next;

		if (!t)
			return NULL;
		for (i = 0; i < s->stk_nb; i++)
			for (c = s->stk[i]; c; c = next) {
				next = c->next;
				b = smp_stk_bucket(c->key, nb);
				c->next = t[b];
				t[b] = c;
			}
		free(s->stk);
		s->stk = t;
		s->stk_nb = nb;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->rec = malloc(size))) {
		free(c);
		return NULL;
	}
	memcpy(c->rec, rec, size);
	c->size = size;
	c->key = k;
	b = smp_stk_bucket(k, s->stk_nb);
	c->next = s->stk[b];
	s->stk[b] = c;
	s->stk_n[!!(k & NUPP_SMP_STACK_BUF)]++;
	smp_stk_used(s, c);
	return c;
}

/* Lets go of buffer buf's stacks not counted for SMP_STK_IDLE of its drains (all: every
 * one; crowded past half the room: the least recently counted down to three eighths of
 * it, a few each drain rather than most at once), deleting them from the stacks map
 * (sfd >= 0), in batches. The oldest come first in the buffer's list: the walk stops at
 * the first stack to keep. */
static void smp_stk_evict(struct nupp_sampler *s, int sfd, int buf, bool all)
{
	__u64 *del = NULL, idle = 2 * SMP_STK_IDLE;
	size_t n = 0, cap = 0, keep = s->stk_n[buf] > s->opts.max_stacks / 2 ? s->opts.max_stacks / 8 * 3 : SIZE_MAX;
	struct smp_stk **pp, *c;

	while ((c = s->stk_old[buf]) && (all || c->used + idle < s->drains || s->stk_n[buf] > keep)) {
		if (sfd >= 0 && n == cap) {
			__u64 *nd = realloc(del, (cap = cap ? 2 * cap : 256) * sizeof(*del));

			if (!nd)
				break; /* the rest are deleted at a later drain */
			del = nd;
		}
		if (sfd >= 0)
			del[n++] = c->key;
		smp_stk_unlist(s, c);
		for (pp = &s->stk[smp_stk_bucket(c->key, s->stk_nb)]; *pp != c; pp = &(*pp)->next)
			;
		*pp = c->next;
		s->stk_n[buf]--;
		free(c->rec);
		free(c->name);
		free(c);
	}
	if (n)
		smp_delete_keys(sfd, (const char *)del, n, sizeof(*del));
	free(del);
}

/* Names the host samples of a drain ("[host];<symbol>") and adds them to out. */
static int smp_host_rows(struct nupp_sampler *s, const struct nupp_smp_host_key *keys, const __u64 *vals,
			 long n, struct nupp_sample_set *out)
{
	struct nupp_sample_row row = { 0 };
	char name[320], stack[340];
	long i;
	int e;

	for (i = 0; i < n; i++) {
		struct smp_target *t = smp_target(s, (pid_t)keys[i].tgid);

		out->host_samples += vals[i];
		e = t && t->amap ? nupp_addrmap_name(t->amap, keys[i].ip, name, sizeof(name)) : -ENOENT;
		if (e < 0 && t && t->amap && !t->amap_read) {
			/* Mapped since the mappings were read (the target may be gone: kept). */
			nupp_addrmap_refresh(t->amap);
			t->amap_read = true;
			e = nupp_addrmap_name(t->amap, keys[i].ip, name, sizeof(name));
		}
		if (e < 0)
			snprintf(name, sizeof(name), "[unknown]");
		snprintf(stack, sizeof(stack), "[host];%s", name);
		row.pid = (pid_t)keys[i].tgid;
		row.tid = (pid_t)keys[i].tid;
		row.count = row.ccode = vals[i];
		e = nupp_sample_set_add(out, "", stack, &row);
		if (e)
			return e;
	}
	return 0;
}

/* Reads the BPF counts, names every frame and adds them to out. */
int nupp_sampler_drain(struct nupp_sampler *s, struct nupp_sample_set *out)
{
	int ncpu = libbpf_num_possible_cpus(), lfd = bpf_map__fd(s->skel->maps.lost), old, cfd, sfd, hfd;
	struct nupp_smp_count_key *keys = NULL;
	struct nupp_smp_count *cvals = NULL;
	struct nupp_smp_host_key *hkeys = NULL;
	__u64 *hvals = NULL;
	struct smp_row *rows = NULL;
	size_t nrows = 0, i;
	long nkeys = 0, nhosts = 0;
	__u64 *vals = NULL, t0 = smp_now_us(), full = 0, walk = 0;
	bool swept = false, reread = false;
	__u32 r;
	int e = 0;

	if (ncpu <= 0)
		return -ENOMEM;
	s->ev_handled = 0;
	smp_consume(s, SMP_DRAIN_EVENTS);
	/* Every sample counted from now on has a prototype generation >= pgen. */
	for (i = 0; i < (size_t)s->ntargets; i++) {
		struct smp_target *t = &s->targets[i];
		struct nupp_smp_proc p;
		__u32 pk = (__u32)t->pid;

		t->amap_read = false;
		if (smp_target_ready(s, t) || bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.procs), &pk, &p))
			continue;
		t->pgen = p.pgen;
		nupp_sym_set_vms(t->sym, p.g, (int)(p.nvm < NUPP_SMP_MAX_VMS ? p.nvm : NUPP_SMP_MAX_VMS));
		if (p.nlost != t->nlost || t->reset) {
			/* Every lost generation is <= pgen (taken before its event was sent) and
			 * above the frees read: only samples of that window are given up. */
			__u64 lo = nupp_sym_lost(t->sym, p.pgen);

			nupp_pr(NUPP_WARN, "PID %d: %llu prototype events lost (ring buffer full): samples of "
				"generations %llu-%llu are counted as lost (symbolize)\n",
				(int)t->pid, (unsigned long long)(p.nlost - t->nlost), (unsigned long long)lo,
				(unsigned long long)p.pgen);
			t->nlost = p.nlost;
			t->reset = 0;
		}
		nupp_sym_gen_seen(t->sym, p.pgen);
	}
	/* BPF counts into the other buffer from now on: this one is read and emptied whole,
	 * with nothing writing it (no count is lost to the reading). */
	old = smp_flip(s);
	s->drains++;
	/* Every stack this buffer counted was sent before its count (no sample of the buffer
	 * is in flight now): held from here on. */
	ring_buffer__consume(s->stk_rb);
	cfd = bpf_map__fd(old ? s->skel->maps.counts1 : s->skel->maps.counts0);
	sfd = bpf_map__fd(s->skel->maps.stacks);
	hfd = bpf_map__fd(s->skel->maps.hosts);
	nkeys = smp_take_batch(cfd, sizeof(*keys), sizeof(*cvals), NULL, old, (void **)&keys, (void **)&cvals);
	if (nkeys == -ENOTSUP)
		nkeys = smp_take(cfd, sizeof(*keys), sizeof(*cvals), smp_count_of, old, (void **)&keys,
				 (void **)&cvals);
	/* The hosts map only when the buffer created a host key (a walk of its every bucket
	 * costs as much as the counts map's). Nothing writes the buffer now. */
	if (__atomic_exchange_n(&s->skel->bss->hnew[old], 0, __ATOMIC_SEQ_CST))
		nhosts = smp_take_batch(hfd, sizeof(*hkeys), sizeof(*hvals), smp_host_of, old, (void **)&hkeys,
					(void **)&hvals);
	if (nhosts == -ENOTSUP)
		nhosts = smp_take(hfd, sizeof(*hkeys), sizeof(*hvals), smp_host_of, old, (void **)&hkeys,
				  (void **)&hvals);
	if (nkeys < 0 || nhosts < 0) {
		e = -ENOMEM;
		goto out;
	}
	rows = calloc(nkeys ? nkeys : 1, sizeof(*rows));
	if (!rows) {
		e = -ENOMEM;
		goto out;
	}
	for (i = 0; i < (size_t)nkeys; i++) {
		struct smp_row *row = &rows[nrows];
		struct smp_stk *c = smp_stk_get(s, keys[i].stack);

		row->c = cvals[i];
		/* BPF sends a stack for the buffer before its first count there (or sent it
		 * for an earlier count): held here. When its record was lost (the ring was
		 * full, or out of memory), the same stack held for the other buffer (the
		 * same hash of the same frames) serves: each buffer has its own sent, so
		 * that either can be emptied alone. */
		if (!c) {
			struct smp_stk *o = smp_stk_get(s, keys[i].stack ^ NUPP_SMP_STACK_BUF);

			if (o) {
				c = smp_stk_add(s, keys[i].stack, o->rec, o->size);
				if (!c) {
					e = -ENOMEM;
					goto out;
				}
				if (o->name) /* one stack, one name */
					smp_stk_name(c, o->name, o->name_tgid, o->name_cut, o->name_table);
			}
		}
		/* A record not read yet: the ring's reader stops at a record reserved and not
		 * yet committed, which a sample of the other buffer may hold for a moment
		 * before this buffer's last ones. Read on once. */
		if (!c && !reread) {
			reread = true;
			ring_buffer__consume(s->stk_rb);
			c = smp_stk_get(s, keys[i].stack);
		}
		if (!c) {
			out->lost[NUPP_LOST_SYMBOLIZE] += smp_total(&row->c);
			continue;
		}
		smp_stk_used(s, c);
		row->st = c->rec; /* held until a later drain: this one counted it */
		row->size = c->size;
		row->held = c;
		row->key = keys[i];
		row->key.tgid &= ~NUPP_SMP_TGID_BUF;
		nrows++;
	}
	/* Lost counters of this buffer: per-CPU values, summed and zeroed. */
	vals = calloc(ncpu, sizeof(*vals));
	if (!vals) {
		e = -ENOMEM;
		goto out;
	}
	for (r = 0; r < NUPP_SMP_LOST_N; r++) {
		__u32 idx = (__u32)old * NUPP_SMP_LOST_N + r;
		int c2;

		if (bpf_map_lookup_elem(lfd, &idx, vals))
			continue;
		/* The stack ring full is reported as a full map (nothing to sweep for it). */
		for (c2 = 0; c2 < ncpu; c2++)
			out->lost[r == NUPP_SMP_LOST_RING_FULL ? NUPP_LOST_MAP_FULL : r] += vals[c2];
		for (c2 = 0; r != NUPP_SMP_LOST_MAP_FULL && r != NUPP_SMP_LOST_RING_FULL && c2 < ncpu; c2++)
			walk += vals[c2];
		if (r == NUPP_SMP_LOST_MAP_FULL)
			for (c2 = 0; c2 < ncpu; c2++)
				full += vals[c2];
		memset(vals, 0, ncpu * sizeof(*vals));
		bpf_map_update_elem(lfd, &idx, vals, BPF_ANY);
	}
	/* A stack stored without its count (the counts map was full) would stay: swept. */
	if (full) {
		__u64 *sk = NULL;
		void *sv = NULL;

		if (smp_take(sfd, sizeof(__u64), sizeof(__u32), smp_stack_of, old, (void **)&sk, &sv) >= 0) {
			free(sk);
			free(sv);
		}
		swept = true;
	}
	/* Where the named Lua frames' functions are defined goes to out's frame table. */
	for (i = 0; i < (size_t)s->ntargets; i++)
		if (s->targets[i].sym)
			nupp_sym_set_frames(s->targets[i].sym, &out->frames);
	smp_name_rows(s, rows, nrows, &out->frames);
	for (i = 0; i < (size_t)s->ntargets; i++)
		if (s->targets[i].sym && nupp_sym_set_frames(s->targets[i].sym, NULL))
			e = -ENOMEM;
	if (e)
		goto out;
	nupp_pr(NUPP_DEBUG, "drain: %zu stacks, %ld host IPs, %llu events, %llu stack records refused so far, %llu us\n",
		nrows, nhosts, (unsigned long long)s->ev_handled, (unsigned long long)s->stk_lost,
		(unsigned long long)(smp_now_us() - t0));
	for (i = 0; i < nrows; i++) {
		e = smp_add_row(&rows[i], out);
		if (e)
			goto out;
	}
	smp_hold_names(rows, nrows, out->frames.id);
	e = smp_host_rows(s, hkeys, hvals, nhosts, out);
	if (e)
		goto out;
	/* Stacks of this buffer it has not counted for a while (or, crowded, the oldest),
	 * once the rows, which point at the records counted in this drain, are named. */
	if (swept)
		smp_stk_evict(s, -1, old, true); /* none of them is in the map any more */
	else
		smp_stk_evict(s, sfd, old, false);
	/* Where walks failed (mode, walker source line), for -v diagnosis: read when walks
	 * failed, at most every SMP_WHERE_US (the counters add up meanwhile). */
	s->where_due |= walk != 0;
	if (s->where_due && t0 >= s->where_next) {
		smp_lost_where(s);
		s->where_due = false;
		s->where_next = t0 + SMP_WHERE_US;
	}
	for (i = 0; i < (size_t)s->ntargets; i++) {
		if (s->targets[i].traces)
			nupp_traces_purge(s->targets[i].traces, t0);
		/* Copies of prototypes that died before the drain began name no later sample. */
		if (s->targets[i].sym)
			nupp_sym_purge(s->targets[i].sym, s->targets[i].pgen);
	}
out:
	for (i = 0; rows && i < nrows; i++)
		smp_row_unname(&rows[i]);
	free(rows);
	free(vals);
	free(keys);
	free(cvals);
	free(hkeys);
	free(hvals);
	return e;
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
		smp_stk_evict(s, -1, 0, true);
		smp_stk_evict(s, -1, 1, true);
	}
	free(s->stk);
	for (i = 0; i < s->ntargets; i++) {
		nupp_sym_free(s->targets[i].sym);
		nupp_addrmap_free(s->targets[i].amap);
		nupp_traces_free(s->targets[i].traces);
	}
	sampler_bpf__destroy(s->skel);
	free(s);
}
