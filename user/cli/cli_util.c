/* The helpers every subcommand shares: the one error printer, the -v level and the option
 * parsers. Calls only into libnupp, never into a subcommand or main.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "nupp/profile.h"
#include "nupp/sampler_abi.h"
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

/* Parses -p PID into *pid; false after printing the error. */
bool cli_pid_opt(const char *s, pid_t *pid)
{
	long v;

	if (!cli_int(s, 1, 4194304, &v)) {
		cli_error("invalid PID '%s': expected a positive integer", s);
		return false;
	}
	*pid = (pid_t)v;
	return true;
}

/* Parses -F HZ into *hz; false after printing the error. */
bool cli_freq_opt(const char *s, int *hz)
{
	long v;

	if (!cli_int(s, 1, 100000, &v)) {
		cli_error("invalid frequency '%s': expected 1..100000 Hz", s);
		return false;
	}
	*hz = (int)v;
	return true;
}

/* Parses --depth N into *depth (1..NUPP_SMP_MAX_DEPTH); false after printing the error. */
bool cli_depth_opt(const char *s, int *depth)
{
	long v;

	if (!cli_int(s, 1, NUPP_SMP_MAX_DEPTH, &v)) {
		cli_error("invalid depth '%s': expected 1..%d frames", s, NUPP_SMP_MAX_DEPTH);
		return false;
	}
	*depth = (int)v;
	return true;
}
