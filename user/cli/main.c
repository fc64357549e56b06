/* nupp-bpf: main(), the command table and the global options (-v, --version). The option
 * parsers and the error printer the subcommands share are cli_util.c. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "cli.h"

/* libnupp/libbpf print callback, filtered by -v. */
static int cli_print(enum nupp_log_level level, const char *fmt, va_list ap)
{
	if ((int)level > cli_verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* libbpf's print callback: only with -vv. */
static int cli_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (cli_verbose < 2 && level != LIBBPF_WARN)
		return 0;
	if (cli_verbose < 1)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* Prints nupp-bpf's version, the libbpf it runs on and the LuaJIT build it targets. */
static int cmd_version(int argc, char **argv)
{
	printf("nupp-bpf %s\n", nupp_version());
	printf("libbpf %s\n", libbpf_version_string());
	printf("luajit %s\n", nupp_luajit_build());
	return 0;
}

static const struct cli_cmd cli_cmds[] = {
	{ "version", cmd_version, "print versions (nupp-bpf, libbpf, LuaJIT build)" },
	CLI_CMDS
};

/* Prints the top-level usage. */
static void cli_usage(FILE *f)
{
	size_t i;

	fprintf(f, "USAGE\n  nupp-bpf [-v] COMMAND [ARGS...]\n  nupp-bpf --version | --help\n\nCOMMANDS\n");
	for (i = 0; i < sizeof(cli_cmds) / sizeof(cli_cmds[0]); i++)
		fprintf(f, "  %-10s %s\n", cli_cmds[i].name, cli_cmds[i].help);
	fprintf(f, "\nRun 'nupp-bpf COMMAND --help' for a command's options and examples.\n");
}

int main(int argc, char **argv)
{
	size_t i;
	int argi = 1;

	if (argc == 2 && strcmp(argv[0], "nupp-bpf-detach") == 0)
		cli_closer(atoi(argv[1]));
	nupp_set_print(cli_print);
	libbpf_set_print(cli_libbpf_print);
	while (argi < argc && argv[argi][0] == '-') {
		const char *a = argv[argi];

		if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0)
			return cmd_version(0, NULL);
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			cli_usage(stdout);
			return 0;
		}
		if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0)
			cli_verbose++;
		else if (strcmp(a, "-vv") == 0)
			cli_verbose += 2;
		else {
			cli_error("unknown option '%s'", a);
			cli_usage(stderr);
			return 2;
		}
		argi++;
	}
	if (argi >= argc) {
		cli_usage(stderr);
		return 2;
	}
	for (i = 0; i < sizeof(cli_cmds) / sizeof(cli_cmds[0]); i++)
		if (strcmp(argv[argi], cli_cmds[i].name) == 0) {
			optind = 1;
			return cli_cmds[i].fn(argc - argi, argv + argi);
		}
	cli_error("unknown command '%s'", argv[argi]);
	cli_usage(stderr);
	return 2;
}
