/* Helpers of the sampler integration tests: run a workload under the real sampler,
 * drain while the target is alive, and check stacks against an expected call graph. */
#ifndef NUPP_SAMPLER_TEST_H
#define NUPP_SAMPLER_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <time.h>

#include "nupp/nupp.h"
#include "nupp/sampler.h"
#include "nupp/sampler_abi.h"
#include "nupp_test.h"

/* A workload started gated: it opens its VMs only after the sampler is attached, and
 * signals on done_fd when the work is over, then waits for the gate to close. */
struct smp_run {
	pid_t pid;
	int gate_w;  /* write end: one byte starts it, closing lets it exit */
	int done_r;  /* read end: readable when the workload finished */
};

/* Starts argv[0] (absolute) with NUPP_GATE_FD / NUPP_DONE_FD set, the gate on its
 * stdin and the done pipe on its stdout; 0 or -errno. */
static inline int smp_run_start(struct smp_run *r, char *const argv[])
{
	int gate[2], done[2];

	r->pid = -1;
	r->gate_w = r->done_r = -1;
	if (pipe(gate) || pipe(done))
		return -errno;
	r->pid = fork();
	if (r->pid < 0)
		return -errno;
	if (r->pid == 0) {
		char g[16], d[16];

		close(gate[1]);
		close(done[0]);
		/* C hosts use the fds named in the environment; Lua scripts use
		 * io.read (the gate is stdin) and print (stdout is the done pipe). */
		snprintf(g, sizeof(g), "%d", gate[0]);
		snprintf(d, sizeof(d), "%d", done[1]);
		setenv("NUPP_GATE_FD", g, 1);
		setenv("NUPP_DONE_FD", d, 1);
		dup2(gate[0], 0);
		dup2(done[1], 1);
		execv(argv[0], argv);
		_exit(127);
	}
	close(gate[0]);
	close(done[1]);
	r->gate_w = gate[1];
	r->done_r = done[0];
	return 0;
}

/* Lets the workload start. */
static inline void smp_run_go(struct smp_run *r)
{
	char c = 'g';

	if (write(r->gate_w, &c, 1) != 1)
		perror("gate");
}

/* Has the workload signalled done (or died)? Waits up to ms; keeps what it wrote. */
static inline int smp_run_done(struct smp_run *r, int ms, char *line, size_t size)
{
	struct pollfd p = { .fd = r->done_r, .events = POLLIN };
	ssize_t n;

	if (poll(&p, 1, ms) <= 0)
		return 0;
	n = read(r->done_r, line, size - 1);
	line[n > 0 ? n : 0] = 0;
	return 1;
}

/* Closes the gate (the workload exits) and reaps it; returns the wait status. */
static inline int smp_run_finish(struct smp_run *r)
{
	close(r->gate_w);
	close(r->done_r);
	return nupp_test_reap(r->pid, 0);
}

/* Prints the rows (count, state split, stack) for diagnosis. */
static inline void smp_print(const struct nupp_sample_set *set, size_t max)
{
	size_t i;

	printf("samples %llu lost", (unsigned long long)set->samples);
	for (i = 0; i < NUPP_LOST__MAX; i++)
		printf(" %s=%llu", nupp_lost_name((enum nupp_lost)i), (unsigned long long)set->lost[i]);
	printf("\n");
	for (i = 0; i < set->n && i < max; i++) {
		const struct nupp_sample_row *r = &set->rows[i];

		printf("%6llu c%llu i%llu C%llu g%llu j%llu %s\n", (unsigned long long)r->count,
		       (unsigned long long)r->compiled, (unsigned long long)r->interpreted,
		       (unsigned long long)r->ccode, (unsigned long long)r->collecting,
		       (unsigned long long)r->compiling, r->stack);
	}
}

/* Lost samples in total. */
static inline unsigned long long smp_lost(const struct nupp_sample_set *set)
{
	unsigned long long n = 0;
	int i;

	for (i = 0; i < NUPP_LOST__MAX; i++)
		n += set->lost[i];
	return n;
}

/* Prints the ticks the sampler did not count because the hypervisor took the CPU
 * (steal), so a count short of a thread's CPU time says whether steal explains it. */
static inline void smp_print_steal(struct nupp_sampler *s)
{
	__u64 v[NUPP_SMP_WS_N];

	if (!nupp_sampler_walk_stats(s, v, NUPP_SMP_WS_N))
		printf("sampler: %llu ticks walked, %llu not counted (steal)\n",
		       (unsigned long long)v[NUPP_SMP_WS_SAMPLES], (unsigned long long)v[NUPP_SMP_WS_STOLEN]);
}

/* Samples a gated workload under a fresh sampler: watch + add before it starts, drain
 * every 200 ms until it says done (what it wrote goes to line), then drain once more
 * and let it exit. Returns 0 and fills set (and the BPF cost), or -errno. */
static inline int smp_profile_line(char *const argv[], const struct nupp_sampler_opts *o,
				   struct nupp_sample_set *set, __u64 *ns, __u64 *cnt, char *line, size_t size)
{
	struct smp_run run;
	char lib[512];
	struct nupp_sampler *s;
	int err = 0;

	if (nupp_vm_binary_for_exe(argv[0], lib, sizeof(lib)))
		return -ENOENT;
	s = nupp_sampler_open(o, &err);
	if (!s) {
		printf("nupp_sampler_open: %s\n", nupp_errmsg());
		return err;
	}
	err = smp_run_start(&run, argv);
	if (!err)
		err = nupp_sampler_watch(s, lib, run.pid);
	/* The child may not have exec'ed yet (a loaded machine): no VM in its maps (-ENOENT)
	 * is expected then, and luajit:vm_open (watched above) reports the VM as it opens. */
	if (!err && (err = nupp_sampler_add_pid(s, run.pid)) == -ENOENT)
		err = 0;
	if (err) {
		printf("attach: %s\n", nupp_errmsg());
		nupp_sampler_close(s);
		return err;
	}
	smp_run_go(&run);
	while (!smp_run_done(&run, 200, line, size) && !err)
		err = nupp_sampler_drain(s, set);
	if (!err)
		err = nupp_sampler_drain(s, set);
	*ns = *cnt = 0;
	nupp_sampler_stats(s, ns, cnt);
	smp_print_steal(s);
	smp_run_finish(&run);
	nupp_sampler_close(s);
	nupp_sample_set_sort(set);
	return err;
}

/* smp_profile_line without the done line. */
static inline int smp_profile(char *const argv[], const struct nupp_sampler_opts *o, struct nupp_sample_set *set,
			      __u64 *ns, __u64 *cnt)
{
	char line[256];

	return smp_profile_line(argv, o, set, ns, cnt, line, sizeof(line));
}

#endif /* NUPP_SAMPLER_TEST_H */
