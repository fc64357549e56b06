/* Bench driver for bench_aborts.sh: runs a command with the trace channel attached to it
 * and prints what the kernel side counted and what it cost (bpf_stats). */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nupp/nupp.h"
#include "nupp/trace.h"

/* Monotonic nanoseconds. */
static __u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* usage: trace_attach [-n] BINARY CMD [ARGS...]; prints one "key=value ..." line on
 * stderr, wall_ns being the command's own run (from its release to its exit), so the
 * probes' attach and detach are not in it. -n: run it the same way without probes. */
int main(int argc, char **argv)
{
	bool probes = true;
	__u64 t0, t1;
	struct nupp_trace_opts o = { .sz = sizeof(o), .include_benign = true };
	struct nupp_abort_set set = { 0 };
	struct nupp_trace *t;
	__u64 ns = 0, cnt = 0;
	int gate[2], err = 0, st = 0;
	pid_t pid;
	char c;

	if (argc > 1 && !strcmp(argv[1], "-n")) {
		probes = false;
		argv++;
		argc--;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: %s BINARY CMD [ARGS...]\n", argv[0]);
		return 2;
	}
	if (pipe(gate))
		return 1;
	pid = fork();
	if (pid == 0) {
		close(gate[1]);
		if (read(gate[0], &c, 1) != 1)
			_exit(126);
		execv(argv[2], argv + 2);
		_exit(127);
	}
	close(gate[0]);
	t = probes ? nupp_trace_open(&o, &err) : NULL;
	if (probes && (!t || (err = nupp_trace_attach(t, argv[1], pid)))) {
		fprintf(stderr, "Error: %s\n", nupp_errmsg());
		kill(pid, SIGKILL);
		return 1;
	}
	t0 = now_ns();
	if (write(gate[1], "g", 1) != 1)
		return 1;
	close(gate[1]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	t1 = now_ns();
	if (t) {
		nupp_trace_stats(t, &ns, &cnt);
		err = nupp_trace_drain(t, &set);
	}
	fprintf(stderr, "aborts=%llu rows=%zu run_time_ns=%llu run_cnt=%llu wall_ns=%llu\n",
		(unsigned long long)set.total_aborts, set.n, (unsigned long long)ns, (unsigned long long)cnt,
		(unsigned long long)(t1 - t0));
	nupp_abort_set_free(&set);
	nupp_trace_close(t);
	return err || !WIFEXITED(st) || WEXITSTATUS(st);
}
