/* record's stop signals and its wait: the handlers of Ctrl-C / SIGTERM / SIGHUP (a second
 * Ctrl-C exits) and the pipe they write to wake the wait. What to do once stopped is the
 * caller's (user/cli/cmd_record.c). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "record.h"

volatile sig_atomic_t record_stop_sig;
volatile sig_atomic_t record_written;
volatile pid_t record_child;
volatile sig_atomic_t record_sigpipe = -1;
int record_sigpipe_in = -1;

/* Signal handler: first Ctrl-C / SIGTERM asks to stop and write; a second Ctrl-C exits
 * (and interrupts the command), with status 0 once the outputs are written. */
static void record_on_signal(int sig)
{
	if (record_stop_sig && sig == SIGINT) {
		static const char done[] = "\nnupp-bpf: interrupted again: the outputs were already written, "
					   "exiting\n";
		static const char lost[] = "\nnupp-bpf: interrupted twice, exiting without writing\n";

		if (write(2, record_written ? done : lost, record_written ? sizeof(done) - 1 : sizeof(lost) - 1) < 0) {
		}
		if (record_child > 0)
			kill(record_child, SIGINT);
		_exit(record_written ? 0 : 130);
	}
	record_stop_sig = sig;
	if (record_sigpipe >= 0) {
		int saved = errno; /* the interrupted code may be about to read it */

		if (write(record_sigpipe, "s", 1) < 0) {
		}
		errno = saved;
	}
}

/* The fd record waits on besides the session's events: an epoll set of a pipe that the
 * stop signals write and of pidfd (the target's, -1: none), so that it wakes for those at
 * once and sleeps otherwise; -1 when it cannot be made (then it waits in short steps). */
int record_wake_fd(int pidfd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int p[2], ep;

	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return -1;
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0) {
		ev.data.fd = p[0];
		if (epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) == 0) {
			record_sigpipe = p[1];
			record_sigpipe_in = p[0];
			if (record_stop_sig && write(p[1], "s", 1) < 0) {
			}
		} else {
			close(p[0]);
			close(p[1]);
		}
	}
	ev.data.fd = pidfd;
	if (record_sigpipe < 0 || (pidfd >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, pidfd, &ev))) {
		close(ep);
		return -1;
	}
	return ep;
}

/* Installs the stop handlers (no SA_RESTART, so poll returns at once). */
void record_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = record_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* a closed pipe ends that output with a message, not the record */
}
