/* nupp-bpf doctor: says, one line per check, whether record can run here (and on a
 * PID), and what to do about each piece that fails. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/doctor.h"
#include "nupp/nupp.h"
#include "cli.h"

/* Prints doctor's usage. */
static void doctor_usage(FILE *f)
{
	fprintf(f, "USAGE\n"
		   "  nupp-bpf doctor [-p PID]\n\n"
		   "Tries each piece `record` needs, the way record uses it, and prints one line per check\n"
		   "with what was found and, when it fails, what to do: root or capabilities (CAP_BPF,\n"
		   "CAP_PERFMON, CAP_SYS_PTRACE, and CAP_SYS_ADMIN where the kernel wants it for uprobes:\n"
		   "found by attaching a uprobe to nupp-bpf itself), kernel BTF, BPF helpers, CPU-clock perf\n"
		   "events, uprobes, bpffs and tracefs, the locked-memory limit, and record's own programs.\n"
		   "With -p, also the target: LuaJIT or not, our build (layout and probes), GC64, its Lua\n"
		   "VMs, and whether its binary was replaced since it started.\n\n"
		   "Exit status: 0 when record would work, 1 when it would fail (the last line says why),\n"
		   "2 on a usage error.\n\n"
		   "OPTIONS\n"
		   "  -p, --pid PID   also check this process\n"
		   "      --quick     do not load record's own programs (faster; less certain)\n\n"
		   "EXAMPLES\n"
		   "  nupp-bpf doctor\n"
		   "  sudo nupp-bpf doctor -p $(pgrep -n luajit)\n");
}

int cmd_doctor(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "quick", no_argument, NULL, 'Q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct nupp_doctor_opts o = { .sz = sizeof(o) };
	struct nupp_check checks[NUPP_CHECK__MAX];
	const struct nupp_check *b;
	char *end;
	int c, n, i;

	while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			errno = 0;
			o.pid = (pid_t)strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || o.pid <= 0) {
				cli_error("invalid PID '%s': expected a positive integer", optarg);
				return 2;
			}
			break;
		case 'Q':
			o.quick = true;
			break;
		case 'h':
			doctor_usage(stdout);
			return 0;
		default:
			doctor_usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		cli_error("unexpected argument '%s'", argv[optind]);
		doctor_usage(stderr);
		return 2;
	}
	n = nupp_doctor_run(&o, checks, NUPP_CHECK__MAX);
	if (n < 0) {
		cli_error("doctor failed: %s", nupp_errmsg());
		return 2;
	}
	for (i = 0; i < n; i++) {
		const struct nupp_check *k = &checks[i];

		printf("%-4s  %-17s %s%s%s\n", nupp_check_status_name(k->status), k->name, k->detail,
		       k->remedy[0] ? "; fix: " : "", k->remedy);
	}
	b = nupp_doctor_blocker(checks, n);
	if (b) {
		printf("doctor: record%s would fail: %s: %s\n", o.pid ? " -p" : "", b->name, b->detail);
		return 1;
	}
	printf("doctor: record%s would work\n", o.pid ? " -p" : "");
	return 0;
}
