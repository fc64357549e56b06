/* Shared helpers for nupp-bpf's C tests: skipping without root, spawning LuaJIT. */
#ifndef NUPP_TEST_H
#define NUPP_TEST_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NUPP_TEST_SKIP 77

/* Exits 77 (CTest skip) with the reason unless we can load BPF and attach probes. */
static inline void nupp_test_need_root(void)
{
	struct stat st;

	if (geteuid() != 0) {
		printf("SKIP: needs root (CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE) to load BPF programs\n");
		exit(NUPP_TEST_SKIP);
	}
	if (stat("/sys/kernel/btf/vmlinux", &st) != 0) {
		printf("SKIP: kernel has no BTF (/sys/kernel/btf/vmlinux missing)\n");
		exit(NUPP_TEST_SKIP);
	}
}

/* Starts LuaJIT binary on a script (or -e code); returns the PID. If gate_fd >= 0 the
 * child first blocks reading one byte from it (start it after attaching) and exits
 * without running when none comes; gate_w >= 0 (the pipe's write end) is closed in the
 * child first, so that the test's end reads as the end of the gate. */
static inline pid_t nupp_test_spawn(const char *binary, const char *const argv_tail[], int gate_fd, int gate_w)
{
	pid_t pid = fork();

	if (pid == 0) {
		const char *argv[32] = { binary };
		int i;
		char c;

		for (i = 0; argv_tail[i] && i < 30; i++)
			argv[i + 1] = argv_tail[i];
		argv[i + 1] = NULL;
		if (gate_w >= 0)
			close(gate_w);
		if (gate_fd >= 0 && read(gate_fd, &c, 1) != 1)
			_exit(126);
		execv(binary, (char **)argv);
		_exit(127);
	}
	return pid;
}

/* nupp_test_spawn of our luajit. */
static inline pid_t nupp_test_spawn_luajit(const char *const argv_tail[], int gate_fd)
{
	return nupp_test_spawn(NUPP_LUAJIT, argv_tail, gate_fd, -1);
}

/* Kills and reaps a child; returns its wait status. */
static inline int nupp_test_reap(pid_t pid, int sig)
{
	int st = 0;

	if (sig)
		kill(pid, sig);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return st;
}

#endif /* NUPP_TEST_H */
