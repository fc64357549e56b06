/* nupp-bpf top: a live table of the hottest functions of a LuaJIT process, redrawn every
 * interval on the terminal (plain ANSI: the alternate screen, a raw keyboard, both given
 * back on every way out), or printed once when stdout is not a terminal or with --once.
 * It runs on the same session as record. This file owns the options, the sessions, the
 * terminal and the loop; the figures and the table are user/cli/top_view.c's. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "nupp/sampler_abi.h"
#include "cli.h"
#include "top.h"

#define TOP_DRAIN_MS 250 /* the session counts and names at this period */
#define TOP_ONCE_ROWS 20 /* rows printed without a terminal, unless --rows */

struct top_opts {
	int freq, depth, rows;
	double interval;
	bool once, lines, aborts;
	pid_t pid;
	char **cmd;
};

/* One naming mode's session (functions or lines), opened when first shown; the mode not
 * shown is paused. */
struct top_mode {
	struct nupp_session *ses;
	struct top_view view;
	double run;   /* seconds shown before the current showing */
	double since; /* when it was last shown (monotonic) */
};

static volatile sig_atomic_t top_stop, top_winch, top_tstp;
static int top_sigpipe = -1, top_sigpipe_in = -1;
static struct termios top_saved;
static bool top_raw, top_screen;

/* -- Options --------------------------------------------------------------- */

static void top_usage(FILE *f)
{
	fprintf(f,
		"USAGE\n"
		"  nupp-bpf top [options] -p PID\n"
		"  nupp-bpf top [options] -- COMMAND [ARGS...]\n\n"
		"A live table of the hottest Lua functions of a process running our LuaJIT build,\n"
		"redrawn every interval: each function's self and total share of the samples in the\n"
		"last interval and in the whole run, the VM states of its self samples (compiled,\n"
		"interpreted, C code, GC, JIT compiler), and the process's trace aborts. It samples\n"
		"as record does, with the same privileges, and leaves nothing in the kernel.\n\n"
		"OPTIONS\n"
		"  -p, --pid PID        watch a running process (all its threads)\n"
		"  -F, --frequency HZ   samples per second per thread (default 99)\n"
		"  -i, --interval SEC   redraw period (default 1)\n"
		"      --once           sample one interval, print the table on stdout and exit (also\n"
		"                       what top does when stdout is not a terminal)\n"
		"  -n, --rows N         rows of the table (default: what the terminal holds; 20 once)\n"
		"      --lines          show source lines (module:line), not functions\n"
		"      --depth N        frames per stack, 1..256 (default 64)\n"
		"      --no-aborts      do not count JIT trace aborts\n\n"
		"KEYS\n"
		"  s  sort by self     t  sort by total\n"
		"  l  switch between functions and source lines (each keeps its own run: the first\n"
		"     switch attaches a second sampler, and the one not shown is paused)\n"
		"  q  quit (also Ctrl-C); Ctrl-Z suspends and gives the terminal back\n\n"
		"EXAMPLES\n"
		"  sudo nupp-bpf top -p $(pgrep -n luajit)\n"
		"  sudo nupp-bpf top --once -i 5 -p 1234 > top.txt\n");
}

/* Parses top's options; 0, or the exit status for a usage error / --help (-1 = 0). */
static int top_parse(int argc, char **argv, struct top_opts *o)
{
	enum { O_ONCE = 256, O_LINES, O_DEPTH, O_NOABORTS };
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "frequency", required_argument, NULL, 'F' },
		{ "interval", required_argument, NULL, 'i' },
		{ "once", no_argument, NULL, O_ONCE },
		{ "rows", required_argument, NULL, 'n' },
		{ "lines", no_argument, NULL, O_LINES },
		{ "depth", required_argument, NULL, O_DEPTH },
		{ "no-aborts", no_argument, NULL, O_NOABORTS },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	long v;
	int c;

	while ((c = getopt_long(argc, argv, "+p:F:i:n:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (!cli_pid_opt(optarg, &o->pid))
				return 2;
			break;
		case 'F':
			if (!cli_freq_opt(optarg, &o->freq))
				return 2;
			break;
		case 'i': {
			char *end;

			errno = 0;
			o->interval = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->interval >= 0.1) || o->interval > 86400) {
				cli_error("invalid interval '%s': expected 0.1..86400 seconds", optarg);
				return 2;
			}
			break;
		}
		case 'n':
			if (!cli_int(optarg, 1, 100000, &v)) {
				cli_error("invalid --rows '%s': expected a positive integer", optarg);
				return 2;
			}
			o->rows = (int)v;
			break;
		case O_ONCE:
			o->once = true;
			break;
		case O_LINES:
			o->lines = true;
			break;
		case O_DEPTH:
			if (!cli_depth_opt(optarg, &o->depth))
				return 2;
			break;
		case O_NOABORTS:
			o->aborts = false;
			break;
		case 'h':
			top_usage(stdout);
			return -1;
		default:
			top_usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		o->cmd = argv + optind;
	if (!o->pid == !o->cmd) {
		cli_error(o->pid ? "give either -p PID or -- COMMAND, not both" : "nothing to watch: give -p PID or -- COMMAND");
		top_usage(stderr);
		return 2;
	}
	return 0;
}

/* -- Signals and the terminal ---------------------------------------------- */

static void top_on_signal(int sig)
{
	int saved = errno;

	if (sig == SIGWINCH)
		top_winch = 1;
	else if (sig == SIGTSTP)
		top_tstp = 1;
	else
		top_stop = sig;
	if (top_sigpipe >= 0 && write(top_sigpipe, "s", 1) < 0) {
	}
	errno = saved;
}

/* Installs the handlers (no SA_RESTART: the wait returns at once) and the pipe they write. */
static void top_signals(void)
{
	struct sigaction sa;
	int p[2];

	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0) {
		top_sigpipe_in = p[0];
		top_sigpipe = p[1];
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = top_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGWINCH, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* Gives the terminal back as it was: the main screen, the cursor, the line discipline. */
static void top_term_leave(void)
{
	if (top_screen) {
		static const char s[] = "\x1b[?25h\x1b[?1049l";

		if (write(1, s, sizeof(s) - 1) < 0) {
		}
		top_screen = false;
	}
	if (top_raw) {
		tcsetattr(0, TCSAFLUSH, &top_saved);
		top_raw = false;
	}
}

/* Takes the terminal: keys one at a time without echo (Ctrl-C and Ctrl-Z still signal),
 * the alternate screen, no cursor. */
static void top_term_enter(void)
{
	static const char s[] = "\x1b[?1049h\x1b[?25l";
	struct sigaction sa;

	if (isatty(0) && tcgetattr(0, &top_saved) == 0) {
		struct termios t = top_saved;

		t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		t.c_cc[VMIN] = 0;
		t.c_cc[VTIME] = 0;
		top_raw = tcsetattr(0, TCSANOW, &t) == 0;
	}
	if (write(1, s, sizeof(s) - 1) == (ssize_t)sizeof(s) - 1)
		top_screen = true;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = top_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTSTP, &sa, NULL);
}

/* Ctrl-Z: gives the terminal back, stops, and takes it again once continued. */
static void top_suspend(void)
{
	top_tstp = 0;
	top_term_leave();
	signal(SIGTSTP, SIG_DFL);
	raise(SIGTSTP);
	top_term_enter();
	top_winch = 1;
}

/* Rows the table may use on the terminal (its height less the header and key lines). */
static int top_term_rows(int *width)
{
	struct winsize ws;

	*width = 0;
	if (ioctl(1, TIOCGWINSZ, &ws) || ws.ws_row == 0)
		return 20;
	*width = ws.ws_col;
	return ws.ws_row > 8 ? ws.ws_row - 7 : 1;
}

/* -- Sessions -------------------------------------------------------------- */

/* Opens a session naming frames by line or function and attaches it to pid (a command
 * started held on its gate: spawned). NULL after printing the error. */
static struct nupp_session *top_open(const struct top_opts *o, bool lines, pid_t pid, bool spawned, int wake)
{
	struct nupp_session_opts so = {
		.sz = sizeof(so), .samples = true, .aborts = o->aborts, .freq_hz = o->freq, .depth = o->depth,
		.lines = lines, .drain_ms = TOP_DRAIN_MS,
	};
	struct nupp_session *ses;
	int err = 0;

	ses = nupp_session_open(&so, &err);
	if (!ses) {
		cli_error("cannot start profiling: %s", nupp_errmsg());
		return NULL;
	}
	err = spawned ? nupp_session_attach_spawned(ses, pid, o->cmd[0]) : nupp_session_attach(ses, pid);
	if (err) {
		cli_error("cannot attach to PID %d: %s", (int)pid, nupp_errmsg());
		nupp_session_close(ses);
		return NULL;
	}
	if (wake >= 0)
		nupp_session_wake_fd(ses, wake);
	nupp_session_start(ses);
	return ses;
}

/* Takes the mode's profile so far into its view (stop: the session's last counts). 0, or
 * 1 after printing the error. */
static int top_take(struct top_mode *m, bool stop)
{
	struct nupp_profile *p;
	int err = 0;

	p = stop ? nupp_session_stop(m->ses, &err) : nupp_session_snapshot(m->ses, &err);
	if (!p) {
		cli_error("reading the profile failed: %s", nupp_errmsg());
		return 1;
	}
	err = top_view_update(&m->view, p, m->run + (cli_now() - m->since));
	nupp_session_profile_free(p);
	if (err) {
		cli_error("out of memory");
		return 1;
	}
	return 0;
}

/* Draws the table on the terminal in one write. */
static void top_draw(const struct top_mode *m, const struct top_head *h)
{
	char *buf = NULL;
	size_t len = 0;
	int width, rows = top_term_rows(&width);
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return;
	fputs("\x1b[H\x1b[2J", f);
	top_view_write(&m->view, h, rows, width, f);
	if (fclose(f) == 0 && write(1, buf, len) < 0) {
	}
	free(buf);
}

/* Reads the keys typed; returns 'q' to quit, 'r' when the table is to be drawn again, else 0. */
static int top_keys(struct top_head *h, bool *toggle)
{
	char c[64];
	ssize_t n, i;
	int ret = 0;

	if (!top_raw)
		return 0;
	while ((n = read(0, c, sizeof(c))) > 0)
		for (i = 0; i < n; i++) {
			if (c[i] == 'q' || c[i] == 'Q')
				return 'q';
			if (c[i] == 's' || c[i] == 't') {
				h->by_total = c[i] == 't';
				ret = 'r';
			} else if (c[i] == 'l') {
				*toggle = !*toggle;
			}
		}
	return ret;
}

/* -- The run --------------------------------------------------------------- */

/* What the loop ended on. */
enum top_end { TOP_QUIT, TOP_EXITED, TOP_FAILED, TOP_ONCE };

static int top_run(int argc, char **argv, bool *started)
{
	struct top_opts o = { .freq = 99, .depth = NUPP_SMP_DEFAULT_DEPTH, .interval = 1, .aborts = true };
	struct top_mode modes[2] = { 0 };
	struct top_head h = { 0 };
	char why[512], *target = NULL;
	int ret = 1, gate = -1, pidfd = -1, ep = -1, status = 0, cur, k;
	enum top_end end = TOP_FAILED;
	bool live, toggle = false, child_done = false;
	double next;
	pid_t pid;

	ret = top_parse(argc, argv, &o);
	if (ret)
		return ret < 0 ? 0 : ret;
	ret = 1;
	top_signals();
	if (nupp_available(-1, why, sizeof(why))) {
		cli_error("cannot profile: %s", why);
		return 1;
	}
	if (o.pid) {
		struct nupp_vm vm;
		int n = kill(o.pid, 0) && errno == ESRCH ? -ESRCH : nupp_vm_find(o.pid, &vm, 1);

		if (n <= 0) {
			cli_error("cannot watch PID %d: %s", (int)o.pid,
				  n == -ESRCH ? "no such process"
				  : n < 0     ? nupp_errmsg()
					      : "it runs our LuaJIT but has no Lua VM open (yet)");
			return 1;
		}
	} else {
		char bin[PATH_MAX];
		int err = nupp_vm_binary_for_exe(o.cmd[0], bin, sizeof(bin));

		if (err && err != -ENOEXEC) {
			cli_error("cannot profile %s: %s", o.cmd[0], nupp_errmsg());
			return 1;
		}
		target = cli_join(argc - optind, argv + optind);
	}
	live = !o.once && isatty(1);
	cur = o.lines ? 1 : 0;
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep >= 0 && top_sigpipe_in >= 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = top_sigpipe_in };

		epoll_ctl(ep, EPOLL_CTL_ADD, top_sigpipe_in, &ev);
		ev.data.fd = 0;
		if (live && isatty(0))
			epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev);
	}
	if (o.cmd) {
		pid = cli_spawn(o.cmd, &gate, false);
		if (pid < 0) {
			cli_error("cannot start %s: %s", o.cmd[0], strerror(errno));
			goto out;
		}
	} else {
		pid = o.pid;
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (ep >= 0 && pidfd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = pidfd };

		epoll_ctl(ep, EPOLL_CTL_ADD, pidfd, &ev);
	}
	modes[cur].ses = top_open(&o, o.lines, pid, o.cmd != NULL, ep);
	if (!modes[cur].ses) {
		if (gate >= 0) {
			close(gate); /* the command exits without running */
			waitpid(pid, NULL, 0);
		}
		goto out;
	}
	*started = true;
	modes[cur].since = cli_now();
	if (gate >= 0) {
		if (write(gate, "g", 1) != 1) {
		}
		close(gate);
		gate = -1;
	}
	h = (struct top_head){ .pid = pid, .target = target, .freq = o.freq, .lines = o.lines, .aborts = o.aborts,
			       .interactive = live };
	if (live) {
		top_term_enter();
		top_draw(&modes[cur], &h);
	}
	next = cli_now() + o.interval;
	for (;;) {
		double now = cli_now();
		bool exited = false;
		char drain[64];
		int key;

		if (nupp_session_poll(modes[cur].ses, cli_wait_until(1000, next, now)) < 0 && errno != EINTR) {
			cli_error("sampling failed: %s", nupp_errmsg());
			break;
		}
		while (top_sigpipe_in >= 0 && read(top_sigpipe_in, drain, sizeof(drain)) > 0)
			;
		if (top_stop) {
			end = TOP_QUIT;
			break;
		}
		if (top_tstp)
			top_suspend();
		key = top_keys(&h, &toggle);
		if (key == 'q') {
			end = TOP_QUIT;
			break;
		}
		if (o.cmd)
			exited = waitpid(pid, &status, WNOHANG) == pid;
		else if (pidfd >= 0)
			exited = poll(&(struct pollfd){ .fd = pidfd, .events = POLLIN }, 1, 0) > 0;
		else
			exited = kill(pid, 0) && errno == ESRCH;
		if (exited) {
			child_done = o.cmd != NULL;
			end = TOP_EXITED;
			break;
		}
		if (toggle) {
			int other = 1 - cur;

			toggle = false;
			if (!modes[other].ses) {
				h.note = "attaching a second sampler to name frames the other way ...";
				top_draw(&modes[cur], &h);
				h.note = NULL;
				modes[other].ses = top_open(&o, other == 1, pid, false, ep);
				if (!modes[other].ses) {
					h.note = "could not switch (see the message after exit)";
					top_draw(&modes[cur], &h);
					continue;
				}
			} else {
				nupp_session_pause(modes[other].ses, false);
			}
			nupp_session_pause(modes[cur].ses, true);
			modes[cur].run += cli_now() - modes[cur].since;
			modes[other].since = cli_now();
			cur = other;
			h.lines = cur == 1;
			if (top_take(&modes[cur], false))
				break;
			top_draw(&modes[cur], &h);
			next = cli_now() + o.interval;
			continue;
		}
		if (cli_now() >= next) {
			if (!live) {
				end = TOP_ONCE;
				break;
			}
			if (top_take(&modes[cur], false))
				break;
			top_draw(&modes[cur], &h);
			next += o.interval;
			if (next < cli_now())
				next = cli_now() + o.interval;
		} else if (top_winch || key == 'r') {
			top_winch = 0;
			if (live && modes[cur].view.updates)
				top_draw(&modes[cur], &h);
		}
	}
	top_term_leave();
	if (end == TOP_FAILED)
		goto out;
	ret = 0;
	/* Without a terminal, or once the target has exited, the whole run is printed. */
	if (end == TOP_ONCE || end == TOP_EXITED || (end == TOP_QUIT && !live)) {
		struct top_view *v = &modes[cur].view;

		if (top_take(&modes[cur], true)) {
			ret = 1;
			goto out;
		}
		/* The table of the whole run: the interval is everything since it started. */
		memset(v->prev, 0, v->cap * sizeof(*v->prev));
		v->prev_samples = v->prev_lost = v->prev_aborts = 0;
		v->prev_secs = 0;
		h.interactive = false;
		if (end == TOP_EXITED)
			fprintf(stderr, "nupp-bpf: PID %d exited\n", (int)pid);
		fflush(stderr);
		if (top_view_write(v, &h, o.rows ? o.rows : TOP_ONCE_ROWS, 0, stdout) || fflush(stdout)) {
			cli_error("cannot print the table: %s", strerror(errno));
			ret = 1;
		}
	}
	if (child_done)
		ret = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
out:
	if (o.cmd && pid > 0 && !child_done) {
		kill(pid, SIGTERM); /* the command started for top ends with it */
		waitpid(pid, NULL, 0);
	}
	for (k = 0; k < 2; k++)
		if (modes[k].ses)
			nupp_session_wake_fd(modes[k].ses, -1);
	if (modes[0].ses || modes[1].ses)
		cli_close_later();
	for (k = 0; k < 2; k++) {
		nupp_session_close(modes[k].ses);
		top_view_free(&modes[k].view);
	}
	if (pidfd >= 0)
		close(pidfd);
	if (ep >= 0)
		close(ep);
	free(target);
	return ret;
}

/* Runs top; a failure before sampling began points to doctor. */
int cmd_top(int argc, char **argv)
{
	bool started = false;
	int ret = top_run(argc, argv, &started);

	if (ret == 1 && !started)
		fprintf(stderr, "nupp-bpf: 'nupp-bpf doctor' (with -p PID for a running process) checks what "
				"this machine, these privileges or the target lack\n");
	return ret;
}
