/* nupp-bpf record: samples a LuaJIT process (or a command it starts) and counts its
 * JIT trace aborts, then writes the profile when the duration ends, the target exits,
 * or on Ctrl-C / SIGTERM. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "nupp/sampler.h"
#include "nupp/sampler_abi.h"
#include "nupp/trace.h"
#include "cli.h"

#define RECORD_DRAIN_MS 500 /* count and name what was sampled, at this period */
#define RECORD_WAIT_MS 1000 /* longest wait for events (the session wakes for its drains) */
#define RECORD_STEP_MS 50   /* the wait without a wake fd, to see the target's exit */

#define RECORD_MAX_OUTPUTS 8

#define RECORD_CLOSER_FDS 4096  /* descriptors the closer process releases, at most */
#define RECORD_CLOSER_THREADS 32 /* closing side by side */

struct record_opts {
	int freq;
	int depth;
	double duration;
	const char *outputs[RECORD_MAX_OUTPUTS]; /* -o, repeatable: one file per format */
	int noutputs;
	enum nupp_format format; /* -f: the format of every -o (NONE: by extension) */
	int top;                 /* --top N: print the table after recording */
	bool full_filenames;
	const char *aborts_csv;
	const char *zone;
	const char *root;
	bool lines, quiet, aborts, include_benign, subprocesses, lua_only;
	bool why; /* --why: explain hot interpreted code at the end */
	__u32 max_stacks;
	pid_t pid;
	char **cmd;
};

static volatile sig_atomic_t record_stop_sig;
static bool record_started; /* recording began: a later failure is not doctor's business */
static volatile sig_atomic_t record_written; /* the outputs are written: a second Ctrl-C exits 0 */
static volatile pid_t record_child;          /* the command started, interrupted with us */
static volatile sig_atomic_t record_sigpipe = -1; /* written by a stop signal: ends the wait */
static int record_sigpipe_in = -1;           /* its read end */

/* Prints record's usage. */
static void record_usage(FILE *f)
{
	fprintf(f,
		"USAGE\n"
		"  nupp-bpf record [options] -p PID\n"
		"  nupp-bpf record [options] -- COMMAND [ARGS...]\n\n"
		"Samples the Lua stacks and VM states of a process running our LuaJIT build, and\n"
		"counts its JIT trace aborts, from BPF programs in the kernel. The profile is written\n"
		"when the duration ends, when the target exits, or on Ctrl-C / SIGTERM.\n\n"
		"OPTIONS\n"
		"  -p, --pid PID          profile a running process (all its threads)\n"
		"  -F, --frequency HZ     samples per second per thread (default 99)\n"
		"      --interval-ms MS   the same as a period (the nupp.profile intervalMs)\n"
		"  -d, --duration SEC     stop after SEC (default: until the target exits or Ctrl-C)\n"
		"  -o, --output FILE      by extension: .json nupp profile (default nupp.json), .svg\n"
		"                         flame graph, .speedscope.json, .pb.gz pprof, .folded or\n"
		"                         .txt collapsed stacks, - collapsed stacks to stdout (the\n"
		"                         command's own stdout then goes to stderr); repeatable\n"
		"  -f, --format FMT       svg, speedscope, pprof, json, collapsed, top: the format\n"
		"                         of every -o (e.g. -f svg -o - | ...)\n"
		"      --top N            print the N hottest functions on stderr at the end\n"
		"      --full-filenames   name Lua frames by the chunk's full path, not its basename\n"
		"      --depth N          frames per stack, 1..256 (default 64); a deeper stack keeps\n"
		"                         its leaf-most N frames under a [truncated] root frame\n"
		"      --lua-only         leave out host code (the [host];<function> rows: threads\n"
		"                         and moments outside Lua; meta.hostSamples still counts them)\n"
		"      --lines            name Lua frames module:line (current line)\n"
		"      --zone PREFIX      keep samples whose zone path starts with PREFIX\n"
		"      --root MODULE      cut each stack below the outermost frame of MODULE\n"
		"      --no-aborts        do not count JIT trace aborts\n"
		"      --include-benign   also count aborts that are ordinary trace formation\n"
		"      --aborts FILE.csv  write the abort table as CSV (RFC 4180)\n"
		"      --max-stacks N     distinct stacks kept in the kernel (default 16384)\n"
		"      --subprocesses     also profile every child process that runs our LuaJIT\n"
		"                         (each process's rows carry its pid)\n"
		"      --why              at the end, print the hottest code that ran interpreted and\n"
		"                         the trace aborts that explain it (on stderr)\n"
		"  -q, --quiet            print nothing but errors (no status line, no summary)\n\n"
		"Each output is written to a temporary file renamed into place: one that fails is\n"
		"named with the cause, the others are still written, and the exit status is 1.\n"
		"While recording on a terminal, a status line on stderr shows the elapsed time,\n"
		"samples, lost samples and trace aborts. The outputs are written before waiting\n"
		"for the command to exit; a second Ctrl-C then stops it and exits 0.\n\n"
		"EXAMPLES\n"
		"  sudo nupp-bpf record -p $(pgrep -n luajit) -d 10 -o app.json\n"
		"  sudo nupp-bpf record -o app.svg -o app.json --top 15 -- build/luajit/bin/luajit app.lua\n"
		"  sudo nupp-bpf record -F 999 -o - -- build/luajit/bin/luajit app.lua | flamegraph.pl > app.svg\n"
		"  sudo nupp-bpf record --aborts aborts.csv -o app.folded -- luajit app.lua\n\n"
		"OVERHEAD\n"
		"  Nothing runs in the target: a BPF program runs at each tick on the interrupted\n"
		"  thread. Measured kernel cost per sample: 2-2.5 us at 4 frames, 3-4 us at 32\n"
		"  (frames seen in earlier samples are cached), i.e. 0.04 %% of a CPU at 99 Hz and\n"
		"  0.4 %% at 1000 Hz for a 32-frame stack. Each JIT trace abort costs 2.8 us while\n"
		"  aborts are counted (0.9 us of it in BPF); each Lua function created or freed\n"
		"  3-4 us (a program that compiles code without pause runs ~1.3x slower).\n"
		"  See README.md \"Overhead\".\n");
}

/* The format of output path: forced by -f, else by its extension (NONE: unknown). */
static enum nupp_format record_format(const struct record_opts *o, const char *path)
{
	return o->format ? o->format : nupp_format_by_path(path);
}

/* Parses record's options; 0, or the exit status for a usage error / --help (-1 = 0). */
static int record_parse(int argc, char **argv, struct record_opts *o)
{
	enum { O_INTERVAL = 256, O_DEPTH, O_LINES, O_ZONE, O_ROOT, O_NOABORTS, O_BENIGN, O_ABORTS, O_MAXSTACKS,
	       O_SUBPROC, O_WHY, O_TOP, O_FULLNAMES, O_LUAONLY };
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "frequency", required_argument, NULL, 'F' },
		{ "interval-ms", required_argument, NULL, O_INTERVAL },
		{ "duration", required_argument, NULL, 'd' },
		{ "output", required_argument, NULL, 'o' },
		{ "depth", required_argument, NULL, O_DEPTH },
		{ "lines", no_argument, NULL, O_LINES },
		{ "zone", required_argument, NULL, O_ZONE },
		{ "root", required_argument, NULL, O_ROOT },
		{ "no-aborts", no_argument, NULL, O_NOABORTS },
		{ "include-benign", no_argument, NULL, O_BENIGN },
		{ "aborts", required_argument, NULL, O_ABORTS },
		{ "max-stacks", required_argument, NULL, O_MAXSTACKS },
		{ "subprocesses", no_argument, NULL, O_SUBPROC },
		{ "lua-only", no_argument, NULL, O_LUAONLY },
		{ "quiet", no_argument, NULL, 'q' },
		{ "why", no_argument, NULL, O_WHY },
		{ "format", required_argument, NULL, 'f' },
		{ "top", required_argument, NULL, O_TOP },
		{ "full-filenames", no_argument, NULL, O_FULLNAMES },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool freq_set = false;
	long v;
	int c;

	while ((c = getopt_long(argc, argv, "+p:F:d:o:f:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (!cli_int(optarg, 1, 4194304, &v)) {
				cli_error("invalid PID '%s': expected a positive integer", optarg);
				return 2;
			}
			o->pid = (pid_t)v;
			break;
		case 'F':
			if (!cli_int(optarg, 1, 100000, &v)) {
				cli_error("invalid frequency '%s': expected 1..100000 Hz", optarg);
				return 2;
			}
			if (freq_set && o->freq != (int)v) {
				cli_error("-F and --interval-ms disagree: give one of them");
				return 2;
			}
			o->freq = (int)v;
			freq_set = true;
			break;
		case O_INTERVAL:
			if (!cli_int(optarg, 1, 60000, &v)) {
				cli_error("invalid interval '%s': expected 1..60000 ms", optarg);
				return 2;
			}
			if (freq_set && o->freq != (int)(1000 / v)) {
				cli_error("-F and --interval-ms disagree: give one of them");
				return 2;
			}
			o->freq = (int)(1000 / v) ? (int)(1000 / v) : 1;
			freq_set = true;
			break;
		case 'd': {
			char *end;

			errno = 0;
			o->duration = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->duration > 0) || o->duration > 1e7) {
				cli_error("invalid duration '%s': expected seconds > 0", optarg);
				return 2;
			}
			break;
		}
		case 'o':
			if (!cli_output_opt(optarg, o->outputs, &o->noutputs, RECORD_MAX_OUTPUTS))
				return 2;
			break;
		case 'f': {
			int f;

			if (!cli_format_opt(optarg, false, &f))
				return 2;
			o->format = (enum nupp_format)f;
			break;
		}
		case O_TOP:
			if (!cli_top_opt(optarg, &o->top))
				return 2;
			break;
		case O_FULLNAMES:
			o->full_filenames = true;
			break;
		case O_DEPTH:
			if (!cli_int(optarg, 1, NUPP_SMP_MAX_DEPTH, &v)) {
				cli_error("invalid depth '%s': expected 1..%d frames", optarg, NUPP_SMP_MAX_DEPTH);
				return 2;
			}
			o->depth = (int)v;
			break;
		case O_LINES:
			o->lines = true;
			break;
		case O_LUAONLY:
			o->lua_only = true;
			break;
		case O_ZONE:
			o->zone = optarg;
			break;
		case O_ROOT:
			o->root = optarg;
			break;
		case O_NOABORTS:
			o->aborts = false;
			break;
		case O_BENIGN:
			o->include_benign = true;
			break;
		case O_ABORTS:
			o->aborts_csv = optarg;
			break;
		case O_MAXSTACKS:
			if (!cli_int(optarg, 64, 1 << 24, &v)) {
				cli_error("invalid --max-stacks '%s': expected 64..16777216", optarg);
				return 2;
			}
			o->max_stacks = (__u32)v;
			break;
		case O_SUBPROC:
			o->subprocesses = true;
			break;
		case 'q':
			o->quiet = true;
			break;
		case O_WHY:
			o->why = true;
			break;
		case 'h':
			record_usage(stdout);
			return -1;
		default:
			record_usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		o->cmd = argv + optind;
	if (!o->pid == !o->cmd) {
		cli_error(o->pid ? "give either -p PID or -- COMMAND, not both" : "nothing to record: give -p PID or -- COMMAND");
		record_usage(stderr);
		return 2;
	}
	if (!o->noutputs)
		o->outputs[o->noutputs++] = "nupp.json";
	for (c = 0; c < o->noutputs; c++)
		if (!record_format(o, o->outputs[c])) {
			cli_error("unknown output format for '%s': use FILE.json (nupp profile), FILE.svg (flame "
				  "graph), FILE.speedscope.json, FILE.pb.gz (pprof), FILE.folded or FILE.txt "
				  "(collapsed stacks), or - (collapsed stacks to stdout)",
				  o->outputs[c]);
			return 2;
		}
	if (o->aborts_csv && !o->aborts) {
		cli_error("--aborts FILE.csv needs the abort channel: drop --no-aborts");
		return 2;
	}
	return 0;
}

/* Checks that an output can be written (its folder exists and is writable, it is not a
 * folder), so a profile is never recorded only to be lost at the end; 0, or 1 after
 * the error. */
static int record_check_output(const char *path)
{
	if (path && nupp_output_check(path)) {
		cli_error("%s", nupp_errmsg());
		return 1;
	}
	return 0;
}

/* Reports what the profile needs and this process lacks (capabilities, BTF); 0 if none. */
static int record_check_privileges(void)
{
	char why[512];

	if (nupp_available(-1, why, sizeof(why)) == 0)
		return 0;
	cli_error("cannot profile: %s", why);
	return 1;
}

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

/* wait_ms, or less: no later than time until (now being now). */
static int record_wait_until(int wait_ms, double until, double now)
{
	if ((until - now) * 1000 >= wait_ms)
		return wait_ms;
	return until > now ? (int)((until - now) * 1000) + 1 : 0;
}

/* The fd record waits on besides the session's events: an epoll set of a pipe that the
 * stop signals write and of pidfd (the target's, -1: none), so that it wakes for those at
 * once and sleeps otherwise; -1 when it cannot be made (then it waits in short steps). */
static int record_wake_fd(int pidfd)
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
static void record_signals(void)
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

/* The descriptors a closer releases, and the next one to take. */
struct record_fds {
	int fd[RECORD_CLOSER_FDS];
	int n;
	int next;
};

/* A closer thread: closes descriptors until none is left. */
static void *record_close_some(void *arg)
{
	struct record_fds *f = arg;
	int i;

	while ((i = __atomic_fetch_add(&f->next, 1, __ATOMIC_SEQ_CST)) < f->n)
		close(f->fd[i]);
	return NULL;
}

/* The closer process: once the record process (pidfd) has exited, closes every
 * descriptor it was given, side by side, and exits. The last close of a uprobe's perf
 * event unregisters it, which waits for kernel grace periods: many at once share them.
 * Started by record_close_later as "nupp-bpf-detach PIDFD", in a session of its own. */
void __attribute__((noreturn)) record_closer(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	static struct record_fds f;
	pthread_t th[RECORD_CLOSER_THREADS];
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
	/* Until the record process has dropped its references: then ours are the last. */
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	d = opendir("/proc/self/fd");
	while (d && (de = readdir(d)) && f.n < RECORD_CLOSER_FDS) {
		int fd = atoi(de->d_name);

		if (de->d_name[0] != '.' && fd > 2 && fd != dirfd(d))
			f.fd[f.n++] = fd;
	}
	if (d)
		closedir(d);
	while (nth < RECORD_CLOSER_THREADS && nth < f.n &&
	       pthread_create(&th[nth], NULL, record_close_some, &f) == 0)
		nth++;
	record_close_some(&f);
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
static void record_close_later(void)
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

/* Monotonic seconds. */
static double record_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Forks the command, blocked on a gate until the probes are attached. Under sudo the
 * child runs as the invoking user. Returns the PID, gate write end in *gate. */
static pid_t record_spawn(char **cmd, int *gate, bool stdout_to_stderr)
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
		 * when record is killed outright (kill -9); set after the drop to SUDO_UID,
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
static char *record_join(int argc, char **argv)
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

/* Writes every output and the abort CSV, each on its own (one that fails does not
 * stop the others); failed[i] says which failed (index noutputs: the CSV). Returns
 * how many failed, after printing each error. */
static int record_write(const struct record_opts *o, const struct nupp_profile *prof, bool *failed)
{
	struct nupp_report_opts ro = { .sz = sizeof(ro), .top = o->top };
	int i, nfailed = 0;

	for (i = 0; i < o->noutputs; i++) {
		failed[i] = nupp_profile_write_file(prof, o->outputs[i], record_format(o, o->outputs[i]), &ro) != 0;
		if (failed[i]) {
			cli_error("%s", nupp_errmsg());
			nfailed++;
		}
	}
	failed[o->noutputs] = o->aborts_csv && nupp_profile_write_file(prof, o->aborts_csv, NUPP_FMT_CSV, &ro);
	if (failed[o->noutputs]) {
		cli_error("%s", nupp_errmsg());
		nfailed++;
	}
	return nfailed;
}

/* The current folder, for the file:// hint ("." if unknown). */
static const char *record_cwd(void)
{
	static char cwd[PATH_MAX];

	return getcwd(cwd, sizeof(cwd)) ? cwd : ".";
}

/* The status line on stderr while recording on a terminal: elapsed, samples, lost,
 * aborts; rewritten in place (and cleared with done). */
static void record_status(struct nupp_session *ses, double secs, bool done)
{
	struct nupp_trace_counters tc = { 0 };
	struct nupp_trace *tr = nupp_session_trace(ses);
	unsigned long long t[9] = { 0 }, lost = 0;
	struct nupp_profile *p;
	int i, err;

	if (done) {
		fputs("\r\033[K", stderr);
		return;
	}
	p = nupp_session_snapshot(ses, &err);
	if (p) {
		nupp_profile_totals(p, t);
		nupp_session_profile_free(p);
	}
	for (i = 3; i < 9; i++)
		lost += t[i];
	if (tr)
		nupp_trace_counters(tr, &tc);
	fprintf(stderr, "\r\033[Knupp-bpf: %.0f s, %llu samples, %llu lost", secs, t[0], lost);
	if (tr)
		fprintf(stderr, ", %llu trace aborts", (unsigned long long)tc.total_aborts);
	fputs(" (Ctrl-C to stop)", stderr);
	fflush(stderr);
}

/* Prints the final summary line(s) on stderr: what was written, and what failed. */
static void record_summary(const struct record_opts *o, const struct nupp_sample_set *set,
			   const struct nupp_abort_set *ab, double secs, const bool *failed)
{
	char lost[256] = "", files[1024] = "", bad[1024] = "";
	__u64 total = 0;
	int i;

	for (i = 0; i < NUPP_LOST__MAX; i++) {
		total += set->lost[i];
		if (set->lost[i])
			snprintf(lost + strlen(lost), sizeof(lost) - strlen(lost), "%s%s %llu", lost[0] ? ", " : "",
				 nupp_lost_name(i), (unsigned long long)set->lost[i]);
	}
	for (i = 0; i < o->noutputs; i++) {
		char *buf = failed[i] ? bad : files;

		snprintf(buf + strlen(buf), sizeof(files) - strlen(buf), "%s%s", buf[0] ? ", " : "",
			 strcmp(o->outputs[i], "-") == 0 ? "stdout" : o->outputs[i]);
	}
	fprintf(stderr, "nupp-bpf: %s%s%s%s%s: %llu samples in %zu stacks over %.1f s, lost %llu%s%s%s\n",
		files[0] ? "wrote " : "", files, files[0] && bad[0] ? "; " : "", bad[0] ? "FAILED to write " : "", bad,
		(unsigned long long)set->samples, set->n, secs, (unsigned long long)total, lost[0] ? " (" : "", lost,
		lost[0] ? ")" : "");
	if (o->aborts)
		fprintf(stderr, "nupp-bpf: %llu trace aborts, %llu blacklisted, %zu distinct sites%s%s\n",
			(unsigned long long)ab->total_aborts, (unsigned long long)ab->blacklisted, ab->n,
			!o->aborts_csv ? "" : failed[o->noutputs] ? ", FAILED to write " : ", written to ",
			o->aborts_csv ? o->aborts_csv : "");
	for (i = 0; i < o->noutputs; i++)
		if (!failed[i] && record_format(o, o->outputs[i]) == NUPP_FMT_SVG && strcmp(o->outputs[i], "-"))
			fprintf(stderr, "nupp-bpf: open the flame graph in a web browser: xdg-open %s (or file://%s%s%s)\n",
				o->outputs[i], o->outputs[i][0] == '/' ? "" : record_cwd(), o->outputs[i][0] == '/' ? "" : "/",
				o->outputs[i]);
}

/* Prints what became of the traces sampled: copied whole by BPF at their first sample
 * (named from the copy), or why not (then read from the target); and the prototypes
 * watched (met by samples) and their frees reported. */
static void record_trace_copies(struct nupp_sampler *smp)
{
	__u64 tc[NUPP_SMP_TC_N], watched = 0, freed = 0, dead = 0;
	int i;

	nupp_sampler_trace_copies(smp, tc, NUPP_SMP_TC_N);
	fprintf(stderr, "nupp-bpf: traces sampled: %llu copied by bpf; not copied:", (unsigned long long)tc[0]);
	for (i = 1; i < NUPP_SMP_TC_N; i++)
		fprintf(stderr, " %s %llu", nupp_sampler_tcopy_name(i), (unsigned long long)tc[i]);
	fprintf(stderr, "\n");
	nupp_sampler_proto_counts(smp, &watched, &freed);
	nupp_sampler_proto_dead(smp, &dead);
	fprintf(stderr, "nupp-bpf: prototypes: %llu freed, %llu watched (met by a sample or a trace copy), %llu of "
		"their frees reported\n", (unsigned long long)dead, (unsigned long long)watched,
		(unsigned long long)freed);
}

/* Prints what the samples' walks did: frames from the frame cache, reads, new stacks. */
static void record_walk_stats(struct nupp_sampler *smp)
{
	__u64 v[NUPP_SMP_WS_N];
	double n;

	if (nupp_sampler_walk_stats(smp, v, NUPP_SMP_WS_N) || !v[NUPP_SMP_WS_SAMPLES])
		return;
	n = (double)v[NUPP_SMP_WS_SAMPLES];
	fprintf(stderr,
		"nupp-bpf: walks: %llu samples, %.1f frames each, %.1f %% from the frame cache (%llu filled, "
		"%.1f lookups, %.1f functions not read, %.2f free generations read, %.2f refused by a prototype "
		"free a sample), %.1f reads of %.0f bytes a sample, %.1f %% new stacks\n",
		(unsigned long long)v[NUPP_SMP_WS_SAMPLES], (double)v[NUPP_SMP_WS_FRAMES] / n,
		v[NUPP_SMP_WS_FRAMES] ? 100.0 * (double)v[NUPP_SMP_WS_HITS] / (double)v[NUPP_SMP_WS_FRAMES] : 0.0,
		(unsigned long long)v[NUPP_SMP_WS_FILLS], (double)v[NUPP_SMP_WS_LOOKS] / n,
		(double)v[NUPP_SMP_WS_FNHITS] / n,
		(double)v[NUPP_SMP_WS_PGREADS] / n, (double)v[NUPP_SMP_WS_STALE] / n, (double)v[NUPP_SMP_WS_READS] / n,
		(double)v[NUPP_SMP_WS_RBYTES] / n, 100.0 * (double)v[NUPP_SMP_WS_NEWSTACK] / n);
	fprintf(stderr, "nupp-bpf: %llu samples not counted: time the hypervisor took from the CPU (steal)\n",
		(unsigned long long)v[NUPP_SMP_WS_STOLEN]);
}

/* Prints the kernel cost of the BPF programs (needs kernel.bpf_stats_enabled=1). */
static void record_stats(struct nupp_sampler *smp, struct nupp_trace *tr)
{
	__u64 ns = 0, cnt = 0, tns = 0, tcnt = 0, pns = 0, pcnt = 0;

	nupp_sampler_stats(smp, &ns, &cnt);
	nupp_sampler_proto_stats(smp, &pns, &pcnt);
	if (tr)
		nupp_trace_stats(tr, &tns, &tcnt);
	if (!cnt && !tcnt) {
		fprintf(stderr, "nupp-bpf: bpf statistics are off (sysctl kernel.bpf_stats_enabled=1 turns them on)\n");
		return;
	}
	fprintf(stderr,
		"nupp-bpf: bpf sampler %llu runs, %.0f ns/run (trace copies included); trace %llu runs, %.0f ns/run; "
		"prototype events %llu runs, %.0f ns/run\n",
		(unsigned long long)cnt, cnt ? (double)ns / cnt : 0.0, (unsigned long long)tcnt,
		tcnt ? (double)tns / tcnt : 0.0, (unsigned long long)pcnt, pcnt ? (double)pns / pcnt : 0.0);
}

/* CPU seconds this process used so far (all its threads), user and system; 0 when
 * unknown. */
static double record_cpu(double *user, double *sys)
{
	struct rusage ru;

	*user = *sys = 0;
	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	*user = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
	*sys = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	return *user + *sys;
}

/* Prints the CPU time this process used, start to now, and the part of it spent before
 * recording began (start_cpu: loading and attaching): the target's own (and the kernel's
 * work for it, BPF programs included) is not in it, nor that of the command's
 * descendants or of the detached closer. */
static void record_own_cpu(double start_cpu)
{
	double u, k, all = record_cpu(&u, &k);

	fprintf(stderr, "nupp-bpf: own CPU %.3f s (user %.3f s, system %.3f s), %.3f s of it before recording began\n",
		all, u, k, start_cpu);
}

/* Prints the warnings of a finished session: children not followed. */
static void record_warnings(const struct record_opts *o, struct nupp_session *ses)
{
	unsigned long long forks, too_many;
	const char *c;
	int i;

	if (o->quiet)
		return;
	for (i = 0; (c = nupp_session_unfollowed(ses, i)); i++)
		fprintf(stderr, "nupp-bpf: warning: child process %s ran our LuaJIT and was not followed "
			"(--subprocesses follows it)\n", c);
	nupp_session_not_profiled(ses, &forks, &too_many);
	if (forks)
		fprintf(stderr, "nupp-bpf: warning: %llu forked child process%s ran the Lua VM of %s parent and %s "
			"not followed (--subprocesses follows them)\n", forks, forks == 1 ? "" : "es",
			forks == 1 ? "its" : "their", forks == 1 ? "was" : "were");
	if (too_many)
		fprintf(stderr, "nupp-bpf: warning: %llu process%s not profiled: too many were profiled at once\n",
			too_many, too_many == 1 ? " was" : "es were");
}

static int record_run(int argc, char **argv)
{
	struct record_opts o = { .freq = 99, .depth = NUPP_SMP_DEFAULT_DEPTH, .aborts = true };
	struct nupp_session *ses = NULL;
	struct nupp_profile *prof = NULL;
	char *cmdline = NULL, *target = NULL;
	int ret = 1, err = 0, gate = -1, pidfd = -1, status = 0, wake = -1, i;
	bool child_done = false, killed_by_us = false, to_stdout = false, status_line;
	bool failed[RECORD_MAX_OUTPUTS + 1] = { 0 };
	double t0, next_status, start_cpu = 0, cpu_u, cpu_s;
	pid_t pid;

	ret = record_parse(argc, argv, &o);
	if (ret)
		return ret < 0 ? 0 : ret;
	ret = 1;
	/* Before the slow part (loading BPF): a Ctrl-C then stops right after the attach. */
	record_signals();
	if (record_check_privileges())
		return 1;
	for (i = 0; i < o.noutputs; i++) {
		if (record_check_output(o.outputs[i]))
			return 1;
		to_stdout |= strcmp(o.outputs[i], "-") == 0;
	}
	if (record_check_output(o.aborts_csv))
		return 1;
	if (o.pid && kill(o.pid, 0) && errno == ESRCH) {
		cli_error("cannot profile PID %d: no such process", (int)o.pid);
		return 1;
	}
	if (o.pid) {
		struct nupp_vm vm;
		int n = nupp_vm_find(o.pid, &vm, 1);

		if (n <= 0) {
			cli_error("cannot profile PID %d: %s", (int)o.pid,
				  n < 0 ? nupp_errmsg() : "it runs our LuaJIT but has no Lua VM open (yet)");
			return 1;
		}
	} else {
		char bin[PATH_MAX];

		err = nupp_vm_binary_for_exe(o.cmd[0], bin, sizeof(bin));
		if (err && err != -ENOEXEC) {
			cli_error("cannot profile %s: %s", o.cmd[0], nupp_errmsg());
			return 1;
		}
		/* Not LuaJIT (a wrapper, env, sh -c): followed until it execs our LuaJIT. */
		if (err == -ENOEXEC && !o.quiet)
			fprintf(stderr, "nupp-bpf: %s; following it until it runs our LuaJIT\n", nupp_errmsg());
		target = record_join(argc - optind, argv + optind);
	}
	cmdline = record_join(argc, argv);
	{
		struct nupp_session_opts so = {
			.sz = sizeof(so), .samples = true, .aborts = o.aborts, .freq_hz = o.freq, .depth = o.depth,
			.lines = o.lines, .include_benign = o.include_benign, .max_stacks = o.max_stacks,
			.zone_filter = o.zone, .root = o.root, .drain_ms = RECORD_DRAIN_MS,
			.subprocesses = o.subprocesses, .command = cmdline, .target = target,
			.full_filenames = o.full_filenames, .lua_only = o.lua_only,
		};

		ses = nupp_session_open(&so, &err);
		if (!ses) {
			cli_error("cannot start profiling: %s", nupp_errmsg());
			goto out;
		}
	}
	if (o.cmd) {
		pid = record_spawn(o.cmd, &gate, to_stdout);
		record_child = pid;
		if (pid < 0) {
			cli_error("cannot start %s: %s", o.cmd[0], strerror(errno));
			goto out;
		}
		err = nupp_session_attach_spawned(ses, pid, o.cmd[0]);
		if (err) {
			cli_error("cannot attach to %s: %s", o.cmd[0], nupp_errmsg());
			close(gate); /* the child exits without running */
			waitpid(pid, NULL, 0);
			goto out;
		}
	} else {
		pid = o.pid;
		err = nupp_session_attach(ses, pid);
		if (err) {
			cli_error("cannot attach to PID %d: %s", (int)pid, nupp_errmsg());
			goto out;
		}
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	}
	/* A command's exit wakes the wait too (its status is still taken with waitpid). */
	if (o.cmd)
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	wake = record_wake_fd(pidfd);
	if (wake >= 0)
		nupp_session_wake_fd(ses, wake);
	record_started = true;
	start_cpu = record_cpu(&cpu_u, &cpu_s);
	if (!o.quiet)
		fprintf(stderr, "nupp-bpf: recording %s %d at %d Hz%s; Ctrl-C to stop\n",
			o.cmd ? "command, PID" : "PID", (int)pid, o.freq, o.aborts ? " with trace aborts" : "");
	nupp_session_start(ses);
	t0 = record_now();
	next_status = t0 + 1;
	status_line = !o.quiet && isatty(2);
	if (gate >= 0) {
		if (write(gate, "g", 1) != 1) {
		}
		close(gate);
		gate = -1;
	}
	while (!record_stop_sig) {
		/* Asleep until an event, a drain, the target's exit or a signal (the wake fd);
		 * without it, in steps of RECORD_STEP_MS. */
		double now = record_now();
		int wait_ms = wake >= 0 && pidfd >= 0 ? RECORD_WAIT_MS : RECORD_STEP_MS;

		if (o.duration > 0)
			wait_ms = record_wait_until(wait_ms, t0 + o.duration, now);
		if (status_line)
			wait_ms = record_wait_until(wait_ms, next_status, now);
		err = nupp_session_poll(ses, wait_ms);
		if (err < 0 && err != -EINTR) {
			cli_error("sampling failed: %s", nupp_errmsg());
			break;
		}
		if (o.cmd) {
			if (waitpid(pid, &status, WNOHANG) == pid) {
				child_done = true;
				break;
			}
		} else if (pidfd >= 0) {
			struct pollfd p = { .fd = pidfd, .events = POLLIN };

			if (poll(&p, 1, 0) > 0)
				break; /* the target exited */
		} else if (o.pid && kill(o.pid, 0) && errno == ESRCH) {
			break;
		}
		if (o.duration > 0 && record_now() - t0 >= o.duration)
			break;
		if (status_line && record_now() >= next_status) {
			record_status(ses, record_now() - t0, false);
			next_status = record_now() + 1;
		}
	}
	if (status_line)
		record_status(ses, 0, true);
	if (record_stop_sig && o.cmd && !child_done)
		kill(pid, record_stop_sig == SIGHUP ? SIGHUP : record_stop_sig);
	prof = nupp_session_stop(ses, &err);
	if (!prof) {
		cli_error("reading the profile failed: %s", nupp_errmsg());
		goto out;
	}
	if (o.cmd && !child_done && !record_stop_sig) {
		kill(pid, SIGTERM); /* the duration ended: stop the command */
		killed_by_us = true;
	}
	record_warnings(&o, ses);
	if (o.zone && !nupp_session_zones_seen(ses)) {
		cli_error("--zone %s matches nothing: %s never loaded nupp.zone, so no sample has a zone path "
			  "(require(\"nupp.zone\") in the program, or drop --zone); nothing was written",
			  o.zone, o.cmd ? "the command" : "the process");
		if (o.cmd && !child_done)
			waitpid(pid, &status, 0);
		goto out;
	}
	if (o.cmd && !prof->meta.npids && !o.quiet)
		fprintf(stderr, "nupp-bpf: warning: %s never ran our LuaJIT: nothing was profiled\n", o.cmd[0]);
	ret = record_write(&o, prof, failed) ? 1 : 0;
	record_written = 1;
	/* Nothing the profile needs comes after: a second Ctrl-C from here on exits at once. */
	record_close_later();
	if (!o.quiet)
		record_summary(&o, &prof->samples, &prof->aborts, prof->meta.duration_sec, failed);
	if (o.top) {
		struct nupp_report_opts ro = { .sz = sizeof(ro), .top = o.top };

		fflush(stderr);
		if (nupp_profile_write(prof, NUPP_FMT_TOP, &ro, stderr))
			cli_error("cannot print the top functions: %s", nupp_errmsg());
	}
	if (!ret && o.why && cli_why(prof, false, stderr))
		ret = 1;
	if (cli_verbose) {
		record_trace_copies(nupp_session_sampler(ses));
		record_walk_stats(nupp_session_sampler(ses));
		record_stats(nupp_session_sampler(ses), nupp_session_trace(ses));
		fprintf(stderr, "nupp-bpf: target memory reads: %llu process_vm_readv calls, %.0f/s\n",
			(unsigned long long)nupp_vm_read_calls(),
			prof->meta.duration_sec > 0 ? nupp_vm_read_calls() / prof->meta.duration_sec : 0.0);
	}
	/* The outputs are written before waiting for the command: one that takes its time
	 * to stop (a compiled loop only sees LuaJIT's SIGINT hook when it leaves the trace)
	 * loses nothing, and a second Ctrl-C leaves at once. */
	if (o.cmd && !child_done) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			child_done = true;
		else if (!o.quiet && record_stop_sig == SIGINT)
			fprintf(stderr, "nupp-bpf: waiting for %s to exit (Ctrl-C again stops it)\n", o.cmd[0]);
		while (!child_done && waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		child_done = true;
		record_child = 0;
	}
	if (!ret && o.cmd && child_done && !killed_by_us)
		ret = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
out:
	if (pidfd >= 0)
		close(pidfd);
	if (wake >= 0) {
		nupp_session_wake_fd(ses, -1);
		close(wake);
	}
	if (record_sigpipe >= 0) {
		int w = record_sigpipe;

		record_sigpipe = -1; /* a later signal writes nothing */
		close(w);
		close(record_sigpipe_in);
		record_sigpipe_in = -1;
	}
	/* The probes are detached by a closer process after we exit: this one then exits at
	 * once (its own closes only drop references). */
	if (ses)
		record_close_later();
	nupp_session_profile_free(prof);
	nupp_session_close(ses);
	free(cmdline);
	free(target);
	if (cli_verbose)
		record_own_cpu(start_cpu);
	return ret;
}

/* Runs record; a failure before recording began points to doctor. */
int cmd_record(int argc, char **argv)
{
	int ret = record_run(argc, argv);

	if (ret == 1 && !record_started)
		fprintf(stderr, "nupp-bpf: 'nupp-bpf doctor' (with -p PID for a running process) checks what "
				"this machine, these privileges or the target lack\n");
	return ret;
}
