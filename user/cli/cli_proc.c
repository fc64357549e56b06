/* The processes the profiling commands (record, top, dump) start: the command profiled
 * (held on a gate until the probes are attached) and the detached closer that releases
 * the kernel objects after the command exits; and the clock their waits go by. Attaching
 * to the processes is the session's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define CLI_CLOSER_FDS 4096  /* descriptors the closer process releases, at most */
#define CLI_CLOSER_THREADS 32 /* closing side by side */

/* -- The command ----------------------------------------------------------- */

/* Forks the command, blocked on a gate until the probes are attached. Under sudo the
 * child runs as the invoking user. Returns the PID, gate write end in *gate. */
pid_t cli_spawn(char **cmd, int *gate, bool stdout_to_stderr)
{
	pid_t pid, parent = getpid();
	int fds[2];

	if (pipe2(fds, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		const char *su = getenv("SUDO_UID"), *sg = getenv("SUDO_GID");
		char c;

		close(fds[1]);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		/* With -o -, stdout carries only the profile: the command writes to stderr. */
		if (stdout_to_stderr && dup2(2, 1) < 0)
			_exit(126);
		if (read(fds[0], &c, 1) != 1)
			_exit(127); /* the parent gave up before starting us */
		if (su && sg && getuid() == 0) {
			uid_t uid = (uid_t)strtoul(su, NULL, 10);
			gid_t gid = (gid_t)strtoul(sg, NULL, 10);

			if (setgroups(0, NULL) || setgid(gid) || setuid(uid)) {
				fprintf(stderr, "nupp-bpf: cannot drop to SUDO_UID %u: %s\n", uid, strerror(errno));
				_exit(126);
			}
		}
		/* The command is stopped with us (SIGTERM) rather than left running unprofiled
		 * when nupp-bpf is killed outright (kill -9); set after the drop to SUDO_UID,
		 * which clears it, and checked against a parent already gone. */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) || getppid() != parent)
			_exit(126);
		execvp(cmd[0], cmd);
		fprintf(stderr, "nupp-bpf: cannot run %s: %s\n", cmd[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(fds[0]);
	*gate = fds[1];
	return pid;
}

/* Joins argv into one space-separated string (for the profile's meta). */
char *cli_join(int argc, char **argv)
{
	size_t len = 1;
	char *s;
	int i;

	for (i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	s = calloc(1, len);
	for (i = 0; s && i < argc; i++) {
		if (i)
			strcat(s, " ");
		strcat(s, argv[i]);
	}
	return s;
}

/* -- The detached closer --------------------------------------------------- */

/* The descriptors a closer releases, and the next one to take. */
struct cli_fds {
	int fd[CLI_CLOSER_FDS];
	int n;
	int next;
};

/* A closer thread: closes descriptors until none is left. */
static void *cli_close_some(void *arg)
{
	struct cli_fds *f = arg;
	int i;

	while ((i = __atomic_fetch_add(&f->next, 1, __ATOMIC_SEQ_CST)) < f->n)
		close(f->fd[i]);
	return NULL;
}

/* The closer process: once the nupp-bpf process (pidfd) has exited, closes every
 * descriptor it was given, side by side, and exits. The last close of a uprobe's perf
 * event unregisters it, which waits for kernel grace periods: many at once share them.
 * Started by cli_close_later as "nupp-bpf-detach PIDFD", in a session of its own. */
void __attribute__((noreturn)) cli_closer(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	static struct cli_fds f;
	pthread_t th[CLI_CLOSER_THREADS];
	int null = open("/dev/null", O_RDWR | O_CLOEXEC), nth = 0, i;
	struct dirent *de;
	DIR *d;

	prctl(PR_SET_NAME, (unsigned long)"nupp-bpf-detach", 0, 0, 0);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	/* Holding none of the terminal's pipes open. */
	for (i = 0; i < 3 && null >= 0; i++)
		dup2(null, i);
	/* Until the nupp-bpf process has dropped its references: then ours are the last. */
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	d = opendir("/proc/self/fd");
	while (d && (de = readdir(d)) && f.n < CLI_CLOSER_FDS) {
		int fd = atoi(de->d_name);

		if (de->d_name[0] != '.' && fd > 2 && fd != dirfd(d))
			f.fd[f.n++] = fd;
	}
	if (d)
		closedir(d);
	while (nth < CLI_CLOSER_THREADS && nth < f.n &&
	       pthread_create(&th[nth], NULL, cli_close_some, &f) == 0)
		nth++;
	cli_close_some(&f);
	for (i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	_exit(0);
}

/* Hands the session's kernel objects (BPF programs, maps, links, probes) to a detached
 * closer process, which releases them right after this process exits: detaching a
 * uprobe waits 0.1-0.3 s for the kernel, once per probe, and nothing the profile needs
 * comes after. The closer is this program run again (posix_spawn: no copy of this
 * process's memory, which a fork would make every later write of this process pay for
 * page by page), given every descriptor at its own number. Without a closer (the spawn
 * failed), the exit waits for the detach. */
void cli_close_later(void)
{
	static bool handed;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	char pfd[16], *argv[3] = { "nupp-bpf-detach", pfd, NULL };
	struct dirent *de;
	int pidfd, e;
	pid_t c;
	DIR *d;

	if (handed)
		return;
	pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (pidfd < 0)
		return;
	snprintf(pfd, sizeof(pfd), "%d", pidfd);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
	/* A descriptor dup2'd onto itself is passed on, its close-on-exec flag cleared. */
	e = (d = opendir("/proc/self/fd")) ? 0 : -1;
	while (!e && (de = readdir(d))) {
		int fd = atoi(de->d_name);

		if (de->d_name[0] != '.' && fd > 2 && fd != dirfd(d))
			e = posix_spawn_file_actions_adddup2(&fa, fd, fd);
	}
	if (d)
		closedir(d);
	if (!e && posix_spawn(&c, "/proc/self/exe", &fa, &at, argv, environ) == 0)
		handed = true;
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(pidfd);
}

/* -- The clock ------------------------------------------------------------ */

/* wait_ms, or less: no later than time until (now being now). */
int cli_wait_until(int wait_ms, double until, double now)
{
	if ((until - now) * 1000 >= wait_ms)
		return wait_ms;
	return until > now ? (int)((until - now) * 1000) + 1 : 0;
}

/* Monotonic seconds. */
double cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}
