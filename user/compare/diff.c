/* Diff: BASE against NEW by normalised shares, a change flagged only beyond a threshold
 * and beyond sampling noise (the rows, their statistics and flags, the abort rows). Writing
 * the result out is user/compare/diff_write.c's, not this file's. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/diff.h"
#include "core/nupp_internal.h"
#include "compare_internal.h"
#include "diff_internal.h"

#define DIFF_DEFAULT_THRESHOLD 1.0
#define DIFF_DEFAULT_SIGMAS 3.0
#define DIFF_DEFAULT_MIN_SAMPLES 20

/* -- Rows being built ------------------------------------------------------- */

/* A row of the diff being built, with per-run counts for the noise estimate. */
struct diff_acc {
	struct nupp_diff_counts side[2]; /* BASE, NEW */
	__u64 *run_self, *run_interp;    /* per run, BASE runs first */
	size_t mark;                     /* the last sample row that counted it in total */
};

struct diff_build {
	struct nupp_strtab keys; /* key -> index into rows */
	struct diff_acc *rows;
	size_t cap;
	int nruns;
};

/* Finds or adds the row of key[0..len); its index, or -ENOMEM. */
static long diff_row(struct diff_build *b, const char *key, size_t len)
{
	long i = nupp_strtab_get(&b->keys, key, len, true);
	struct diff_acc *r;

	if (i < 0 || ((size_t)i < b->cap && b->rows[i].run_self))
		return i; /* an error, or a row made before */
	if ((size_t)i >= b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		struct diff_acc *nr = realloc(b->rows, cap * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		memset(nr + b->cap, 0, (cap - b->cap) * sizeof(*nr));
		b->rows = nr;
		b->cap = cap;
	}
	r = &b->rows[i];
	r->run_self = calloc((size_t)b->nruns * 2, sizeof(__u64));
	if (!r->run_self)
		return -ENOMEM;
	r->run_interp = r->run_self + b->nruns;
	r->mark = (size_t)-1;
	return i;
}

/* Frees the build state. */
static void diff_build_free(struct diff_build *b)
{
	size_t i;

	for (i = 0; i < b->cap; i++)
		free(b->rows[i].run_self);
	free(b->rows);
	nupp_strtab_free(&b->keys);
}

/* -- Compatibility ------------------------------------------------------------- */

/* Name of profile i of a side, for messages. */
static const char *diff_name(const struct nupp_diff_input *in, int i, const char *side, char *buf, size_t size)
{
	if (in->names && in->names[i])
		return in->names[i];
	snprintf(buf, size, "%s %d", side, i + 1);
	return buf;
}

/* strcmp that takes NULL as "". */
static int diff_strcmp0(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "");
}

/* True if p came with a meta (a nupp profile), not from collapsed stacks. */
static bool diff_has_meta(const struct nupp_profile *p)
{
	return p->meta.backend || p->meta.depth;
}

/* Checks that profile q can be compared with the reference p; 0 or -EINVAL with the
 * message saying what differs. Collapsed stacks carry no meta and pass. */
static int diff_compatible(const struct nupp_profile *p, const char *pn, const struct nupp_profile *q, const char *qn)
{
	const struct nupp_profile_meta *a = &p->meta, *b = &q->meta;

	if (!diff_has_meta(p) || !diff_has_meta(q))
		return 0;
	if (a->lines != b->lines)
		return nupp_fail(-EINVAL,
				 "cannot compare %s and %s: %s was recorded with --lines (frames are source lines) and "
				 "%s without (frames are functions): record both the same way",
				 pn, qn, a->lines ? pn : qn, a->lines ? qn : pn);
	if (a->full_filenames != b->full_filenames)
		return nupp_fail(-EINVAL,
				 "cannot compare %s and %s: %s names chunks by full path (--full-filenames) and %s by "
				 "basename: record both the same way",
				 pn, qn, a->full_filenames ? pn : qn, a->full_filenames ? qn : pn);
	if (a->depth != b->depth)
		return nupp_fail(-EINVAL,
				 "cannot compare %s and %s: recorded with different --depth (%d and %d frames): record "
				 "both with the same depth",
				 pn, qn, a->depth, b->depth);
	if (diff_strcmp0(a->zone_filter, b->zone_filter))
		return nupp_fail(-EINVAL, "cannot compare %s and %s: different --zone (%s and %s)", pn, qn,
				 a->zone_filter ? a->zone_filter : "none", b->zone_filter ? b->zone_filter : "none");
	if (diff_strcmp0(a->root, b->root))
		return nupp_fail(-EINVAL, "cannot compare %s and %s: different --root (%s and %s)", pn, qn,
				 a->root ? a->root : "none", b->root ? b->root : "none");
	if (diff_strcmp0(a->backend, b->backend))
		return nupp_fail(-EINVAL, "cannot compare %s and %s: different backends (%s and %s)", pn, qn,
				 a->backend ? a->backend : "bpf", b->backend ? b->backend : "bpf");
	if (a->aborts != b->aborts)
		return nupp_fail(-EINVAL,
				 "cannot compare %s and %s: %s was recorded with --no-aborts and %s was not: record "
				 "both the same way",
				 pn, qn, a->aborts ? qn : pn, a->aborts ? pn : qn);
	return 0;
}

/* -- Statistics ---------------------------------------------------------------- */

/* The share of x in n, in percent of each side, its change and the change's standard
 * error: the larger of the binomial one (difference of two proportions, pooled under
 * "no change", from all samples of each side) and, when a side has several runs, the
 * one from the spread of the runs' own shares (a side of one run counts binomially). */
static void diff_share(struct nupp_diff_share *s, const __u64 *run_x, const __u64 *run_n, int nb, int nn)
{
	double x[2] = { 0, 0 }, n[2] = { 0, 0 }, p[2], pool, se, v[2];
	int side, i, k, first;

	for (i = 0; i < nb + nn; i++) {
		x[i >= nb] += (double)run_x[i];
		n[i >= nb] += (double)run_n[i];
	}
	p[0] = n[0] > 0 ? x[0] / n[0] : 0;
	p[1] = n[1] > 0 ? x[1] / n[1] : 0;
	pool = (x[0] + x[1]) / (n[0] + n[1]);
	se = sqrt(pool * (1 - pool) * (1 / n[0] + 1 / n[1]));
	if (nb > 1 || nn > 1) {
		for (side = 0; side < 2; side++) {
			k = side ? nn : nb;
			first = side ? nb : 0;
			if (k < 2) {
				v[side] = p[side] * (1 - p[side]) / n[side];
				continue;
			}
			double mean = 0, ss = 0;

			for (i = first; i < first + k; i++)
				mean += run_n[i] ? (double)run_x[i] / (double)run_n[i] : 0;
			mean /= k;
			for (i = first; i < first + k; i++) {
				double d = (run_n[i] ? (double)run_x[i] / (double)run_n[i] : 0) - mean;

				ss += d * d;
			}
			v[side] = ss / (k - 1) / k;
		}
		if (sqrt(v[0] + v[1]) > se)
			se = sqrt(v[0] + v[1]);
	}
	s->base = 100 * p[0];
	s->new_ = 100 * p[1];
	s->change = s->new_ - s->base;
	s->se = 100 * se;
	s->z = s->change == 0 ? 0 : s->se > 0 ? s->change / s->se : copysign(INFINITY, s->change);
}

/* Share of a side's Lua samples (compiled + interpreted) that ran interpreted; -1 if none. */
double diff_interp_frac(const struct nupp_diff_counts *c)
{
	__u64 lua = c->compiled + c->interpreted;

	return lua ? (double)c->interpreted / (double)lua : -1;
}

/* Sets the flags of a row from its shares and counts. */
static unsigned diff_flags(const struct nupp_diff_row *r, const struct nupp_diff_opts *o)
{
	double t = o->threshold, fb, fn;
	unsigned f = 0;

	if (!r->base.self && !r->base.total)
		f |= NUPP_DIFF_NEW;
	if (!r->new_.self && !r->new_.total)
		f |= NUPP_DIFF_GONE;
	if (r->base.self < o->min_samples && r->new_.self < o->min_samples)
		return f | NUPP_DIFF_FEW;
	if (r->self.change > t && r->self.z > o->sigmas)
		f |= NUPP_DIFF_GREW;
	if (r->self.change < -t && r->self.z < -o->sigmas)
		f |= NUPP_DIFF_SHRANK;
	if (r->base.interpreted >= o->min_samples || r->new_.interpreted >= o->min_samples) {
		fb = diff_interp_frac(&r->base);
		fn = diff_interp_frac(&r->new_);
		if (r->interp.change > t && r->interp.z > o->sigmas) {
			f |= NUPP_DIFF_MORE_INTERPRETED;
			if (fb >= 0 && fb < 0.5 && fn >= 0.5)
				f |= NUPP_DIFF_NOW_INTERPRETED;
		}
		if (r->interp.change < -t && r->interp.z < -o->sigmas) {
			f |= NUPP_DIFF_LESS_INTERPRETED;
			if (fb >= 0.5 && fn >= 0 && fn < 0.5)
				f |= NUPP_DIFF_NOW_COMPILED;
		}
	}
	if (f & (NUPP_DIFF_GREW | NUPP_DIFF_MORE_INTERPRETED))
		f |= NUPP_DIFF_REGRESSION;
	return f;
}

/* -- Building ------------------------------------------------------------------ */

/* Adds one profile's sample rows as run r of side (0 BASE, 1 NEW). */
static int diff_add_samples(struct diff_build *b, const struct nupp_profile *p, int r, int side,
			    enum nupp_diff_unit unit, size_t *serial, __u64 *run_n)
{
	size_t i;

	for (i = 0; i < p->samples.n; i++) {
		const struct nupp_sample_row *s = &p->samples.rows[i];
		const char *st = s->stack, *f = st, *leaf = st;
		struct diff_acc *a;
		long idx;

		run_n[r] += s->count;
		(*serial)++;
		if (unit == NUPP_DIFF_STACKS) {
			idx = diff_row(b, st, strlen(st));
			if (idx < 0)
				return (int)idx;
			a = &b->rows[idx];
			a->side[side].total += s->count;
		} else {
			/* Every distinct frame counts the sample once in its total. */
			for (;;) {
				const char *e = strchr(f, ';');
				size_t len = e ? (size_t)(e - f) : strlen(f);

				idx = diff_row(b, f, len);
				if (idx < 0)
					return (int)idx;
				a = &b->rows[idx];
				if (a->mark != *serial) {
					a->mark = *serial;
					a->side[side].total += s->count;
				}
				leaf = f;
				if (!e)
					break;
				f = e + 1;
			}
			idx = diff_row(b, leaf, strlen(leaf));
			if (idx < 0)
				return (int)idx;
			a = &b->rows[idx];
		}
		a->side[side].self += s->count;
		a->side[side].compiled += s->compiled;
		a->side[side].interpreted += s->interpreted;
		a->side[side].ccode += s->ccode;
		a->side[side].collecting += s->collecting;
		a->side[side].compiling += s->compiling;
		a->run_self[r] += s->count;
		a->run_interp[r] += s->interpreted;
	}
	return 0;
}

/* Joins a side's file names with ", ". */
static char *diff_label(const struct nupp_diff_input *in, const char *side)
{
	size_t len = 1;
	char buf[32], *s;
	int i;

	for (i = 0; i < in->n; i++)
		len += strlen(diff_name(in, i, side, buf, sizeof(buf))) + 2;
	s = calloc(1, len);
	for (i = 0; s && i < in->n; i++) {
		if (i)
			strcat(s, ", ");
		strcat(s, diff_name(in, i, side, buf, sizeof(buf)));
	}
	return s;
}

/* Orders rows by self-share change, largest growth first, then by key. */
static int diff_cmp_rows(const void *pa, const void *pb)
{
	const struct nupp_diff_row *a = pa, *b = pb;

	if (a->self.change != b->self.change)
		return a->self.change < b->self.change ? 1 : -1;
	return strcmp(a->key, b->key);
}

/* Orders abort rows: regressions, then by severity, then NEW count, then text. */
static int diff_cmp_aborts(const void *pa, const void *pb)
{
	const struct nupp_diff_abort *a = pa, *b = pb;
	int c;

	if ((a->flags & NUPP_DIFF_ABORT_REGRESSION) != (b->flags & NUPP_DIFF_ABORT_REGRESSION))
		return a->flags & NUPP_DIFF_ABORT_REGRESSION ? -1 : 1;
	if (a->severity != b->severity)
		return (int)a->severity - (int)b->severity;
	if (a->new_ != b->new_)
		return a->new_ < b->new_ ? 1 : -1;
	if (a->base != b->base)
		return a->base < b->base ? 1 : -1;
	if ((c = strcmp(a->location, b->location)))
		return c;
	if ((c = strcmp(a->reason, b->reason)))
		return c;
	return strcmp(a->zone_path, b->zone_path);
}

/* Merges the abort rows of both sides into d->aborts. Info rows are left out when only
 * one side counted them (--include-benign). */
static int diff_add_aborts(struct nupp_diff *d, const struct nupp_diff_input *base, const struct nupp_diff_input *nw,
			   bool skip_info)
{
	struct diff_build b = { .nruns = 1 };
	const struct nupp_diff_input *in[2] = { base, nw };
	int side, i, err = 0;
	size_t j, k;

	for (side = 0; side < 2; side++)
		for (i = 0; i < in[side]->n; i++) {
			const struct nupp_abort_set *a = &in[side]->profiles[i]->aborts;

			for (j = 0; j < a->n; j++) {
				const struct nupp_abort_row *r = &a->rows[j];
				char *key;
				long idx;
				int len;

				if (skip_info && r->severity == NUPP_SEV_INFO)
					continue;
				len = asprintf(&key, "%d%c%s%c%s%c%s", (int)r->severity, 0x1f, r->reason, 0x1f,
					       r->location, 0x1f, r->zone_path ? r->zone_path : "");
				if (len < 0)
					return -ENOMEM;
				idx = diff_row(&b, key, (size_t)len);
				free(key);
				if (idx < 0) {
					err = (int)idx;
					goto out;
				}
				b.rows[idx].side[side].self += r->count;
			}
		}
	d->aborts = calloc(b.keys.n ? b.keys.n : 1, sizeof(*d->aborts));
	if (!d->aborts) {
		err = -ENOMEM;
		goto out;
	}
	for (k = 0; k < b.keys.n; k++) {
		struct nupp_diff_abort *o = &d->aborts[d->naborts];
		char *f1 = strchr(b.keys.keys[k], 0x1f), *f2 = strchr(f1 + 1, 0x1f), *f3 = strchr(f2 + 1, 0x1f);

		o->severity = (enum nupp_severity)atoi(b.keys.keys[k]);
		o->reason = strndup(f1 + 1, (size_t)(f2 - f1 - 1));
		o->location = strndup(f2 + 1, (size_t)(f3 - f2 - 1));
		o->zone_path = strdup(f3 + 1);
		o->base = b.rows[k].side[0].self;
		o->new_ = b.rows[k].side[1].self;
		d->naborts++;
		if (!o->reason || !o->location || !o->zone_path) {
			err = -ENOMEM;
			goto out;
		}
		if (!o->base)
			o->flags |= NUPP_DIFF_ABORT_APPEARED;
		if (!o->new_)
			o->flags |= NUPP_DIFF_ABORT_DISAPPEARED;
		if ((o->flags & NUPP_DIFF_ABORT_APPEARED) && o->severity == NUPP_SEV_BLACKLIST && !d->opts.allow_aborts) {
			o->flags |= NUPP_DIFF_ABORT_REGRESSION;
			d->regressions++;
		}
	}
	qsort(d->aborts, d->naborts, sizeof(*d->aborts), diff_cmp_aborts);
out:
	diff_build_free(&b);
	return err;
}

/* Frees a result. */
void nupp_diff_free(struct nupp_diff *d)
{
	size_t i;

	if (!d)
		return;
	for (i = 0; i < d->n; i++)
		free(d->rows[i].key);
	for (i = 0; i < d->naborts; i++) {
		free(d->aborts[i].reason);
		free(d->aborts[i].location);
		free(d->aborts[i].zone_path);
	}
	free(d->rows);
	free(d->aborts);
	free(d->base_label);
	free(d->new_label);
	free(d);
}

/* Compares base and new_. */
int nupp_diff_compute(const struct nupp_diff_input *base, const struct nupp_diff_input *nw,
		      const struct nupp_diff_opts *opts, struct nupp_diff **out)
{
	const struct nupp_diff_input *in[2] = { base, nw };
	const struct nupp_profile *ref;
	struct diff_build b = { 0 };
	struct nupp_diff *d;
	char rn[32], qn[32];
	const char *refname;
	__u64 *run_n = NULL;
	size_t serial = 0, i;
	int side, k, r, err;
	bool skip_info = false, collapsed = false;

	*out = NULL;
	if (!base || !nw || base->n < 1 || nw->n < 1 || !base->profiles || !nw->profiles)
		return nupp_fail(-EINVAL, "diff: BASE and NEW need at least one profile each");
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->opts.sz = sizeof(d->opts);
	d->opts.threshold = DIFF_DEFAULT_THRESHOLD;
	d->opts.sigmas = DIFF_DEFAULT_SIGMAS;
	d->opts.min_samples = DIFF_DEFAULT_MIN_SAMPLES;
	if (opts) {
		d->opts.unit = opts->unit;
		if (opts->threshold > 0 || opts->threshold < 0)
			d->opts.threshold = opts->threshold < 0 ? 0 : opts->threshold;
		if (opts->sigmas > 0)
			d->opts.sigmas = opts->sigmas;
		if (opts->min_samples)
			d->opts.min_samples = opts->min_samples;
		d->opts.allow_aborts = opts->allow_aborts;
	}

	/* Every profile must be comparable with the first BASE one. */
	ref = base->profiles[0];
	refname = diff_name(base, 0, "BASE", rn, sizeof(rn));
	d->base_hz = d->new_hz = -1;
	for (side = 0; side < 2; side++)
		for (k = 0; k < in[side]->n; k++) {
			const struct nupp_profile *q = in[side]->profiles[k];
			const char *name = diff_name(in[side], k, side ? "NEW" : "BASE", qn, sizeof(qn));
			int *hz = side ? &d->new_hz : &d->base_hz;
			__u64 n = 0;

			err = diff_compatible(ref, refname, q, name);
			if (err)
				goto fail;
			if (!diff_has_meta(q))
				collapsed = true;
			else if (q->meta.lines)
				d->lines = true;
			if (d->opts.unit == NUPP_DIFF_LINES && diff_has_meta(q) && !q->meta.lines) {
				err = nupp_fail(-EINVAL,
						"cannot compare by line: %s was recorded without --lines, so its frames "
						"name functions, not lines: record with `record --lines`, or compare "
						"functions (drop --lines)",
						name);
				goto fail;
			}
			if (q->meta.include_benign != ref->meta.include_benign)
				skip_info = true;
			for (i = 0; i < q->samples.n; i++)
				n += q->samples.rows[i].count;
			if (!n) {
				err = nupp_fail(-EINVAL, "cannot compare: %s has no samples (nothing ran, or it was "
							 "filtered out)",
						name);
				goto fail;
			}
			*(side ? &d->new_samples : &d->base_samples) += n;
			*(side ? &d->new_secs : &d->base_secs) += q->meta.duration_sec;
			*(side ? &d->new_total_aborts : &d->base_total_aborts) += q->aborts.total_aborts;
			*(side ? &d->new_blacklisted : &d->base_blacklisted) += q->aborts.blacklisted;
			*hz = *hz == -1 || *hz == q->meta.frequency_hz ? q->meta.frequency_hz : 0;
		}
	d->base_runs = base->n;
	d->new_runs = nw->n;
	d->aborts_compared = ref->meta.aborts && !collapsed;
	d->states_compared = !collapsed;
	d->base_label = diff_label(base, "BASE");
	d->new_label = diff_label(nw, "NEW");
	if (!d->base_label || !d->new_label) {
		err = -ENOMEM;
		goto fail;
	}

	/* Rows, with per-run counts. */
	b.nruns = base->n + nw->n;
	run_n = calloc((size_t)b.nruns, sizeof(*run_n));
	if (!run_n) {
		err = -ENOMEM;
		goto fail;
	}
	for (side = 0, r = 0; side < 2; side++)
		for (k = 0; k < in[side]->n; k++, r++) {
			err = diff_add_samples(&b, in[side]->profiles[k], r, side, d->opts.unit, &serial, run_n);
			if (err)
				goto fail;
		}
	d->rows = calloc(b.keys.n ? b.keys.n : 1, sizeof(*d->rows));
	if (!d->rows) {
		err = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < b.keys.n; i++) {
		struct diff_acc *a = &b.rows[i];
		struct nupp_diff_row *o = &d->rows[d->n++];
		__u64 *tot = calloc((size_t)b.nruns, sizeof(*tot));

		if (!tot) {
			err = -ENOMEM;
			goto fail;
		}
		o->key = b.keys.keys[i]; /* taken: the table is not searched again */
		b.keys.keys[i] = NULL;
		o->base = a->side[0];
		o->new_ = a->side[1];
		diff_share(&o->self, a->run_self, run_n, base->n, nw->n);
		diff_share(&o->interp, a->run_interp, run_n, base->n, nw->n);
		/* Totals per run are not kept: the merged shares with the binomial error. */
		tot[0] = o->base.total;
		tot[1] = o->new_.total;
		{
			__u64 nn[2] = { d->base_samples, d->new_samples };

			diff_share(&o->total, tot, nn, 1, 1);
		}
		free(tot);
		if (collapsed)
			memset(&o->interp, 0, sizeof(o->interp));
		o->flags = diff_flags(o, &d->opts);
		if (o->flags & NUPP_DIFF_REGRESSION)
			d->regressions++;
	}
	qsort(d->rows, d->n, sizeof(*d->rows), diff_cmp_rows);

	if (d->aborts_compared) {
		err = diff_add_aborts(d, base, nw, skip_info);
		if (err)
			goto fail;
		if (skip_info)
			snprintf(d->note, sizeof(d->note),
				 "info abort rows not compared: only one side was recorded with --include-benign");
	} else if (collapsed) {
		snprintf(d->note, sizeof(d->note),
			 "collapsed stacks have no VM states and no abort rows: only shares were compared");
	} else {
		snprintf(d->note, sizeof(d->note), "abort rows not compared: recorded with --no-aborts");
	}
	free(run_n);
	diff_build_free(&b);
	*out = d;
	return 0;
fail:
	free(run_n);
	diff_build_free(&b);
	nupp_diff_free(d);
	return err;
}
