/* nupp-bpf report: re-renders a saved profile (the nupp JSON profile, or collapsed
 * stacks) in any format: flame graph, speedscope, pprof, top table, JSON, collapsed. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "cli.h"

#define REPORT_MAX_OUTPUTS 16

struct report_opts {
	const char *input;
	const char *outputs[REPORT_MAX_OUTPUTS];
	int noutputs;
	enum nupp_format format; /* -f: forces every output's format */
	const char *zone, *root;
	struct nupp_report_opts ro;
	bool top_set;
	bool why, json; /* --why: explain hot interpreted code (--json: as JSON) */
};

/* Prints report's usage. */
static void report_usage(FILE *f)
{
	fprintf(f,
		"USAGE\n"
		"  nupp-bpf report [options] IN.json [-o OUT.ext]...\n\n"
		"Renders a saved profile (a nupp profile .json, or collapsed stacks; - reads stdin)\n"
		"in any format. Without -o it prints the top-functions table (or the -f format) on\n"
		"stdout. Each output is written to a temporary file renamed into place.\n\n"
		"OPTIONS\n"
		"  -o, --output FILE      by extension: .svg flame graph, .speedscope.json, .pb.gz\n"
		"                         pprof, .json nupp profile, .folded or .txt collapsed\n"
		"                         stacks, .csv abort table, - stdout; repeatable\n"
		"  -f, --format FMT       svg, speedscope, pprof, json, collapsed, top or csv: the\n"
		"                         format of every output (e.g. -f top -o table.txt)\n"
		"      --zone PREFIX      keep samples whose zone path starts with PREFIX\n"
		"      --root MODULE      cut each stack below the outermost frame of MODULE\n"
		"      --top N            print the N hottest functions (default 20) on stdout\n"
		"      --lines            the table per source line (profiles recorded with --lines)\n"
		"      --inverted         the flame graph as an icicle graph (roots at the top)\n"
		"      --title TEXT       the flame graph's title (default: the profiled command)\n"
		"      --min-width PX     merge flame-graph frames narrower than PX pixels (0.5)\n"
		"      --why              print the hottest code that ran interpreted and the trace\n"
		"                         aborts that explain it (--json: as JSON)\n\n"
		"EXIT STATUS\n"
		"  0 written; 1 an output could not be written (the others are); 2 bad usage or an\n"
		"  input that is not a profile (the message names the file and the position).\n\n"
		"EXAMPLES\n"
		"  nupp-bpf report app.json                       # the top-functions table\n"
		"  nupp-bpf report app.json -o app.svg -o app.speedscope.json -o app.pb.gz\n"
		"  nupp-bpf report app.json --root app.lua --inverted -o app-icicle.svg\n"
		"  nupp-bpf report app.json -f collapsed | grep -c ';'\n");
}

/* Parses report's options; 0, or the exit status (-1 = 0 after --help). */
static int report_parse(int argc, char **argv, struct report_opts *o)
{
	enum { O_ZONE = 256, O_ROOT, O_TOP, O_LINES, O_INVERTED, O_TITLE, O_MINW, O_WHY, O_JSON };
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },  { "format", required_argument, NULL, 'f' },
		{ "zone", required_argument, NULL, O_ZONE }, { "root", required_argument, NULL, O_ROOT },
		{ "top", required_argument, NULL, O_TOP },   { "lines", no_argument, NULL, O_LINES },
		{ "inverted", no_argument, NULL, O_INVERTED }, { "title", required_argument, NULL, O_TITLE },
		{ "min-width", required_argument, NULL, O_MINW }, { "help", no_argument, NULL, 'h' },
		{ "why", no_argument, NULL, O_WHY }, { "json", no_argument, NULL, O_JSON },
		{ 0 },
	};
	bool has_svg = false, has_top = false;
	int c, i;

	while ((c = getopt_long(argc, argv, "o:f:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (!cli_output_opt(optarg, o->outputs, &o->noutputs, REPORT_MAX_OUTPUTS))
				return 2;
			break;
		case 'f': {
			int f;

			if (!cli_format_opt(optarg, true, &f))
				return 2;
			o->format = (enum nupp_format)f;
			break;
		}
		case O_ZONE:
			o->zone = optarg;
			break;
		case O_ROOT:
			o->root = optarg;
			break;
		case O_TOP:
			if (!cli_top_opt(optarg, &o->ro.top))
				return 2;
			o->top_set = true;
			break;
		case O_LINES:
			o->ro.lines = true;
			break;
		case O_INVERTED:
			o->ro.inverted = true;
			break;
		case O_TITLE:
			o->ro.title = optarg;
			break;
		case O_MINW: {
			char *end;

			o->ro.min_width = strtod(optarg, &end);
			if (end == optarg || *end || !(o->ro.min_width > 0) || o->ro.min_width > 1000) {
				cli_error("invalid --min-width '%s': expected pixels > 0", optarg);
				return 2;
			}
			break;
		}
		case O_WHY:
			o->why = true;
			break;
		case O_JSON:
			o->json = true;
			break;
		case 'h':
			report_usage(stdout);
			return -1;
		default:
			report_usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		cli_error(optind >= argc ? "no input: give the profile to render (IN.json)"
					 : "one input only: give the others' outputs with -o");
		report_usage(stderr);
		return 2;
	}
	o->input = argv[optind];
	for (i = 0; i < o->noutputs; i++) {
		enum nupp_format fmt = o->format ? o->format : nupp_format_by_path(o->outputs[i]);

		if (!fmt) {
			cli_error("unknown output format for '%s': use .svg, .speedscope.json, .pb.gz, .json, .folded "
				  "or .txt, .csv, or give the format with -f",
				  o->outputs[i]);
			return 2;
		}
		has_svg |= fmt == NUPP_FMT_SVG;
		has_top |= fmt == NUPP_FMT_TOP;
	}
	if (o->json && !o->why) {
		cli_error("--json applies to --why");
		return 2;
	}
	if (!o->noutputs && !o->top_set && o->format == NUPP_FMT_NONE && !o->why)
		o->top_set = true; /* the default: the table on stdout */
	if (!o->noutputs && o->format) {
		has_svg |= o->format == NUPP_FMT_SVG;
		has_top |= o->format == NUPP_FMT_TOP;
	}
	if (o->ro.inverted && !has_svg) {
		cli_error("--inverted applies to the flame graph: add -o FILE.svg");
		return 2;
	}
	if (o->ro.lines && !has_top && !o->top_set) {
		cli_error("--lines applies to the top-functions table: add --top N or -f top");
		return 2;
	}
	return 0;
}

/* Applies --zone and --root: the profile's rows replaced by the filtered ones. */
static int report_filter(struct nupp_profile *p, const struct report_opts *o)
{
	struct nupp_sample_set out = { 0 };

	if (!o->zone && !o->root)
		return 0;
	if (nupp_sample_set_filter(&p->samples, o->zone, o->root, &out)) {
		nupp_sample_set_free(&out);
		cli_error("out of memory");
		return 1;
	}
	nupp_sample_set_free(&p->samples);
	p->samples = out;
	if (o->zone)
		p->meta.zone_filter = o->zone;
	if (o->root)
		p->meta.root = o->root;
	return 0;
}

int cmd_report(int argc, char **argv)
{
	struct report_opts o = { .ro = { .sz = sizeof(struct nupp_report_opts) } };
	struct nupp_profile p = { 0 };
	int ret, i, err, failed = 0;

	ret = report_parse(argc, argv, &o);
	if (ret)
		return ret < 0 ? 0 : ret;
	signal(SIGPIPE, SIG_IGN); /* a closed pipe is an error of that output, not a death */
	for (i = 0; i < o.noutputs; i++)
		if (nupp_output_check(o.outputs[i])) {
			cli_error("%s", nupp_errmsg());
			return 1;
		}
	err = nupp_profile_read_file(o.input, &p);
	if (err) {
		cli_error("%s", nupp_errmsg());
		return err == -ENOMEM ? 1 : 2;
	}
	if (o.ro.lines && !p.meta.lines) {
		cli_error("%s names functions, not source lines: record it with --lines for a table per line", o.input);
		nupp_profile_free(&p);
		return 2;
	}
	if (report_filter(&p, &o)) {
		nupp_profile_free(&p);
		return 1;
	}
	for (i = 0; i < o.noutputs; i++)
		if (nupp_profile_write_file(&p, o.outputs[i], o.format, &o.ro)) {
			cli_error("%s", nupp_errmsg());
			failed++;
		}
	if (!o.noutputs && o.format && o.format != NUPP_FMT_TOP)
		if (nupp_profile_write_file(&p, "-", o.format, &o.ro)) {
			cli_error("%s", nupp_errmsg());
			failed++;
		}
	if (o.why)
		failed += cli_why(&p, o.json, stdout);
	if (o.top_set || (!o.noutputs && o.format == NUPP_FMT_TOP))
		if (nupp_profile_write_file(&p, "-", NUPP_FMT_TOP, &o.ro)) {
			cli_error("%s", nupp_errmsg());
			failed++;
		}
	nupp_profile_free(&p);
	return failed ? 1 : 0;
}
