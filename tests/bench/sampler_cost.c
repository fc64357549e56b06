/* Bench driver for bench_sampler_cost.sh: runs a command under the real sampler program
 * with a CPU-clock event on that process only, so bpf_stats counts the target's runs and
 * nothing else, and prints what the walks found and what they cost. Built with
 * -DCOST_BASE, it also runs a second sampler build (base.skel.h, its names renamed to
 * base_bpf) on the same process at the same time, so both costs see the same machine. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "nupp/nupp.h"
#include "nupp/sampler_abi.h"
#include "sampler.skel.h"
#ifdef COST_BASE
#include "base.skel.h"
#endif
/* -g: the base's function cache on or off, when it has one (built with
 * -DCOST_BASE_HAS_FNC for a base whose sampler declares fn_cache). */
#ifdef COST_BASE_HAS_FNC
#define COST_BASE_FNC(b, on) ((b)->rodata->fn_cache = (__u32)(on))
#else
#define COST_BASE_FNC(b, on) ((void)(on))
#endif

#define COST_MAX_KEYS 65536

/* The depth of each stack sent on the stack ring, by key (open addressing). */
#define COST_STK_SLOTS (2 * COST_MAX_KEYS)
static __u64 cost_stk_key[COST_STK_SLOTS];
static __u32 cost_stk_depth[COST_STK_SLOTS];

static __u32 cost_stk_slot(__u64 key)
{
	__u32 i = (__u32)((key * 0x9e3779b97f4a7c15ull) >> 40) & (COST_STK_SLOTS - 1);

	while (cost_stk_key[i] && cost_stk_key[i] != key)
		i = (i + 1) & (COST_STK_SLOTS - 1);
	return i;
}

/* Ring callback: notes the depth of a stack sent (struct nupp_smp_stack_rec). */
static int cost_on_stack(void *ctx, void *data, size_t size)
{
	const struct nupp_smp_stack_rec *r = data;
	__u32 *n = ctx, i;

	if (size < sizeof(r->key) + offsetof(struct nupp_smp_stack, frames) || !r->key || *n >= COST_MAX_KEYS)
		return 0;
	i = cost_stk_slot(r->key);
	if (!cost_stk_key[i])
		(*n)++;
	cost_stk_key[i] = r->key;
	cost_stk_depth[i] = r->st.depth;
	return 0;
}

/* Sleeps ms milliseconds. */
static void cost_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Sums a per-CPU u64 value of map fd at key. */
static __u64 cost_percpu_sum(int fd, __u32 key, int ncpu)
{
	__u64 vals[ncpu], sum = 0;
	int i;

	if (bpf_map_lookup_elem(fd, &key, vals))
		return 0;
	for (i = 0; i < ncpu; i++)
		sum += vals[i];
	return sum;
}

/* run_cnt and run_time_ns of program prog so far (0 when unknown). */
static void cost_prog_stats(const struct bpf_program *prog, __u64 *cnt, __u64 *ns)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	*cnt = *ns = 0;
	if (!bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len)) {
		*cnt = info.run_cnt;
		*ns = info.run_time_ns;
	}
}

/* The sampler's walk counters so far, summed over CPUs, into sum[NUPP_SMP_WS_N]. */
static void cost_wstat(struct sampler_bpf *skel, int ncpu, __u64 *sum)
{
	struct {
		__u64 v[NUPP_SMP_WS_N];
	} *ws = calloc((size_t)ncpu, sizeof(*ws));
	int i, j;

	memset(sum, 0, NUPP_SMP_WS_N * sizeof(*sum));
	if (ws && !bpf_map_lookup_elem(bpf_map__fd(skel->maps.wstat), &(__u32){ 0 }, ws))
		for (i = 0; i < ncpu; i++)
			for (j = 0; j < NUPP_SMP_WS_N; j++)
				sum[j] += ws[i].v[j];
	free(ws);
}

/* The lifetime probes the sampler's caches rely on, attached before vm_open as
 * nupp_sampler_watch does: prototype frees and trace array changes. */
#define COST_PROBES 4
static const char *const cost_probe[COST_PROBES][2] = {
	{ "nupp_smp_proto_free", "proto_free" },
	{ "nupp_smp_trace_stop", "trace_stop" },
	{ "nupp_smp_trace_free", "trace_free" },
	{ "nupp_smp_trace_flush", "trace_flush" },
};

/* Attaches the sampler's lifetime programs the build has; links in l[COST_PROBES]. */
static void cost_attach_probes(struct bpf_object *obj, pid_t pid, const char *bin, struct bpf_link **l)
{
	struct bpf_program *prog;
	int i;

	for (i = 0; i < COST_PROBES; i++) {
		prog = bpf_object__find_program_by_name(obj, cost_probe[i][0]);
		l[i] = prog ? bpf_program__attach_usdt(prog, pid, bin, "luajit", cost_probe[i][1], NULL) : NULL;
	}
}

/* Destroys the links of cost_attach_probes. */
static void cost_detach_probes(struct bpf_link **l)
{
	int i;

	for (i = 0; i < COST_PROBES; i++)
		bpf_link__destroy(l[i]);
}

/* Sizes each per-CPU cache map the sampler object has for ncpu CPUs, as user/core/sampler.c
 * does (as declared, a cache map holds one CPU's entries: the build's own count), so a
 * base build of another cache layout is sized as its own CLI would size it. */
static void cost_size_caches(struct bpf_object *obj, __u32 ncpu)
{
	static const char *const cache[] = { "fcache", "fncache" };
	struct bpf_map *m;
	unsigned i;

	for (i = 0; i < sizeof(cache) / sizeof(cache[0]); i++)
		if ((m = bpf_object__find_map_by_name(obj, cache[i])))
			bpf_map__set_max_entries(m, ncpu * bpf_map__max_entries(m));
}

/* usage: sampler_cost [-F HZ] [-e DEPTH] [-t] [-w MS] [-f 0|1] [-g 0|1] CMD [ARGS...]; prints "key=value ..." lines
 * on stdout: samples stacked, lost (by reason), samples whose stack has DEPTH frames,
 * prototypes the target freed (luajit:proto_free), and run_time_ns / run_cnt of the
 * sampling program over the target's samples only; then the walk counters (ws_*, enum
 * nupp_smp_wstat), with -t also the time in the walk and in the store (the sampler then
 * reads the clock three times a sample). With -w, the costs and counters are those from MS
 * milliseconds after the target started (its caches warm) to its end. -f 0 (-g 0: the
 * base's) turns the function cache off. */
int main(int argc, char **argv)
{
	static struct nupp_smp_count_key keys[COST_MAX_KEYS];
	static int kbuf[COST_MAX_KEYS];
	struct ring_buffer *stk_rb = NULL;
	__u32 nstk = 0;
	struct perf_event_attr a = { .size = sizeof(a), .type = PERF_TYPE_SOFTWARE,
				     .config = PERF_COUNT_SW_CPU_CLOCK, .freq = 1 };
	struct bpf_link *vm_link = NULL, *plink = NULL, *pf_link[COST_PROBES] = { NULL };
	struct sampler_bpf *skel = NULL;
#ifdef COST_BASE
	struct base_bpf *bskel = NULL;
	struct bpf_link *bvm_link = NULL, *bplink = NULL, *bpf_link_pf[COST_PROBES] = { NULL };
	struct bpf_prog_info binfo;
	int bpfd = -1;
#endif
	struct nupp_smp_proc proc;
	struct nupp_smp_count_key k, next;
	struct bpf_prog_info info;
	__u32 info_len = sizeof(info), tgid;
	__u64 samples = 0, at_depth = 0, lost[NUPP_SMP_LOST_N] = { 0 }, depth_hist[NUPP_SMP_MAX_DEPTH + 1] = { 0 };
	static const char *const ws_name[NUPP_SMP_WS_N] = {
		"samples", "walks", "frames", "hits", "fills", "looks", "stale", "pgreads", "reads",
		"rbytes", "rwin", "rcode", "rfn", "newstack", "newcount", "walk_ns", "store_ns", "timed", "stolen", "copy_ns", "fnhits",
		"count_ns", "new_timed", "new_ns", "mark_ns", "ring_ns",
	};
	__u64 wsum[NUPP_SMP_WS_N] = { 0 }, wsum0[NUPP_SMP_WS_N] = { 0 }, cnt0 = 0, ns0 = 0, bcnt0 = 0, bns0 = 0;
	__u64 frees = 0;
	int hz = 1000, want = 0, timed = 0, warm_ms = 0, gate[2], pfd = -1, stats_fd, ncpu, i, n = 0, have = 0;
	int wst = 0, rc = 1, b, fnc = 1, bfnc = 1;
	char bin[512], c;
	pid_t pid;

	while (argc > 2 && argv[1][0] == '-') {
		if (!strcmp(argv[1], "-F"))
			hz = atoi(argv[2]);
		else if (!strcmp(argv[1], "-e"))
			want = atoi(argv[2]);
		else if (!strcmp(argv[1], "-w"))
			warm_ms = atoi(argv[2]);
		else if (!strcmp(argv[1], "-f"))
			fnc = atoi(argv[2]);
		else if (!strcmp(argv[1], "-g"))
			bfnc = atoi(argv[2]);
		else if (!strcmp(argv[1], "-t")) {
			timed = 1; /* no argument */
			argv += 1;
			argc -= 1;
			continue;
		} else
			break;
		argv += 2;
		argc -= 2;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: %s [-F HZ] [-e DEPTH] [-t] [-w MS] [-f 0|1] [-g 0|1] CMD [ARGS...]\n", argv[0]);
		return 2;
	}
	if (nupp_vm_binary_for_exe(argv[1], bin, sizeof(bin))) {
		fprintf(stderr, "Error: cannot profile %s: %s\n", argv[1], nupp_errmsg());
		return 1;
	}
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0) {
		fprintf(stderr, "Error: cannot enable bpf statistics: %s\n", strerror(errno));
		return 1;
	}
	if (pipe(gate))
		return 1;
	pid = fork();
	if (pid == 0) {
		close(gate[1]);
		if (read(gate[0], &c, 1) != 1)
			_exit(126);
		execvp(argv[1], argv + 1);
		_exit(127);
	}
	close(gate[0]);
	tgid = (__u32)pid;
	skel = sampler_bpf__open();
	/* As user/core/sampler.c sizes them: stacks of the default depth (and the frame that names
	 * the outermost). */
	if (skel) {
		skel->rodata->max_depth = NUPP_SMP_DEFAULT_DEPTH + 1;
		skel->rodata->time_stats = (__u32)timed;
		skel->rodata->fn_cache = (__u32)fnc;
		/* A frame cache for every CPU, as user/core/sampler.c sizes it. */
		ncpu = libbpf_num_possible_cpus();
		skel->rodata->fc_ncpu = (__u32)(ncpu < NUPP_SMP_MAX_CPUS ? ncpu : NUPP_SMP_MAX_CPUS);
		cost_size_caches(skel->obj, skel->rodata->fc_ncpu);
		/* The stack marks as user/core/sampler.c sizes them for its default max_stacks. */
		skel->rodata->stk_slots = nupp_smp_stack_slots(NUPP_SMP_DEFAULT_STACKS);
		bpf_map__set_max_entries(skel->maps.stacks, NUPP_SMP_NBUF * skel->rodata->stk_slots);
	}
	/* The stacks of the whole run stay in the stack ring (read at the end). */
	if (skel && (bpf_map__set_max_entries(skel->maps.stk_ring, 64u << 20) || sampler_bpf__load(skel))) {
		sampler_bpf__destroy(skel);
		skel = NULL;
	}
	if (!skel) {
		fprintf(stderr, "Error: cannot load the sampler: %s\n", strerror(errno));
		goto out;
	}
	/* The VM's g and layout arrive with luajit:vm_open, as in nupp_sampler_watch. */
	memset(&proc, 0, sizeof(proc));
	if (bpf_map_update_elem(bpf_map__fd(skel->maps.procs), &tgid, &proc, BPF_ANY))
		goto out;
	/* Lifetime probes first: the caches of a VM seen opening rely on them. */
	cost_attach_probes(skel->obj, pid, bin, pf_link);
	vm_link = bpf_program__attach_usdt(skel->progs.nupp_smp_vm_open, pid, bin, "luajit", "vm_open", NULL);
	if (!vm_link) {
		fprintf(stderr, "Error: cannot attach to luajit:vm_open in %s: %s\n", bin, strerror(errno));
		goto out;
	}
#ifdef COST_BASE
	/* Sized as the sampler above (a base stores stacks of the same size). */
	bskel = base_bpf__open();
	if (bskel) {
		bskel->rodata->max_depth = NUPP_SMP_DEFAULT_DEPTH + 1;
		COST_BASE_FNC(bskel, bfnc);
		/* A frame cache for every CPU too: with the default (CPU 0 only) the base walked
		 * the other CPUs' samples without one, and looked twice as slow. */
		bskel->rodata->fc_ncpu = skel->rodata->fc_ncpu;
		cost_size_caches(bskel->obj, bskel->rodata->fc_ncpu);
		/* A base that stores its stacks in the map (not on a ring) stores them whole. */
		if ((bpf_map__value_size(bskel->maps.stacks) > 64 &&
		     bpf_map__set_value_size(bskel->maps.stacks, NUPP_SMP_STACK_SIZE(NUPP_SMP_DEFAULT_DEPTH + 1))) ||
		    base_bpf__load(bskel)) {
			base_bpf__destroy(bskel);
			bskel = NULL;
		}
	}
	if (!bskel || bpf_map_update_elem(bpf_map__fd(bskel->maps.procs), &tgid, &proc, BPF_ANY)) {
		fprintf(stderr, "Error: cannot load the base sampler: %s\n", strerror(errno));
		goto out;
	}
	cost_attach_probes(bskel->obj, pid, bin, bpf_link_pf);
	bvm_link = bpf_program__attach_usdt(bskel->progs.nupp_smp_vm_open, pid, bin, "luajit", "vm_open", NULL);
	if (!bvm_link) {
		fprintf(stderr, "Error: cannot attach the base sampler to luajit:vm_open: %s\n", strerror(errno));
		goto out;
	}
#endif
	if (write(gate[1], "g", 1) != 1)
		goto out;
	close(gate[1]);
	for (i = 0; i < 5000; i++) {
		if (!bpf_map_lookup_elem(bpf_map__fd(skel->maps.procs), &tgid, &proc) && proc.nvm)
			break;
		cost_sleep_ms(1);
	}
	if (!proc.nvm) {
		fprintf(stderr, "Error: the target opened no VM within 5 s\n");
		goto out;
	}
	/* Sample this process only: every run of the program is a target run. */
	a.sample_freq = (__u64)hz;
	pfd = (int)syscall(__NR_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (pfd < 0) {
		fprintf(stderr, "Error: cannot open a CPU-clock event on PID %d: %s\n", (int)pid, strerror(errno));
		goto out;
	}
	plink = bpf_program__attach_perf_event(skel->progs.nupp_sample, pfd);
	if (!plink) {
		fprintf(stderr, "Error: cannot attach the sampler: %s\n", strerror(errno));
		goto out;
	}
#ifdef COST_BASE
	for (i = 0; i < 5000; i++) {
		if (!bpf_map_lookup_elem(bpf_map__fd(bskel->maps.procs), &tgid, &proc) && proc.nvm)
			break;
		cost_sleep_ms(1);
	}
	bpfd = (int)syscall(__NR_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	bplink = bpfd < 0 ? NULL : bpf_program__attach_perf_event(bskel->progs.nupp_sample, bpfd);
	if (!proc.nvm || !bplink) {
		fprintf(stderr, "Error: cannot attach the base sampler: %s\n", strerror(errno));
		goto out;
	}
#endif
	/* -w: the costs and counters from MS ms after the start on (the caches warm). */
	ncpu = libbpf_num_possible_cpus();
	if (warm_ms > 0) {
		cost_sleep_ms(warm_ms);
		if (waitpid(pid, &wst, WNOHANG) == pid) {
			fprintf(stderr, "Error: the target exited within the warm-up (-w %d)\n", warm_ms);
			pid = 0;
			goto out;
		}
		cost_prog_stats(skel->progs.nupp_sample, &cnt0, &ns0);
		cost_wstat(skel, ncpu, wsum0);
#ifdef COST_BASE
		cost_prog_stats(bskel->progs.nupp_sample, &bcnt0, &bns0);
#endif
	}
	while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
		;
	pid = 0;
	/* Prototypes freed, as luajit:proto_free reported them in batches (the sampler's
	 * pfrees counts only the prototypes its samples met). */
	frees = __atomic_load_n(&skel->bss->pdead, __ATOMIC_RELAXED);
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(bpf_program__fd(skel->progs.nupp_sample), &info, &info_len))
		goto out;
	/* Samples by stack depth: the stacks sent. */
	stk_rb = ring_buffer__new(bpf_map__fd(skel->maps.stk_ring), cost_on_stack, &nstk, NULL);
	if (!stk_rb)
		goto out;
	ring_buffer__consume(stk_rb);
	/* Counts of both buffers (a map each). */
	for (b = 0; b < NUPP_SMP_NBUF; b++) {
		int cfd = bpf_map__fd(b ? skel->maps.counts1 : skel->maps.counts0);

		for (have = 0; n < COST_MAX_KEYS && bpf_map_get_next_key(cfd, have ? &k : NULL, &next) == 0;) {
			keys[n] = next;
			kbuf[n++] = b;
			k = next;
			have = 1;
		}
	}
	for (i = 0; i < n; i++) {
		struct nupp_smp_count cnt;
		__u64 tot = 0;
		int j;

		__u32 si = cost_stk_slot(keys[i].stack);

		if (bpf_map_lookup_elem(bpf_map__fd(kbuf[i] ? skel->maps.counts1 : skel->maps.counts0), &keys[i], &cnt) ||
		    cost_stk_key[si] != keys[i].stack)
			continue;
		for (j = 0; j < NUPP_SMP_NSTATES; j++)
			tot += cnt.n[j];
		samples += tot;
		if (cost_stk_depth[si] <= NUPP_SMP_MAX_DEPTH)
			depth_hist[cost_stk_depth[si]] += tot;
	}
	ncpu = libbpf_num_possible_cpus();
	for (i = 0; i < NUPP_SMP_LOST_N; i++)
		lost[i] = cost_percpu_sum(bpf_map__fd(skel->maps.lost), (__u32)i, ncpu);
	if (want >= 0 && want <= NUPP_SMP_MAX_DEPTH)
		at_depth = depth_hist[want];
	/* The walk counters, summed over CPUs (after the warm-up). */
	cost_wstat(skel, ncpu, wsum);
	for (i = 0; i < NUPP_SMP_WS_N; i++)
		printf("%sws_%s=%llu", i ? " " : "", ws_name[i], (unsigned long long)(wsum[i] - wsum0[i]));
	printf("\n");
	printf("samples=%llu stacks=%d at_depth=%llu lost_no_vm=%llu lost_fault=%llu lost_bad=%llu lost_trunc=%llu "
	       "lost_full=%llu frees=%llu run_cnt=%llu run_time_ns=%llu ns_per_run=%.0f\n",
	       (unsigned long long)samples, n, (unsigned long long)at_depth, (unsigned long long)lost[0],
	       (unsigned long long)lost[1], (unsigned long long)lost[2], (unsigned long long)lost[3],
	       (unsigned long long)(lost[NUPP_SMP_LOST_MAP_FULL] + lost[NUPP_SMP_LOST_RING_FULL]), (unsigned long long)frees, (unsigned long long)(info.run_cnt - cnt0),
	       (unsigned long long)(info.run_time_ns - ns0),
	       info.run_cnt > cnt0 ? (double)(info.run_time_ns - ns0) / (double)(info.run_cnt - cnt0) : 0.0);
#ifdef COST_BASE
	memset(&binfo, 0, sizeof(binfo));
	info_len = sizeof(binfo);
	if (bpf_obj_get_info_by_fd(bpf_program__fd(bskel->progs.nupp_sample), &binfo, &info_len))
		goto out;
	printf("base_run_cnt=%llu base_run_time_ns=%llu base_ns_per_run=%.0f\n", (unsigned long long)(binfo.run_cnt - bcnt0),
	       (unsigned long long)(binfo.run_time_ns - bns0),
	       binfo.run_cnt > bcnt0 ? (double)(binfo.run_time_ns - bns0) / (double)(binfo.run_cnt - bcnt0) : 0.0);
#endif
	for (i = 0; i <= NUPP_SMP_MAX_DEPTH; i++)
		if (depth_hist[i] && i != want)
			fprintf(stderr, "sampler_cost: %llu samples at depth %d\n", (unsigned long long)depth_hist[i], i);
	rc = !WIFEXITED(wst) || WEXITSTATUS(wst);
out:
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
#ifdef COST_BASE
	bpf_link__destroy(bplink);
	if (bpfd >= 0)
		close(bpfd);
	bpf_link__destroy(bvm_link);
	cost_detach_probes(bpf_link_pf);
	base_bpf__destroy(bskel);
#endif
	bpf_link__destroy(plink);
	if (pfd >= 0)
		close(pfd);
	bpf_link__destroy(vm_link);
	cost_detach_probes(pf_link);
	sampler_bpf__destroy(skel);
	close(stats_fd);
	ring_buffer__free(stk_rb);
	return rc;
}
