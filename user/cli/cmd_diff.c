/* nupp-bpf diff: compares BASE and NEW profiles (one or several runs each) and exits 1
 * on a regression, so a CI job can gate on it. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/diff.h"
#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "cli.h"

#define DIFF_MAX_FILES 64

/* Prints diff's usage. */
static void diff_usage(FILE *f)
{
	fprintf(f,
		"USAGE\n"
		"  nupp-bpf diff [options] BASE.json NEW.json\n"
		"  nupp-bpf diff [options] --base B1.json [--base B2.json ...] --new N1.json [--new N2.json ...]\n\n"
		"Compares the share of the samples each function (stack, line) took in BASE and in NEW,\n"
		"and how much of it ran interpreted. A change is flagged only when it is larger than\n"
		"--threshold percentage points AND larger than --sigmas standard errors of the change\n"
		"(sampling noise, from both sides' sample counts and, with several runs a side, from\n"
		"the spread of the runs), and only for rows with at least --min-samples samples.\n"
		"Several files a side are merged. A regression is a row whose self share grew, a row\n"
		"more of which ran interpreted (\"now interpreted\": it ran mostly compiled before), or\n"
		"a new blacklist trace-abort row.\n\n"
		"OPTIONS\n"
		"      --base FILE        a BASE profile (repeatable)\n"
		"      --new FILE         a NEW profile (repeatable)\n"
		"      --threshold PP     smallest change flagged, in percentage points (default 1.0)\n"
		"      --sigmas N         standard errors a change must exceed (default 3)\n"
		"      --min-samples N    samples a row needs on one side to be flagged (default 20)\n"
		"      --stacks           compare whole stacks instead of functions\n"
		"      --lines            compare source lines (profiles recorded with record --lines)\n"
		"      --allow-aborts     new blacklist abort rows are not a regression\n"
		"      --top N            unflagged changes shown (default 20)\n"
		"      --json             print the result as JSON (every row) instead of the table\n"
		"  -f, --format FMT       text (default), json, or bmf (Bencher Metric Format of NEW)\n"
		"  -o, --output FILE      also write FILE.svg (differential flame graph: widths from NEW,\n"
		"                         red grew, blue shrank) or FILE.json (the JSON result); repeatable\n"
		"  -q, --quiet            print nothing: the exit status says it\n\n"
		"EXIT STATUS\n"
		"  0 no regression, 1 regression, 2 error (unreadable input, profiles that cannot be\n"
		"  compared: the message says what differs)\n\n"
		"EXAMPLES\n"
		"  nupp-bpf diff base.json new.json\n"
		"  nupp-bpf diff --base b1.json --base b2.json --new n1.json --new n2.json -o diff.svg\n"
		"  nupp-bpf diff --format bmf base.json new.json > bmf.json   # for bencher run --file\n");
}

struct diff_cli {
	const char *base[DIFF_MAX_FILES], *new_[DIFF_MAX_FILES], *outputs[8];
	int nbase, nnew, noutputs, top;
	const char *format;
	bool quiet;
	struct nupp_diff_opts o;
};

/* Parses a number option within [lo, hi]; false on error. */
static bool diff_num(const char *s, double lo, double hi, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return !errno && end != s && !*end && isfinite(*out) && *out >= lo && *out <= hi;
}

/* Parses diff's options; 0, or the exit status for a usage error / --help (-1 = 0). */
static int diff_parse(int argc, char **argv, struct diff_cli *c)
{
	enum { O_BASE = 256, O_NEW, O_THRESHOLD, O_SIGMAS, O_MIN, O_STACKS, O_LINES, O_ALLOW, O_TOP, O_JSON };
	static const struct option opts[] = {
		{ "base", required_argument, NULL, O_BASE },
		{ "new", required_argument, NULL, O_NEW },
		{ "threshold", required_argument, NULL, O_THRESHOLD },
		{ "sigmas", required_argument, NULL, O_SIGMAS },
		{ "min-samples", required_argument, NULL, O_MIN },
		{ "stacks", no_argument, NULL, O_STACKS },
		{ "lines", no_argument, NULL, O_LINES },
		{ "allow-aborts", no_argument, NULL, O_ALLOW },
		{ "top", required_argument, NULL, O_TOP },
		{ "json", no_argument, NULL, O_JSON },
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	double v;
	int ch;

	while ((ch = getopt_long(argc, argv, "f:o:qh", opts, NULL)) != -1) {
		switch (ch) {
		case O_BASE:
		case O_NEW:
			if ((ch == O_BASE ? c->nbase : c->nnew) == DIFF_MAX_FILES) {
				cli_error("at most %d files a side", DIFF_MAX_FILES);
				return 2;
			}
			if (ch == O_BASE)
				c->base[c->nbase++] = optarg;
			else
				c->new_[c->nnew++] = optarg;
			break;
		case O_THRESHOLD:
			if (!diff_num(optarg, 0, 100, &v)) {
				cli_error("invalid --threshold '%s': expected 0..100 percentage points", optarg);
				return 2;
			}
			c->o.threshold = v > 0 ? v : -1; /* the library's "no threshold" */
			break;
		case O_SIGMAS:
			if (!diff_num(optarg, 0.01, 100, &v)) {
				cli_error("invalid --sigmas '%s': expected a number of standard errors > 0", optarg);
				return 2;
			}
			c->o.sigmas = v;
			break;
		case O_MIN:
			if (!diff_num(optarg, 1, 1e15, &v) || v != floor(v)) {
				cli_error("invalid --min-samples '%s': expected a positive integer", optarg);
				return 2;
			}
			c->o.min_samples = (__u64)v;
			break;
		case O_STACKS:
		case O_LINES:
			if (c->o.unit != NUPP_DIFF_FUNCTIONS) {
				cli_error("give --stacks or --lines, not both");
				return 2;
			}
			c->o.unit = ch == O_STACKS ? NUPP_DIFF_STACKS : NUPP_DIFF_LINES;
			break;
		case O_ALLOW:
			c->o.allow_aborts = true;
			break;
		case O_TOP:
			if (!diff_num(optarg, 1, 1e6, &v) || v != floor(v)) {
				cli_error("invalid --top '%s': expected a positive integer", optarg);
				return 2;
			}
			c->top = (int)v;
			break;
		case O_JSON:
			c->format = "json";
			break;
		case 'f':
			if (strcmp(optarg, "text") && strcmp(optarg, "json") && strcmp(optarg, "bmf")) {
				cli_error("unknown --format '%s': use text, json or bmf", optarg);
				return 2;
			}
			c->format = optarg;
			break;
		case 'o': {
			const char *dot = strrchr(optarg, '.');

			if (c->noutputs == 8) {
				cli_error("at most 8 -o outputs");
				return 2;
			}
			if (!dot || (strcmp(dot, ".svg") && strcmp(dot, ".json"))) {
				cli_error("unknown output format for '%s': use FILE.svg (differential flame graph) or "
					  "FILE.json (the result as JSON)",
					  optarg);
				return 2;
			}
			c->outputs[c->noutputs++] = optarg;
			break;
		}
		case 'q':
			c->quiet = true;
			break;
		case 'h':
			diff_usage(stdout);
			return -1;
		default:
			diff_usage(stderr);
			return 2;
		}
	}
	if (!c->nbase && !c->nnew && argc - optind == 2) {
		c->base[c->nbase++] = argv[optind];
		c->new_[c->nnew++] = argv[optind + 1];
	} else if (optind < argc || !c->nbase || !c->nnew) {
		cli_error(optind < argc && (c->nbase || c->nnew)
				  ? "give the files either as BASE NEW or with --base and --new, not both"
				  : "diff needs a BASE and a NEW profile");
		diff_usage(stderr);
		return 2;
	}
	return 0;
}

/* Writes the result as JSON (nupp_output_write's callback). */
static int diff_write_json_cb(FILE *f, void *ctx)
{
	return nupp_diff_write_json(ctx, f);
}

/* What the flame graph writer needs: NEW merged, BASE merged, a title. */
struct diff_svg {
	const struct nupp_profile *new_, *base;
	char *title;
};

/* Writes the differential flame graph (nupp_output_write's callback). */
static int diff_write_svg_cb(FILE *f, void *ctx)
{
	const struct diff_svg *s = ctx;
	struct nupp_report_opts o = { .sz = sizeof(o), .diff_base = s->base, .title = s->title };

	return nupp_write_svg(s->new_, &o, f);
}

/* Merges the sample rows, frame tables and aborts of profiles ps[0..n) into out (the
 * meta of the first). */
static int diff_merge(struct nupp_profile *const *ps, int n, struct nupp_profile *out)
{
	int i;
	size_t j;

	memset(out, 0, sizeof(*out));
	out->meta = ps[0]->meta;
	for (i = 0; i < n; i++)
		if (nupp_frame_table_merge(&out->samples.frames, &ps[i]->samples.frames))
			return -ENOMEM;
	for (i = 0; i < n; i++)
		for (j = 0; j < ps[i]->samples.n; j++) {
			const struct nupp_sample_row *r = &ps[i]->samples.rows[j];

			if (nupp_sample_set_add(&out->samples, r->zone_path, r->stack, r))
				return -ENOMEM;
		}
	for (i = 0; i < n; i++)
		for (j = 0; j < ps[i]->aborts.n; j++) {
			const struct nupp_abort_row *a = &ps[i]->aborts.rows[j];

			if (nupp_abort_set_add(&out->aborts, a->severity, a->reason, a->location, a->zone_path, a->count))
				return -ENOMEM;
		}
	return 0;
}

/* Writes the -o outputs; 0 or 2 after printing the error. */
static int diff_outputs(const struct diff_cli *c, struct nupp_diff *d, struct nupp_profile *const *bp,
			struct nupp_profile *const *np)
{
	struct nupp_profile mb, mn;
	struct diff_svg s = { &mn, &mb, NULL };
	bool merged = false;
	int i, err, ret = 0;

	for (i = 0; i < c->noutputs; i++) {
		const char *path = c->outputs[i];

		if (strcmp(strrchr(path, '.'), ".json") == 0) {
			err = nupp_output_write(path, diff_write_json_cb, d);
		} else {
			if (!merged) {
				err = diff_merge(bp, c->nbase, &mb);
				if (!err)
					err = diff_merge(np, c->nnew, &mn);
				if (!err && asprintf(&s.title, "NEW %s against BASE %s", d->new_label, d->base_label) < 0) {
					s.title = NULL;
					err = -ENOMEM;
				}
				merged = true;
				if (err) {
					cli_error("out of memory");
					ret = 2;
					break;
				}
			}
			err = nupp_output_write(path, diff_write_svg_cb, &s);
		}
		if (err) {
			cli_error("%s", nupp_errmsg());
			ret = 2;
		}
	}
	free(s.title);
	if (merged) {
		nupp_sample_set_free(&mb.samples);
		nupp_abort_set_free(&mb.aborts);
		nupp_sample_set_free(&mn.samples);
		nupp_abort_set_free(&mn.aborts);
	}
	return ret;
}

int cmd_diff(int argc, char **argv)
{
	struct diff_cli c = { .o = { .sz = sizeof(c.o) }, .format = "text" };
	struct nupp_profile *bp[DIFF_MAX_FILES] = { 0 }, *np[DIFF_MAX_FILES] = { 0 };
	struct nupp_diff *d = NULL;
	int ret, i, err;

	ret = diff_parse(argc, argv, &c);
	if (ret)
		return ret < 0 ? 0 : ret;
	ret = 2;
	for (i = 0; i < c.noutputs; i++)
		if (nupp_output_check(c.outputs[i])) {
			cli_error("%s", nupp_errmsg());
			return 2;
		}
	for (i = 0; i < c.nbase + c.nnew; i++) {
		const char *path = i < c.nbase ? c.base[i] : c.new_[i - c.nbase];
		struct nupp_profile **slot = i < c.nbase ? &bp[i] : &np[i - c.nbase];

		*slot = calloc(1, sizeof(**slot));
		if (!*slot) {
			cli_error("out of memory");
			goto out;
		}
		err = nupp_profile_read_file(path, *slot);
		if (err) {
			cli_error("cannot read %s %s: %s", i < c.nbase ? "BASE" : "NEW", path, nupp_errmsg());
			goto out;
		}
	}
	{
		struct nupp_diff_input bi = { .profiles = (const struct nupp_profile *const *)bp, .names = c.base,
					      .n = c.nbase };
		struct nupp_diff_input ni = { .profiles = (const struct nupp_profile *const *)np, .names = c.new_,
					      .n = c.nnew };

		err = nupp_diff_compute(&bi, &ni, &c.o, &d);
	}
	if (err) {
		cli_error("%s", nupp_errmsg());
		goto out;
	}
	if (diff_outputs(&c, d, bp, np))
		goto out;
	if (!c.quiet) {
		if (strcmp(c.format, "json") == 0)
			err = nupp_diff_write_json(d, stdout);
		else if (strcmp(c.format, "bmf") == 0)
			err = nupp_diff_write_bmf(d, stdout);
		else
			err = nupp_diff_write_text(d, stdout, c.top);
		if (fflush(stdout) && !err)
			err = -errno;
		if (err) {
			cli_error("cannot write the result: %s", strerror(-err));
			goto out;
		}
	}
	ret = d->regressions ? 1 : 0;
out:
	nupp_diff_free(d);
	for (i = 0; i < DIFF_MAX_FILES; i++) {
		if (bp[i])
			nupp_profile_free(bp[i]);
		if (np[i])
			nupp_profile_free(np[i]);
		free(bp[i]);
		free(np[i]);
	}
	return ret;
}
