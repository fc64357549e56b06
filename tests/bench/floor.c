/* Bench driver for bench_floor.sh: runs a command and attaches each program of
 * floor.bpf.c in turn to a CPU-clock event on that process only, so bpf_stats counts the
 * target's samples and nothing else, and prints each attachment's runs and cost. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "floor.skel.h"

/* The programs, in the order of floor.bpf.c; a row's index is its faults[] slot. */
static const char *const floor_progs[][2] = {
	{ "floor_empty", "empty" },   { "floor_pid", "pid" },	  { "floor_filt", "filter" },
	{ "floor_regs", "regs" },     { "floor_rd16", "read16" }, { "floor_win", "read512" },
	{ "floor_cnt", "count" },     { "floor_rd8x1", "rd8x1" }, { "floor_rd8x8", "rd8x8" },
	{ "floor_rd8x32", "rd8x32" }, { "floor_lk1", "lk1" },	  { "floor_lk8", "lk8" },
	{ "floor_lk32", "lk32" },     { "floor_ktime", "ktime" }, { "floor_lkr32", "lkr32" },
	{ "floor_lka32", "lka32" },   { "floor_rnd32", "rnd32" }, { "floor_lkm32", "lkm32" },
	{ "floor_lka32s", "lka32s" }, { "floor_lka32m", "lka32m" },
};

#define FLOOR_NPROG (int)(sizeof(floor_progs) / sizeof(floor_progs[0]))

/* Sleeps ms milliseconds. */
static void floor_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Reads run_cnt and run_time_ns of program fd. Returns 0 or a negative errno. */
static int floor_prog_stats(int fd, __u64 *cnt, __u64 *ns)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -errno;
	*cnt = info.run_cnt;
	*ns = info.run_time_ns;
	return 0;
}

/* The fd of the program of row. */
static int floor_prog_fd(struct floor_bpf *skel, int row)
{
	return bpf_program__fd(bpf_object__find_program_by_name(skel->obj, floor_progs[row][0]));
}

/* Attaches the program of row to a new CPU-clock event on pid at hz. Returns the link
 * (its event in *pfd), or NULL with errno set. */
static struct bpf_link *floor_attach(struct floor_bpf *skel, int row, pid_t pid, int hz, int *pfd)
{
	struct perf_event_attr a = { .size = sizeof(a), .type = PERF_TYPE_SOFTWARE,
				     .config = PERF_COUNT_SW_CPU_CLOCK, .freq = 1 };
	struct bpf_link *link;
	int err;

	a.sample_freq = (__u64)hz;
	*pfd = (int)syscall(__NR_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (*pfd < 0) {
		err = errno;
		fprintf(stderr, "Error: cannot open a CPU-clock event on PID %d: %s\n", (int)pid, strerror(err));
		errno = err;
		return NULL;
	}
	link = bpf_program__attach_perf_event(bpf_object__find_program_by_name(skel->obj, floor_progs[row][0]), *pfd);
	if (!link) {
		err = errno;
		fprintf(stderr, "Error: cannot attach %s: %s\n", floor_progs[row][0], strerror(err));
		close(*pfd);
		*pfd = -1;
		errno = err;
	}
	return link;
}

/* Attaches the programs of rows[0..n-1], in that order, each to its own CPU-clock event
 * on pid, for ms milliseconds, then prints for each "variant=... round=... run_cnt=...
 * run_time_ns=... ns_per_run=... faults=...". Returns 0 or a negative errno. */
static int floor_measure(struct floor_bpf *skel, const int *rows, int n, int round, pid_t pid, int hz, int ms)
{
	struct bpf_link *link[FLOOR_NPROG] = { NULL };
	__u64 c0[FLOOR_NPROG], t0[FLOOR_NPROG], f0[FLOOR_NPROG], c1 = 0, t1 = 0;
	int pfd[FLOOR_NPROG], i, row, err = 0;

	for (i = 0; i < n; i++)
		pfd[i] = -1;
	for (i = 0; i < n && !err; i++) {
		row = rows[i];
		f0[i] = skel->bss->faults[row];
		err = floor_prog_stats(floor_prog_fd(skel, row), &c0[i], &t0[i]);
		if (!err && !(link[i] = floor_attach(skel, row, pid, hz, &pfd[i])))
			err = -errno;
	}
	if (!err)
		floor_sleep_ms(ms);
	for (i = 0; i < n; i++) {
		bpf_link__destroy(link[i]);
		if (pfd[i] >= 0)
			close(pfd[i]);
	}
	for (i = 0; i < n && !err; i++) {
		row = rows[i];
		if ((err = floor_prog_stats(floor_prog_fd(skel, row), &c1, &t1)))
			break;
		printf("variant=%s round=%d run_cnt=%llu run_time_ns=%llu ns_per_run=%.1f faults=%llu\n",
		       floor_progs[row][1], round, (unsigned long long)(c1 - c0[i]), (unsigned long long)(t1 - t0[i]),
		       c1 > c0[i] ? (double)(t1 - t0[i]) / (double)(c1 - c0[i]) : 0.0,
		       (unsigned long long)(skel->bss->faults[row] - f0[i]));
	}
	fflush(stdout);
	return err;
}

/* usage: floor [-t] [-F HZ] [-r ROUNDS] [-s SECONDS] CMD [ARGS...]; CMD must stay
 * CPU-bound to the end (it is killed then). A round measures every program once for
 * SECONDS: alone, one after the other, or with -t together, each on its own event of the
 * same process. Rounds alternate forward and backward order, so a drift of the machine's
 * load over a round, or a place in the attach order, favours no program. */
int main(int argc, char **argv)
{
	struct floor_bpf *skel = NULL;
	struct { __u32 tgid, zone; __u64 stack; __u32 tid, pad; } key = { 0, 0, 1, 0, 0 }; /* floor_count_key */
	__u64 one = 1, zero = 0;
	int hz = 1000, rounds = 5, ms = 1000, together = 0, rows[FLOOR_NPROG], gate[2], stats_fd, r, i, err = 0, wst;
	const char *self = argv[0];
	char c;
	pid_t pid = -1;

	while (argc > 1 && argv[1][0] == '-') {
		if (!strcmp(argv[1], "-t")) {
			together = 1;
			argv++;
			argc--;
			continue;
		}
		if (argc < 3) {
			hz = 0;
			break;
		}
		if (!strcmp(argv[1], "-F"))
			hz = atoi(argv[2]);
		else if (!strcmp(argv[1], "-r"))
			rounds = atoi(argv[2]);
		else if (!strcmp(argv[1], "-s"))
			ms = (int)(atof(argv[2]) * 1000);
		else
			hz = 0; /* an unknown option: usage */
		argv += 2;
		argc -= 2;
	}
	if (argc < 2 || hz <= 0 || rounds <= 0 || ms <= 0) {
		fprintf(stderr, "usage: %s [-t] [-F HZ] [-r ROUNDS] [-s SECONDS] CMD [ARGS...]\n", self);
		return 2;
	}
	/* Held open for the whole run, so the driver also works without the sysctl. */
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0) {
		fprintf(stderr, "Error: cannot enable bpf statistics: %s\n", strerror(errno));
		return 1;
	}
	if (pipe(gate)) {
		fprintf(stderr, "Error: cannot create a pipe: %s\n", strerror(errno));
		close(stats_fd);
		return 1;
	}
	pid = fork();
	if (pid == 0) {
		/* The command dies with the driver, however the driver ends. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(gate[1]);
		if (read(gate[0], &c, 1) != 1)
			_exit(126);
		execvp(argv[1], argv + 1);
		_exit(127);
	}
	close(gate[0]);
	if (pid < 0) {
		fprintf(stderr, "Error: cannot fork: %s\n", strerror(errno));
		err = 1;
		goto out;
	}
	skel = floor_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "Error: cannot load floor.bpf.o: %s\n", strerror(errno));
		err = 1;
		goto out;
	}
	/* fcache_km's ARRAYs of 256 entries of 64 bytes (its inner map's shape); the outer
	 * map holds a reference to each, so their fds can close. */
	for (r = 0; r < (int)bpf_map__max_entries(skel->maps.fcache_km); r++) {
		int ifd = bpf_map_create(BPF_MAP_TYPE_ARRAY, NULL, 4, 64, 256, NULL);

		if (ifd < 0 || bpf_map_update_elem(bpf_map__fd(skel->maps.fcache_km), &r, &ifd, BPF_ANY)) {
			fprintf(stderr, "Error: cannot fill fcache_km: %s\n", strerror(errno));
			if (ifd >= 0)
				close(ifd);
			err = 1;
			goto out;
		}
		close(ifd);
	}
	key.tgid = (__u32)pid;
	if (bpf_map_update_elem(bpf_map__fd(skel->maps.targets), &key.tgid, &one, BPF_ANY) ||
	    bpf_map_update_elem(bpf_map__fd(skel->maps.counts), &key, &zero, BPF_ANY)) {
		fprintf(stderr, "Error: cannot fill the target maps: %s\n", strerror(errno));
		err = 1;
		goto out;
	}
	if (write(gate[1], "g", 1) != 1) {
		fprintf(stderr, "Error: cannot start %s\n", argv[1]);
		err = 1;
		goto out;
	}
	/* Let the command reach its loop (and LuaJIT compile its trace). */
	floor_sleep_ms(300);
	for (r = 1; r <= rounds; r++) {
		for (i = 0; i < FLOOR_NPROG; i++)
			rows[i] = (r & 1) ? i : FLOOR_NPROG - 1 - i;
		for (i = 0; i < FLOOR_NPROG; i += together ? FLOOR_NPROG : 1) {
			if (waitpid(pid, &wst, WNOHANG) == pid) {
				pid = -1;
				fprintf(stderr, "Error: %s exited during the run; it must stay CPU-bound\n", argv[1]);
				err = 1;
				goto out;
			}
			if (floor_measure(skel, rows + i, together ? FLOOR_NPROG : 1, r, pid, hz, ms)) {
				err = 1;
				goto out;
			}
		}
	}
out:
	close(gate[1]);
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	floor_bpf__destroy(skel);
	close(stats_fd);
	return err;
}
