/* Helpers of the sampler integration tests: run a workload under the real sampler,
 * drain while the target is alive, and check stacks against an expected call graph. */
#ifndef NUPP_SAMPLER_TEST_H
#define NUPP_SAMPLER_TEST_H

#include <fcntl.h>
#include <poll.h>
#include <time.h>

#include "nupp/nupp.h"
#include "nupp/sampler.h"
#include "nupp_test.h"

/* A workload started gated: it opens its VMs only after the sampler is attached, and
 * signals on done_fd when the work is over, then waits for the gate to close. */
struct smp_run {
	pid_t pid;
	int gate_w;  /* write end: one byte starts it, closing lets it exit */
	int done_r;  /* read end: readable when the workload finished */
};

/* Starts argv[0] (absolute) with NUPP_GATE_FD / NUPP_DONE_FD set; 0 or -errno. */
static inline int smp_run_start(struct smp_run *r, char *const argv[])
{
	int gate[2], done[2];

	if (pipe(gate) || pipe(done))
		return -errno;
	r->pid = fork();
	if (r->pid < 0)
		return -errno;
	if (r->pid == 0) {
		char g[16], d[16];
		int devnull = open("/dev/null", O_WRONLY);

		close(gate[1]);
		close(done[0]);
		snprintf(g, sizeof(g), "%d", gate[0]);
		snprintf(d, sizeof(d), "%d", done[1]);
		setenv("NUPP_GATE_FD", g, 1);
		setenv("NUPP_DONE_FD", d, 1);
		if (devnull >= 0)
			dup2(devnull, 1);
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

/* Has the workload signalled done (or died)? Waits up to ms. */
static inline int smp_run_done(struct smp_run *r, int ms)
{
	struct pollfd p = { .fd = r->done_r, .events = POLLIN };

	return poll(&p, 1, ms) > 0;
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

#endif /* NUPP_SAMPLER_TEST_H */
