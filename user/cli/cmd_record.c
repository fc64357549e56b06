/* nupp-bpf record: samples a LuaJIT process (or a command it starts) and counts its
 * JIT trace aborts, then writes the profile when the duration ends, the target exits,
 * or on Ctrl-C / SIGTERM. This file owns the options and the top-level flow (checks,
 * session, attach, the recording loop, the end); its parts are the record_*.c files
 * (user/cli/record.h), and it calls no other subcommand. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "nupp/sampler.h"
#include "nupp/sampler_abi.h"
#include "nupp/trace.h"
#include "cli.h"
#include "record.h"

#define RECORD_DRAIN_MS 500 /* count and name what was sampled, at this period */
#define RECORD_WAIT_MS 1000 /* longest wait for events (the session wakes for its drains) */
#define RECORD_STEP_MS 50   /* the wait without a wake fd, to see the target's exit */

static bool record_started; /* recording began: a later failure is not doctor's business */

/* -- Options --------------------------------------------------------------- */

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
		"      --subprocesses     also profile every descendant that runs our LuaJIT: those\n"
		"                         running at the attach (nginx's workers) and those\n"
		"                         started later\n"
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
			if (!cli_pid_opt(optarg, &o->pid))
				return 2;
			break;
		case 'F': {
			int hz;

			if (!cli_freq_opt(optarg, &hz))
				return 2;
			if (freq_set && o->freq != hz) {
				cli_error("-F and --interval-ms disagree: give one of them");
				return 2;
			}
			o->freq = hz;
			freq_set = true;
			break;
		}
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
			if (!cli_depth_opt(optarg, &o->depth))
				return 2;
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

/* -- The run --------------------------------------------------------------- */

/* Reports what the profile needs and this process lacks (capabilities, BTF); 0 if none. */
static int record_check_privileges(void)
{
	char why[512];

	if (nupp_available(-1, why, sizeof(why)) == 0)
		return 0;
	cli_error("cannot profile: %s", why);
	return 1;
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
		target = cli_join(argc - optind, argv + optind);
	}
	cmdline = cli_join(argc, argv);
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
		pid = cli_spawn(o.cmd, &gate, to_stdout);
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
	t0 = cli_now();
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
		double now = cli_now();
		int wait_ms = wake >= 0 && pidfd >= 0 ? RECORD_WAIT_MS : RECORD_STEP_MS;

		if (o.duration > 0)
			wait_ms = cli_wait_until(wait_ms, t0 + o.duration, now);
		if (status_line)
			wait_ms = cli_wait_until(wait_ms, next_status, now);
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
		if (o.duration > 0 && cli_now() - t0 >= o.duration)
			break;
		if (status_line && cli_now() >= next_status) {
			record_status(ses, cli_now() - t0, false);
			next_status = cli_now() + 1;
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
	cli_close_later();
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
		record_symbolize_causes(nupp_session_sampler(ses));
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
		cli_close_later();
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
