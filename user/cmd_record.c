/* nupp-bpf record: samples a LuaJIT process (or a command it starts) and counts its
 * JIT trace aborts, then writes the profile when the duration ends, the target exits,
 * or on Ctrl-C / SIGTERM. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#define RECORD_DRAIN_MS 200 /* symbolize while the target is alive, at this period */

struct record_opts {
	int freq;
	int depth;
	double duration;
	const char *outputs[4]; /* -o, repeatable: one file per format */
	int noutputs;
	const char *aborts_csv;
	const char *zone;
	const char *root;
	bool lines, quiet, aborts, include_benign, lua_only;
	__u32 max_stacks;
	pid_t pid;
	char **cmd;
};

static volatile sig_atomic_t record_stop_sig;

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
		"  -o, --output FILE      .json = nupp profile (default nupp.json); .folded or .txt =\n"
		"                         collapsed stacks; - = collapsed stacks to stdout; repeatable\n"
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
		"  -q, --quiet            print nothing but errors\n\n"
		"EXAMPLES\n"
		"  sudo nupp-bpf record -p $(pgrep -n luajit) -d 10 -o app.json\n"
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

/* Parses a decimal integer option within [lo, hi]; false on error. */
static bool record_int(const char *s, long lo, long hi, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	return !errno && end != s && !*end && *out >= lo && *out <= hi;
}

/* Output format by file name: 'j' JSON, 'c' collapsed, 0 unknown. */
static char record_format(const char *path)
{
	const char *dot = strrchr(path, '.');

	if (strcmp(path, "-") == 0)
		return 'c';
	if (dot && strcmp(dot, ".json") == 0)
		return 'j';
	if (dot && (strcmp(dot, ".folded") == 0 || strcmp(dot, ".txt") == 0 || strcmp(dot, ".collapsed") == 0))
		return 'c';
	return 0;
}

/* Parses record's options; 0, or the exit status for a usage error / --help (-1 = 0). */
static int record_parse(int argc, char **argv, struct record_opts *o)
{
	enum { O_INTERVAL = 256, O_DEPTH, O_LINES, O_ZONE, O_ROOT, O_NOABORTS, O_BENIGN, O_ABORTS, O_MAXSTACKS, O_LUAONLY };
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
		{ "lua-only", no_argument, NULL, O_LUAONLY },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool freq_set = false;
	long v;
	int c;

	while ((c = getopt_long(argc, argv, "+p:F:d:o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (!record_int(optarg, 1, 4194304, &v)) {
				cli_error("invalid PID '%s': expected a positive integer", optarg);
				return 2;
			}
			o->pid = (pid_t)v;
			break;
		case 'F':
			if (!record_int(optarg, 1, 100000, &v)) {
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
			if (!record_int(optarg, 1, 60000, &v)) {
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
			if (o->noutputs == 4) {
				cli_error("at most 4 -o outputs");
				return 2;
			}
			o->outputs[o->noutputs++] = optarg;
			break;
		case O_DEPTH:
			if (!record_int(optarg, 1, NUPP_SMP_MAX_DEPTH, &v)) {
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
			if (!record_int(optarg, 64, 1 << 24, &v)) {
				cli_error("invalid --max-stacks '%s': expected 64..16777216", optarg);
				return 2;
			}
			o->max_stacks = (__u32)v;
			break;
		case 'q':
			o->quiet = true;
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
		if (!record_format(o->outputs[c])) {
			cli_error("unknown output format for '%s': use FILE.json (nupp profile), FILE.folded or "
				  "FILE.txt (collapsed stacks), or - (collapsed stacks to stdout)",
				  o->outputs[c]);
			return 2;
		}
	if (o->aborts_csv && !o->aborts) {
		cli_error("--aborts FILE.csv needs the abort channel: drop --no-aborts");
		return 2;
	}
	return 0;
}

/* Checks that the directory of an output file exists and is writable, so a profile
 * is never recorded only to be lost at the end; 0, or 1 after the error. */
static int record_check_output(const char *path)
{
	char dir[PATH_MAX];
	const char *slash;

	if (!path || strcmp(path, "-") == 0)
		return 0;
	slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	if (access(dir, W_OK | X_OK) != 0) {
		cli_error("cannot write %s: %s: %s", path, dir, strerror(errno));
		return 1;
	}
	return 0;
}

/* Reports the capabilities the profile needs and this process lacks; 0 if none. */
static int record_check_privileges(void)
{
	static const struct {
		int bit;
		const char *name;
	} caps[] = { { 39, "CAP_BPF" }, { 38, "CAP_PERFMON" }, { 19, "CAP_SYS_PTRACE" } };
	unsigned long long eff = 0;
	char line[256], missing[128] = "";
	FILE *f = fopen("/proc/self/status", "re");
	size_t i;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	if (f)
		fclose(f);
	for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		if (!(eff & (1ULL << caps[i].bit)))
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",
				 missing[0] ? ", " : "", caps[i].name);
	if (missing[0]) {
		cli_error("cannot profile: missing %s (run with sudo, or grant CAP_BPF, CAP_PERFMON and "
			  "CAP_SYS_PTRACE)", missing);
		return 1;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		cli_error("cannot profile: this kernel has no BTF (/sys/kernel/btf/vmlinux): nupp-bpf needs a "
			  "kernel built with CONFIG_DEBUG_INFO_BTF=y");
		return 1;
	}
	return 0;
}

/* Signal handler: first Ctrl-C / SIGTERM asks to stop and write; a second Ctrl-C exits. */
static void record_on_signal(int sig)
{
	if (record_stop_sig && sig == SIGINT) {
		static const char msg[] = "nupp-bpf: interrupted twice, exiting without writing\n";

		if (write(2, msg, sizeof(msg) - 1) < 0) {
		}
		_exit(130);
	}
	record_stop_sig = sig;
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
static pid_t record_spawn(char **cmd, int *gate)
{
	int fds[2];
	pid_t pid;

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

/* Writes one output file (or stdout for "-"); 0 or 1 after printing the error. */
static int record_write_one(const char *path, const struct nupp_profile_meta *meta,
			    const struct nupp_sample_set *set, const struct nupp_abort_set *ab)
{
	FILE *f;
	int err;

	if (strcmp(path, "-") == 0) {
		err = nupp_write_collapsed(set, stdout);
		if (fflush(stdout) && !err)
			err = -errno;
	} else {
		f = fopen(path, "we");
		if (!f) {
			cli_error("cannot write %s: %s", path, strerror(errno));
			return 1;
		}
		err = record_format(path) == 'j' ? nupp_write_profile_json(meta, set, ab, f)
						 : nupp_write_collapsed(set, f);
		if (fclose(f) && !err)
			err = -errno;
	}
	if (err) {
		cli_error("cannot write %s: %s", path, strerror(-err));
		return 1;
	}
	return 0;
}

/* Writes every output and the abort CSV; 0 or 1 after printing the error. */
static int record_write(const struct record_opts *o, const struct nupp_profile_meta *meta,
			const struct nupp_sample_set *set, const struct nupp_abort_set *ab)
{
	FILE *f;
	int i, err;

	for (i = 0; i < o->noutputs; i++)
		if (record_write_one(o->outputs[i], meta, set, ab))
			return 1;
	if (o->aborts_csv) {
		f = fopen(o->aborts_csv, "we");
		if (!f) {
			cli_error("cannot write %s: %s", o->aborts_csv, strerror(errno));
			return 1;
		}
		err = nupp_write_abort_csv(ab, f);
		if (fclose(f) && !err)
			err = -errno;
		if (err) {
			cli_error("cannot write %s: %s", o->aborts_csv, strerror(-err));
			return 1;
		}
	}
	return 0;
}

/* Prints the final summary line(s) on stderr. */
static void record_summary(const struct record_opts *o, const struct nupp_sample_set *set,
			   const struct nupp_abort_set *ab, double secs)
{
	char lost[256] = "";
	__u64 total = 0;
	int i;

	for (i = 0; i < NUPP_LOST__MAX; i++) {
		total += set->lost[i];
		if (set->lost[i])
			snprintf(lost + strlen(lost), sizeof(lost) - strlen(lost), "%s%s %llu", lost[0] ? ", " : "",
				 nupp_lost_name(i), (unsigned long long)set->lost[i]);
	}
	char files[512] = "";

	for (i = 0; i < o->noutputs; i++)
		snprintf(files + strlen(files), sizeof(files) - strlen(files), "%s%s", i ? ", " : "",
			 strcmp(o->outputs[i], "-") == 0 ? "stdout" : o->outputs[i]);
	fprintf(stderr, "nupp-bpf: wrote %s: %llu samples in %zu stacks over %.1f s, lost %llu%s%s%s\n",
		files, (unsigned long long)set->samples, set->n, secs,
		(unsigned long long)total, lost[0] ? " (" : "", lost, lost[0] ? ")" : "");
	if (o->aborts)
		fprintf(stderr, "nupp-bpf: %llu trace aborts, %llu blacklisted, %zu distinct sites%s%s\n",
			(unsigned long long)ab->total_aborts, (unsigned long long)ab->blacklisted, ab->n,
			o->aborts_csv ? ", written to " : "", o->aborts_csv ? o->aborts_csv : "");
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
		"nupp-bpf: bpf sampler %llu runs, %.0f ns/run; trace %llu runs, %.0f ns/run; "
		"prototype events %llu runs, %.0f ns/run\n",
		(unsigned long long)cnt, cnt ? (double)ns / cnt : 0.0, (unsigned long long)tcnt,
		tcnt ? (double)tns / tcnt : 0.0, (unsigned long long)pcnt, pcnt ? (double)pns / pcnt : 0.0);
}

/* Finds the ELF object with our probes for the target; 0 or 1 after the error. */
static int record_binary(const struct record_opts *o, char *bin, size_t size)
{
	struct nupp_vm vm;
	int n;

	if (o->cmd) {
		int err = nupp_vm_binary_for_exe(o->cmd[0], bin, size);

		if (err == -ENOEXEC) {
			/* Not LuaJIT: run it all the same (its status is passed on); nothing to sample. */
			if (!o->quiet)
				fprintf(stderr, "nupp-bpf: warning: %s; running it unprofiled\n", nupp_errmsg());
			bin[0] = 0;
			return 0;
		}
		if (err) {
			cli_error("cannot profile %s: %s", o->cmd[0], nupp_errmsg());
			return 1;
		}
		return 0;
	}
	n = nupp_vm_find(o->pid, &vm, 1);
	if (n < 0) {
		cli_error("cannot profile PID %d: %s", (int)o->pid, nupp_errmsg());
		return 1;
	}
	if (n == 0) {
		cli_error("cannot profile PID %d: it runs our LuaJIT but has no Lua VM open (yet)", (int)o->pid);
		return 1;
	}
	snprintf(bin, size, "%s", vm.path);
	return 0;
}

int cmd_record(int argc, char **argv)
{
	struct record_opts o = { .freq = 99, .depth = NUPP_SMP_DEFAULT_DEPTH, .aborts = true };
	struct nupp_sample_set raw = { 0 }, set = { 0 };
	struct nupp_abort_set ab = { 0 };
	struct nupp_sampler *smp = NULL;
	struct nupp_trace *tr = NULL;
	char bin[PATH_MAX], *cmdline = NULL, *target = NULL;
	int ret = 1, err = 0, gate = -1, pidfd = -1, status = 0;
	bool child_done = false, killed_by_us = false;
	double t0, next_drain;
	pid_t pid;

	ret = record_parse(argc, argv, &o);
	if (ret)
		return ret < 0 ? 0 : ret;
	ret = 1;
	if (record_check_privileges())
		return 1;
	for (err = 0; err < o.noutputs; err++)
		if (record_check_output(o.outputs[err]))
			return 1;
	err = 0;
	if (record_check_output(o.aborts_csv))
		return 1;
	if (o.pid && kill(o.pid, 0) && errno == ESRCH) {
		cli_error("cannot profile PID %d: no such process", (int)o.pid);
		return 1;
	}
	if (record_binary(&o, bin, sizeof(bin)))
		return 1;
	/* Before the BPF programs load (their verification takes a while on a busy machine):
	 * Ctrl-C / SIGTERM meanwhile still stops the recording and writes the profile. */
	record_signals();

	{
		struct nupp_sampler_opts so = { .sz = sizeof(so), .freq_hz = o.freq, .depth = o.depth,
						.lines = o.lines, .max_stacks = o.max_stacks, .lua_only = o.lua_only };

		smp = nupp_sampler_open(&so, &err);
		if (!smp) {
			cli_error("cannot start the sampler: %s", nupp_errmsg());
			goto out;
		}
	}
	if (o.aborts) {
		struct nupp_trace_opts to = { .sz = sizeof(to), .include_benign = o.include_benign };

		tr = nupp_trace_open(&to, &err);
		if (!tr) {
			cli_error("cannot start the trace-abort channel: %s", nupp_errmsg());
			goto out;
		}
	}
	if (o.cmd) {
		pid = record_spawn(o.cmd, &gate);
		if (pid < 0) {
			cli_error("cannot start %s: %s", o.cmd[0], strerror(errno));
			goto out;
		}
		err = bin[0] ? nupp_sampler_watch(smp, bin, pid) : 0;
		if (!err && tr && bin[0])
			err = nupp_trace_attach(tr, bin, pid);
		/* The child has not exec'ed yet: no VM in its maps (-ENOENT) is expected, and
		 * luajit:vm_open (watched above) reports the VM as it opens. */
		if (!err && bin[0] && (err = nupp_sampler_add_pid(smp, pid)) == -ENOENT)
			err = 0; /* not LuaJIT: run unprofiled (not even its host code) */
		if (err) {
			cli_error("cannot attach to %s: %s", bin, nupp_errmsg());
			close(gate); /* the child exits without running */
			waitpid(pid, NULL, 0);
			goto out;
		}
		target = record_join(argc - optind, argv + optind);
	} else {
		pid = o.pid;
		err = nupp_sampler_add_pid(smp, pid);
		if (!err && tr)
			err = nupp_trace_attach(tr, bin, pid);
		if (err) {
			cli_error("cannot attach to PID %d: %s", (int)pid, nupp_errmsg());
			goto out;
		}
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	}
	cmdline = record_join(argc, argv);
	if (!o.quiet)
		fprintf(stderr, "nupp-bpf: recording %s %d at %d Hz%s; Ctrl-C to stop\n",
			o.cmd ? "command, PID" : "PID", (int)pid, o.freq, tr ? " with trace aborts" : "");
	t0 = record_now();
	next_drain = t0 + RECORD_DRAIN_MS / 1000.0;
	if (gate >= 0) {
		if (write(gate, "g", 1) != 1) {
		}
		close(gate);
		gate = -1;
	}
	while (!record_stop_sig) {
		double now;

		err = nupp_sampler_poll(smp, pidfd >= 0 ? 0 : 50);
		if (err < 0 && err != -EINTR) {
			cli_error("sampling failed: %s", nupp_errmsg());
			break;
		}
		if (pidfd >= 0) {
			struct pollfd p = { .fd = pidfd, .events = POLLIN };

			if (poll(&p, 1, 50) > 0)
				break; /* the target exited */
		} else if (o.pid && kill(o.pid, 0) && errno == ESRCH) {
			break;
		}
		if (o.cmd && waitpid(pid, &status, WNOHANG) == pid) {
			child_done = true;
			break;
		}
		now = record_now();
		if (o.duration > 0 && now - t0 >= o.duration)
			break;
		if (now >= next_drain) {
			/* Names are read from the live target: keep them resolved as it runs. */
			nupp_sampler_drain(smp, &raw);
			next_drain = now + RECORD_DRAIN_MS / 1000.0;
		}
	}
	if (record_stop_sig && o.cmd && !child_done)
		kill(pid, record_stop_sig == SIGHUP ? SIGHUP : record_stop_sig);
	err = nupp_sampler_drain(smp, &raw);
	if (err)
		cli_error("reading the samples failed: %s", nupp_errmsg());
	if (tr && nupp_trace_drain(tr, &ab))
		cli_error("reading the trace aborts failed: %s", nupp_errmsg());
	if (o.cmd && !child_done) {
		if (!record_stop_sig) {
			kill(pid, SIGTERM); /* the duration ended: stop the command */
			killed_by_us = true;
		}
		waitpid(pid, &status, 0);
		child_done = true;
	}
	nupp_sample_set_sort(&raw);
	if (nupp_sample_set_filter(&raw, o.zone, o.root, &set)) {
		cli_error("out of memory");
		goto out;
	}
	set.host_samples = raw.host_samples;
	set.cut_samples = raw.cut_samples;
	nupp_abort_set_sort(&ab);
	{
		struct nupp_profile_meta m = {
			.command = cmdline, .target = target, .pids = &pid, .npids = 1, .frequency_hz = o.freq,
			.duration_sec = record_now() - t0, .backend = "bpf", .luajit = nupp_luajit_build(),
			.depth = o.depth, .aborts = o.aborts, .include_benign = o.include_benign,
			.zone_filter = o.zone, .root = o.root,
		};

		ret = record_write(&o, &m, &set, &ab);
		if (!ret && !o.quiet)
			record_summary(&o, &set, &ab, m.duration_sec);
		if (cli_verbose)
			record_stats(smp, tr);
	}
	if (!ret && o.cmd && child_done && !killed_by_us)
		ret = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
out:
	if (pidfd >= 0)
		close(pidfd);
	nupp_trace_close(tr);
	nupp_sampler_close(smp);
	nupp_sample_set_free(&raw);
	nupp_sample_set_free(&set);
	nupp_abort_set_free(&ab);
	free(cmdline);
	free(target);
	return ret;
}
