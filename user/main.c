/* nupp-bpf: the command table, global options and the one error printer. */
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

int cli_verbose;

/* Prints "Error: <message>" on stderr; the one error printer of the CLI. */
void cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("Error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Parses a decimal integer option within [lo, hi]; false on error. */
bool cli_int(const char *s, long lo, long hi, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	return !errno && end != s && !*end && *out >= lo && *out <= hi;
}

/* Adds the path of an -o option to outputs (n of at most max); false after printing the error. */
bool cli_output_opt(const char *path, const char **outputs, int *n, int max)
{
	if (*n == max) {
		cli_error("at most %d -o outputs", max);
		return false;
	}
	outputs[(*n)++] = path;
	return true;
}

/* Parses -f FMT into *fmt; csv (the abort table) only where allow_csv; false after printing the error. */
bool cli_format_opt(const char *name, bool allow_csv, int *fmt)
{
	enum nupp_format f = nupp_format_by_name(name);

	if (!f || (f == NUPP_FMT_CSV && !allow_csv)) {
		if (allow_csv)
			cli_error("unknown format '%s': use svg, speedscope, pprof, json, collapsed, top or csv", name);
		else
			cli_error("unknown format '%s': use svg, speedscope, pprof, json, collapsed or top "
				  "(the abort table: --aborts FILE.csv)", name);
		return false;
	}
	*fmt = (int)f;
	return true;
}

/* Parses --top N into *top; false after printing the error. */
bool cli_top_opt(const char *s, int *top)
{
	long v;

	if (!cli_int(s, 1, 1000000, &v)) {
		cli_error("invalid --top '%s': expected a number of rows >= 1", s);
		return false;
	}
	*top = (int)v;
	return true;
}

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
		record_closer(atoi(argv[1]));
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
