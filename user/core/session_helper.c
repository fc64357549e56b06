/* The in-app helper process: started twice forked, its loop (poll, drain, answer), the
 * watch that ends it with the program it works for, and the program's requests to it.
 * What crosses the socket is session_wire.c's. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "session_priv.h"

/* The start time of process pid (clock ticks since boot, /proc/PID/stat's 22nd field),
 * 0 when it is gone: with the pid, it names one process, never a later one given its pid. */
static unsigned long long ses_start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long t = 0;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
	if (!p)
		return 0;
	for (field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p)
		t = strtoull(p + 1, NULL, 10);
	return t;
}

/* Whether the process that started the helper is gone. Its pidfd says so as it exits;
 * without one (a kernel before 5.3), its pid and start time are read once a second. A
 * child it forked keeps the socket open (it is closed on exec only), so the socket alone
 * would keep the helper sampling for a process that no longer exists. */
static bool ses_owner_gone(struct nupp_session *s, double now)
{
	if (s->owner_fd >= 0) {
		struct pollfd p = { .fd = s->owner_fd, .events = POLLIN };

		return poll(&p, 1, 0) > 0;
	}
	if (now < s->owner_next)
		return false;
	s->owner_next = now + 1.0;
	return ses_start_time(s->owner) != s->owner_start;
}

/* The helper's loop: poll and drain until told to stop or the profiled process is gone. */
static void ses_helper_main(struct nupp_session *s)
{
	for (;;) {
		struct pollfd p = { .fd = s->sock, .events = POLLIN };
		char req;

		/* Checked before each step reads the program's memory, so that the helper stops
		 * as the program exits, before its pid can name another process. */
		if (ses_owner_gone(s, ses_now()))
			break; /* the profiled process exited; a child of it may hold the socket */
		if (ses_step(s, 20) < 0)
			nupp_pr(NUPP_WARN, "session helper: %s\n", nupp_errmsg());
		if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if (ses_read_all(s->sock, &req, 1))
			break; /* the profiled process closed the session, or died */
		/* Both answers are fresh: what was sampled until the request. */
		ses_drain(s);
		s->next_drain = ses_now() + s->o.drain_ms / 1000.0;
		if (ses_send_sets(s, s->sock) || req == SES_REQ_STOP)
			break;
	}
	_exit(0);
}

/* Starts the helper process: it inherits the loaded channels and polls and drains them
 * for the process that started it; this process only pauses, asks and stops. Its own
 * CPU time is never sampled: it is another process, not a thread of the profiled one. */
int ses_start_helper(struct nupp_session *s)
{
	int sv[2], st, e;
	pid_t mid, helper = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return nupp_fail(-errno, "cannot make the session's socket: %s", strerror(errno));
	/* Taken before the fork, so it names this process even if it dies meanwhile. */
	s->owner = getpid();
	s->owner_start = ses_start_time(s->owner);
	s->owner_fd = (int)syscall(SYS_pidfd_open, s->owner, 0);
	mid = fork();
	if (mid < 0) {
		e = -errno;
		close(sv[0]);
		close(sv[1]);
		if (s->owner_fd >= 0)
			close(s->owner_fd);
		s->owner_fd = -1;
		return nupp_fail(e, "cannot start the session's helper process: %s", strerror(-e));
	}
	if (mid == 0) {
		/* Twice forked, so the profiled program never sees (or reaps) it as its child. */
		pid_t h = fork();

		if (h != 0) {
			if (h > 0 && write(sv[1], &h, sizeof(h)) != sizeof(h))
				_exit(1);
			_exit(h > 0 ? 0 : 1);
		}
		close(sv[0]);
		setsid();
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		signal(SIGPIPE, SIG_IGN);
		s->sock = sv[1];
		s->is_helper = true;
		ses_helper_main(s);
	}
	close(sv[1]);
	if (s->owner_fd >= 0)
		close(s->owner_fd);
	s->owner_fd = -1;
	s->sock = sv[0];
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	if (ses_read_all(s->sock, &helper, sizeof(helper)) || helper <= 0) {
		close(s->sock);
		s->sock = -1;
		return nupp_fail(-ECHILD, "the session's helper process did not start");
	}
	s->helper = helper;
	/* It reads this process's memory (names, zone tables): allow it where Yama asks. */
	prctl(PR_SET_PTRACER, (unsigned long)helper, 0, 0, 0);
	return 0;
}

/* Asks the helper for the rows so far (req SNAPSHOT) or the last ones (STOP). */
int ses_ask(struct nupp_session *s, char req, bool *zones_seen)
{
	int e;

	if (s->sock < 0)
		return nupp_fail(-EPIPE, "the session's helper process is gone");
	e = ses_write_all(s->sock, &req, 1);
	if (e)
		return nupp_fail(e, "the session's helper process is gone (it exited or was killed)");
	return ses_recv_sets(s, zones_seen);
}
