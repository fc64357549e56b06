/* nupp-bpf vms: lists the LuaJIT VMs of a running process and their layout. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/nupp.h"
#include "cli.h"

/* Prints vms' usage. */
static void vms_usage(FILE *f)
{
	fprintf(f, "USAGE\n  nupp-bpf vms -p PID\n\n"
		   "Finds the LuaJIT VMs (global_State) of a process that runs our LuaJIT build, without\n"
		   "any probe having fired, and prints their addresses and the build's layout.\n\n"
		   "EXAMPLES\n  sudo nupp-bpf vms -p $(pgrep -n luajit)\n");
}

/* Parses a PID argument; 0 on error. */
static pid_t vms_parse_pid(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v <= 0 || v > 4194304)
		return 0;
	return (pid_t)v;
}

int cmd_vms(int argc, char **argv)
{
	static const struct option opts[] = { { "pid", required_argument, NULL, 'p' },
					      { "help", no_argument, NULL, 'h' },
					      { 0 } };
	struct nupp_vm vms[NUPP_LJ_VMLIST_MAX];
	pid_t pid = 0;
	int c, n, i;

	while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			pid = vms_parse_pid(optarg);
			if (!pid) {
				cli_error("invalid PID '%s': expected a positive integer", optarg);
				return 2;
			}
			break;
		case 'h':
			vms_usage(stdout);
			return 0;
		default:
			vms_usage(stderr);
			return 2;
		}
	}
	if (!pid || optind != argc) {
		cli_error("vms needs exactly one -p PID");
		vms_usage(stderr);
		return 2;
	}
	n = nupp_vm_find(pid, vms, NUPP_LJ_VMLIST_MAX);
	if (n < 0) {
		cli_error("cannot inspect PID %d: %s", (int)pid, nupp_errmsg());
		return 1;
	}
	if (n == 0) {
		cli_error("PID %d runs our LuaJIT but has no VM open yet", (int)pid);
		return 1;
	}
	for (i = 0; i < n; i++)
		printf("pid=%d g=0x%llx L=0x%llx layout=v%u branch=%s object=%s vm_code=0x%llx-0x%llx\n",
		       (int)vms[i].pid, (unsigned long long)vms[i].g, (unsigned long long)vms[i].L,
		       vms[i].layout.version, nupp_lj_branch_name(vms[i].layout.branch),
		       vms[i].path, (unsigned long long)vms[i].layout.vm_begin,
		       (unsigned long long)vms[i].layout.vm_end);
	return 0;
}
