/* Diff's writers: a computed result (user/compare/diff.c) as the text table, as JSON and
 * as Bencher Metric Format. They only read the result; computing it is not theirs. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "nupp/diff.h"
#include "core/nupp_internal.h"
#include "compare_internal.h"
#include "diff_internal.h"

#define DIFF_DEFAULT_TOP 20

/* -- Text ---------------------------------------------------------------------- */

/* The words of a row's flags. */
const char *nupp_diff_flag_words(unsigned flags, char *buf, size_t size)
{
	static const struct {
		unsigned bit, unless;
		const char *word;
	} words[] = {
		{ NUPP_DIFF_NEW, 0, "new" },
		{ NUPP_DIFF_GONE, 0, "gone" },
		{ NUPP_DIFF_GREW, 0, "grew" },
		{ NUPP_DIFF_SHRANK, 0, "shrank" },
		{ NUPP_DIFF_NOW_INTERPRETED, 0, "now interpreted" },
		{ NUPP_DIFF_MORE_INTERPRETED, NUPP_DIFF_NOW_INTERPRETED, "more interpreted" },
		{ NUPP_DIFF_NOW_COMPILED, 0, "now compiled" },
		{ NUPP_DIFF_LESS_INTERPRETED, NUPP_DIFF_NOW_COMPILED, "less interpreted" },
		{ NUPP_DIFF_FEW, 0, "few samples" },
	};
	size_t i, len = 0;

	if (size)
		buf[0] = 0;
	for (i = 0; i < NUPP_ARRAY_SIZE(words); i++)
		if ((flags & words[i].bit) && !(flags & words[i].unless) && len < size)
			len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "", words[i].word);
	return buf;
}

/* The unit's name for headings. */
static const char *diff_unit_name(const struct nupp_diff *d)
{
	switch (d->opts.unit) {
	case NUPP_DIFF_STACKS:
		return "stack";
	case NUPP_DIFF_LINES:
		return "line";
	default:
		return d->lines ? "line (frames of a --lines profile)" : "function";
	}
}

/* Interpreted share of a side's Lua samples, as text ("-" if none). */
static const char *diff_pct(const struct nupp_diff_counts *c, char *buf, size_t size)
{
	double f = diff_interp_frac(c);

	if (f < 0)
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%.0f%%", 100 * f);
	return buf;
}

/* Writes one table row. */
static void diff_text_row(FILE *f, const struct nupp_diff *d, const struct nupp_diff_row *r)
{
	char words[128], ib[16], in[16], interp[40];
	double z;

	snprintf(interp, sizeof(interp), "%s -> %s", diff_pct(&r->base, ib, sizeof(ib)), diff_pct(&r->new_, in, sizeof(in)));
	fprintf(f, "  %+7.2f %6.2f %6.2f", r->self.change, r->self.base, r->self.new_);
	if (d->opts.unit != NUPP_DIFF_STACKS)
		fprintf(f, " %6.2f %6.2f", r->total.base, r->total.new_);
	z = r->flags & (NUPP_DIFF_MORE_INTERPRETED | NUPP_DIFF_LESS_INTERPRETED) &&
			    !(r->flags & (NUPP_DIFF_GREW | NUPP_DIFF_SHRANK))
		    ? r->interp.z
		    : r->self.z;
	fprintf(f, " %11s %6.1f  %s", interp, fabs(z) > 999 ? 999.9 : fabs(z), r->key);
	nupp_diff_flag_words(r->flags & ~NUPP_DIFF_FEW, words, sizeof(words));
	if (words[0])
		fprintf(f, "  [%s]", words);
	fputc('\n', f);
}

/* Writes the table heading. */
static void diff_text_head(FILE *f, const struct nupp_diff *d, const char *title)
{
	fprintf(f, "\n%s\n  %7s %13s", title, "", "self %");
	if (d->opts.unit != NUPP_DIFF_STACKS)
		fprintf(f, " %13s", "total %");
	fprintf(f, " %11s\n  %7s %6s %6s", "interpreted", "change", "BASE", "NEW");
	if (d->opts.unit != NUPP_DIFF_STACKS)
		fprintf(f, " %6s %6s", "BASE", "NEW");
	fprintf(f, " %11s %6s  %s\n", "BASE -> NEW", "sigma", diff_unit_name(d));
}

/* Writes the human-readable table. */
int nupp_diff_write_text(const struct nupp_diff *d, FILE *f, int top)
{
	size_t i, shown = 0;
	int flagged = 0;

	if (top <= 0)
		top = DIFF_DEFAULT_TOP;
	fprintf(f, "BASE: %s: %d run%s, %llu samples", d->base_label, d->base_runs, d->base_runs == 1 ? "" : "s",
		(unsigned long long)d->base_samples);
	if (d->base_hz > 0)
		fprintf(f, " at %d Hz", d->base_hz);
	fprintf(f, "\nNEW:  %s: %d run%s, %llu samples", d->new_label, d->new_runs, d->new_runs == 1 ? "" : "s",
		(unsigned long long)d->new_samples);
	if (d->new_hz > 0)
		fprintf(f, " at %d Hz", d->new_hz);
	fprintf(f, "\nA change is flagged when a share moves by more than %.2f percentage points and more than %.1f "
		   "standard errors, on rows with at least %llu samples on one side.\n",
		d->opts.threshold, d->opts.sigmas, (unsigned long long)d->opts.min_samples);
	if (d->base_hz > 0 && d->base_hz == d->new_hz) {
		double bpr = (double)d->base_samples / d->base_runs, npr = (double)d->new_samples / d->new_runs;

		bool grew = false;

		for (i = 0; i < d->n; i++)
			grew |= !!(d->rows[i].flags & NUPP_DIFF_GREW);
		fprintf(f, "Samples per run: BASE %.0f, NEW %.0f (%+.1f %%)%s\n", bpr, npr, 100 * (npr - bpr) / bpr,
			grew && npr < bpr * 0.9 ? ": NEW ran for less CPU time, and shares of unchanged code rise when "
						  "other code gets faster"
						: "");
	}
	for (i = 0; i < d->n; i++)
		if (d->rows[i].flags & (NUPP_DIFF_REGRESSION | NUPP_DIFF_SHRANK | NUPP_DIFF_LESS_INTERPRETED)) {
			if (!flagged++)
				diff_text_head(f, d, "Flagged (self: % of the samples whose leaf it is; total: with it on "
						     "the stack; interpreted: of its own Lua samples):");
			diff_text_row(f, d, &d->rows[i]);
		}
	for (i = 0; i < d->n && shown < (size_t)top; i++) {
		const struct nupp_diff_row *r = &d->rows[i];

		if (r->flags & (NUPP_DIFF_REGRESSION | NUPP_DIFF_SHRANK | NUPP_DIFF_LESS_INTERPRETED))
			continue;
		if (fabs(r->self.change) < 0.01 && fabs(r->interp.change) < 0.01)
			continue;
		if (!shown++)
			diff_text_head(f, d, flagged ? "Other changes (within the threshold or the noise):"
						     : "Largest changes (all within the threshold or the noise):");
		diff_text_row(f, d, r);
	}
	if (d->aborts_compared) {
		size_t na = 0;

		for (i = 0; i < d->naborts; i++) {
			const struct nupp_diff_abort *a = &d->aborts[i];

			if (!(a->flags & (NUPP_DIFF_ABORT_APPEARED | NUPP_DIFF_ABORT_DISAPPEARED)))
				continue;
			if (!na++)
				fprintf(f, "\nTrace abort rows that appeared (+) or disappeared (-), counts BASE -> NEW:\n");
			fprintf(f, "  %c %-9s %6llu -> %-6llu %s at %s%s%s%s\n",
				a->flags & NUPP_DIFF_ABORT_APPEARED ? '+' : '-', nupp_severity_name(a->severity),
				(unsigned long long)a->base, (unsigned long long)a->new_, a->reason, a->location,
				a->zone_path[0] ? " in zone " : "", a->zone_path,
				a->flags & NUPP_DIFF_ABORT_REGRESSION ? "  [new blacklisting]" : "");
		}
		if (!na)
			fprintf(f, "\nTrace abort rows: the same on both sides (%zu rows).\n", d->naborts);
	}
	if (d->note[0])
		fprintf(f, "\nNote: %s.\n", d->note);
	if (d->regressions)
		fprintf(f, "\nnupp-bpf diff: %d regression%s\n", d->regressions, d->regressions == 1 ? "" : "s");
	else
		fprintf(f, "\nnupp-bpf diff: no regression\n");
	return ferror(f) ? -EIO : 0;
}

/* -- JSON ---------------------------------------------------------------------- */

/* A side's counts as a JSON object. */
static json_t *diff_json_counts(const struct nupp_diff_counts *c)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "self", (json_int_t)c->self, "total",
			 (json_int_t)c->total, "compiled", (json_int_t)c->compiled, "interpreted",
			 (json_int_t)c->interpreted, "cCode", (json_int_t)c->ccode, "collecting",
			 (json_int_t)c->collecting, "compiling", (json_int_t)c->compiling);
}

/* A share as a JSON object. */
static json_t *diff_json_share(const struct nupp_diff_share *s)
{
	return json_pack("{s:f, s:f, s:f, s:f, s:f}", "base", s->base, "new", s->new_, "change", s->change, "se",
			 s->se, "z", isfinite(s->z) ? s->z : (s->z > 0 ? 1e300 : -1e300));
}

/* The flag words of a row as a JSON array. */
static json_t *diff_json_flags(unsigned flags)
{
	static const struct {
		unsigned bit;
		const char *word;
	} words[] = {
		{ NUPP_DIFF_NEW, "new" },
		{ NUPP_DIFF_GONE, "gone" },
		{ NUPP_DIFF_GREW, "grew" },
		{ NUPP_DIFF_SHRANK, "shrank" },
		{ NUPP_DIFF_MORE_INTERPRETED, "moreInterpreted" },
		{ NUPP_DIFF_NOW_INTERPRETED, "nowInterpreted" },
		{ NUPP_DIFF_LESS_INTERPRETED, "lessInterpreted" },
		{ NUPP_DIFF_NOW_COMPILED, "nowCompiled" },
		{ NUPP_DIFF_FEW, "fewSamples" },
	};
	json_t *a = json_array();
	size_t i;

	for (i = 0; a && i < NUPP_ARRAY_SIZE(words); i++)
		if ((flags & words[i].bit) && json_array_append_new(a, json_string(words[i].word))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* A side's summary as a JSON object. */
static json_t *diff_json_side(const char *label, int runs, __u64 samples, double secs, int hz, __u64 aborts,
			      __u64 blacklisted)
{
	return json_pack("{s:o, s:i, s:I, s:f, s:o, s:I, s:I}", "files", nupp_json_name(label), "runs", runs, "samples",
			 (json_int_t)samples, "durationSec", secs, "frequencyHz", hz > 0 ? json_integer(hz) : json_null(),
			 "totalAborts", (json_int_t)aborts, "blacklisted", (json_int_t)blacklisted);
}

/* Writes the whole result as JSON. */
int nupp_diff_write_json(const struct nupp_diff *d, FILE *f)
{
	static const char *const units[] = { "function", "stack", "line" };
	json_t *doc, *rows = json_array(), *aborts = json_array();
	size_t i;
	int err = 0;

	for (i = 0; rows && i < d->n; i++) {
		const struct nupp_diff_row *r = &d->rows[i];
		json_t *o = json_pack("{s:o, s:b, s:o, s:o, s:o, s:o, s:o, s:o}", "key", nupp_json_name(r->key), "regression",
				      !!(r->flags & NUPP_DIFF_REGRESSION), "flags", diff_json_flags(r->flags), "self",
				      diff_json_share(&r->self), "total", diff_json_share(&r->total), "interpreted",
				      diff_json_share(&r->interp), "base", diff_json_counts(&r->base), "new",
				      diff_json_counts(&r->new_));

		if (!o || json_array_append_new(rows, o))
			err = -ENOMEM;
	}
	for (i = 0; aborts && i < d->naborts; i++) {
		const struct nupp_diff_abort *a = &d->aborts[i];
		json_t *o = json_pack("{s:s, s:o, s:o, s:o, s:I, s:I, s:b, s:b, s:b}", "severity",
				      nupp_severity_name(a->severity), "reason", nupp_json_name(a->reason), "location",
				      nupp_json_name(a->location), "zonePath", nupp_json_name(a->zone_path), "base",
				      (json_int_t)a->base, "new", (json_int_t)a->new_, "appeared",
				      !!(a->flags & NUPP_DIFF_ABORT_APPEARED), "disappeared",
				      !!(a->flags & NUPP_DIFF_ABORT_DISAPPEARED), "regression",
				      !!(a->flags & NUPP_DIFF_ABORT_REGRESSION));

		if (!o || json_array_append_new(aborts, o))
			err = -ENOMEM;
	}
	if (err || !rows || !aborts) {
		json_decref(rows);
		json_decref(aborts);
		return -ENOMEM;
	}
	doc = json_pack("{s:i, s:s, s:b, s:i, s:f, s:f, s:I, s:b, s:o, s:o, s:b, s:b, s:o, s:o, s:o}", "version", 1, "unit",
			units[d->opts.unit], "lines", d->lines, "regressions", d->regressions, "threshold",
			d->opts.threshold, "sigmas", d->opts.sigmas, "minSamples", (json_int_t)d->opts.min_samples,
			"allowAborts", d->opts.allow_aborts,
			"base", diff_json_side(d->base_label, d->base_runs, d->base_samples, d->base_secs, d->base_hz,
					       d->base_total_aborts, d->base_blacklisted),
			"new", diff_json_side(d->new_label, d->new_runs, d->new_samples, d->new_secs, d->new_hz,
					      d->new_total_aborts, d->new_blacklisted),
			"abortsCompared", d->aborts_compared, "statesCompared", d->states_compared, "note", d->note[0] ? json_string(d->note) : json_null(),
			"rows", rows, "aborts", aborts);
	return nupp_json_dump(doc, f);
}

/* -- Bencher Metric Format ----------------------------------------------------- */

/* A BMF metric: value with lower/upper bounds. */
static json_t *diff_bmf_metric(double value, double lower, double upper)
{
	return json_pack("{s:f, s:f, s:f}", "value", value, "lower_value", lower, "upper_value", upper);
}

/* Writes NEW's shares as Bencher Metric Format. */
int nupp_diff_write_bmf(const struct nupp_diff *d, FILE *f)
{
	json_t *doc = json_object();
	size_t i;
	int err = 0;

	if (!doc)
		return -ENOMEM;
	for (i = 0; i < d->n && !err; i++) {
		const struct nupp_diff_row *r = &d->rows[i];
		double n = (double)d->new_samples, s = d->opts.sigmas;
		double ps = r->new_.self / n, pt = r->new_.total / n, pi = r->new_.interpreted / n;
		double es = 100 * s * sqrt(ps * (1 - ps) / n), et = 100 * s * sqrt(pt * (1 - pt) / n),
		       ei = 100 * s * sqrt(pi * (1 - pi) / n);
		char *key;
		json_t *m;

		if (r->new_.self < d->opts.min_samples)
			continue;
		m = json_pack("{s:o, s:o, s:o}", "self-share", diff_bmf_metric(100 * ps, fmax(0, 100 * ps - es), 100 * ps + es),
			      "total-share", diff_bmf_metric(100 * pt, fmax(0, 100 * pt - et), 100 * pt + et),
			      "interpreted-share", diff_bmf_metric(100 * pi, fmax(0, 100 * pi - ei), 100 * pi + ei));
		key = nupp_bytes_to_utf8(r->key);
		if (!m || !key || json_object_set_new(doc, key, m))
			err = -ENOMEM;
		free(key);
	}
	if (!err) {
		double runs = d->new_runs;
		json_t *m = json_pack("{s:{s:f}, s:{s:f}, s:{s:f}}", "samples", "value", d->new_samples / runs,
				      "trace-aborts", "value", d->new_total_aborts / runs, "blacklisted", "value",
				      d->new_blacklisted / runs);

		if (!m || json_object_set_new(doc, "nupp-bpf", m))
			err = -ENOMEM;
	}
	if (err) {
		json_decref(doc);
		return err;
	}
	return nupp_json_dump(doc, f);
}
