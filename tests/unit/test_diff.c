/* The diff engine on synthetic profiles with known shares: exact shares and standard
 * errors, the threshold and the noise guard (a small change on few samples is not
 * flagged; the same change on many samples is), min-samples, "now interpreted", merged
 * runs whose spread widens the noise, abort rows, incompatible profiles, the writers. */
#include <check.h>

#include "nupp_check.h"
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/diff.h"
#include "nupp/nupp.h"

/* A profile made in memory: meta as record writes it, rows added with add(). */
static void prof_init(struct nupp_profile *p)
{
	memset(p, 0, sizeof(*p));
	p->meta.depth = 64;
	p->meta.frequency_hz = 99;
	p->meta.duration_sec = 10;
	p->meta.backend = "bpf";
	p->meta.aborts = true;
}

/* Adds n samples of a stack, compiled ('N'), interpreted ('I'), C ('C') or GC ('G'). */
static void add(struct nupp_profile *p, const char *stack, __u64 n, char state)
{
	struct nupp_sample_row c = { .count = n };

	if (state == 'N')
		c.compiled = n;
	else if (state == 'I')
		c.interpreted = n;
	else if (state == 'G')
		c.collecting = n;
	else
		c.ccode = n;
	ck_assert_int_eq(nupp_sample_set_add(&p->samples, "", stack, &c), 0);
}

/* Adds an abort row. */
static void abort_row(struct nupp_profile *p, enum nupp_severity sev, const char *reason, const char *loc, __u64 n)
{
	ck_assert_int_eq(nupp_abort_set_add(&p->aborts, sev, reason, loc, "", n), 0);
}

/* Frees a profile made here. */
static void prof_free(struct nupp_profile *p)
{
	nupp_sample_set_free(&p->samples);
	nupp_abort_set_free(&p->aborts);
}

/* Diffs one BASE against one NEW profile. */
static struct nupp_diff *diff1(const struct nupp_profile *b, const struct nupp_profile *n,
			       const struct nupp_diff_opts *o)
{
	const struct nupp_profile *bp[] = { b }, *np[] = { n };
	struct nupp_diff_input bi = { .profiles = bp, .n = 1 }, ni = { .profiles = np, .n = 1 };
	struct nupp_diff *d = NULL;

	ck_assert_msg(nupp_diff_compute(&bi, &ni, o, &d) == 0, "%s", nupp_errmsg());
	return d;
}

/* The row of key, or fails. */
static const struct nupp_diff_row *row(const struct nupp_diff *d, const char *key)
{
	size_t i;

	for (i = 0; i < d->n; i++)
		if (strcmp(d->rows[i].key, key) == 0)
			return &d->rows[i];
	ck_abort_msg("no row %s", key);
	return NULL;
}

#define EPS 1e-9

START_TEST(shares_changes_and_flags_are_exact)
{
	struct nupp_profile b, n;
	struct nupp_diff *d;
	const struct nupp_diff_row *r;
	double se;

	prof_init(&b);
	prof_init(&n);
	add(&b, "m:main;m:a", 600, 'N');
	add(&b, "m:main;m:b", 400, 'N');
	add(&n, "m:main;m:a", 300, 'N');
	add(&n, "m:main;m:b", 700, 'N');
	d = diff1(&b, &n, NULL);
	ck_assert_uint_eq(d->n, 3);
	ck_assert_uint_eq(d->base_samples, 1000);
	ck_assert_uint_eq(d->new_samples, 1000);
	/* Sorted by change: b grew, main did not move, a shrank. */
	ck_assert_str_eq(d->rows[0].key, "m:b");
	ck_assert_str_eq(d->rows[1].key, "m:main");
	ck_assert_str_eq(d->rows[2].key, "m:a");

	r = row(d, "m:b");
	ck_assert_double_eq_tol(r->self.base, 40.0, EPS);
	ck_assert_double_eq_tol(r->self.new_, 70.0, EPS);
	ck_assert_double_eq_tol(r->self.change, 30.0, EPS);
	/* Pooled two-proportion standard error: p = 1100/2000. */
	se = 100 * sqrt(0.55 * 0.45 * (1.0 / 1000 + 1.0 / 1000));
	ck_assert_double_eq_tol(r->self.se, se, 1e-9);
	ck_assert_double_eq_tol(r->self.z, 30.0 / se, 1e-9);
	ck_assert_uint_eq(r->flags, NUPP_DIFF_GREW | NUPP_DIFF_REGRESSION);
	ck_assert_uint_eq(r->base.self, 400);
	ck_assert_uint_eq(r->new_.compiled, 700);

	r = row(d, "m:a");
	ck_assert_double_eq_tol(r->self.change, -30.0, EPS);
	ck_assert_uint_eq(r->flags, NUPP_DIFF_SHRANK);

	/* main is on every stack and never the leaf. */
	r = row(d, "m:main");
	ck_assert_uint_eq(r->base.self, 0);
	ck_assert_uint_eq(r->base.total, 1000);
	ck_assert_double_eq_tol(r->total.base, 100.0, EPS);
	ck_assert_double_eq_tol(r->total.new_, 100.0, EPS);
	ck_assert_uint_eq(r->flags, NUPP_DIFF_FEW);

	ck_assert_int_eq(d->regressions, 1);
	nupp_diff_free(d);
	prof_free(&b);
	prof_free(&n);
}
END_TEST

START_TEST(total_share_counts_a_recursive_frame_once)
{
	struct nupp_profile b, n;
	struct nupp_diff *d;
	const struct nupp_diff_row *r;

	prof_init(&b);
	prof_init(&n);
	add(&b, "m:main;m:f;m:f;m:f", 100, 'I');
	add(&b, "m:main;m:g", 100, 'I');
	add(&n, "m:main;m:f;m:f", 150, 'I');
	add(&n, "m:main;m:f;m:g", 50, 'I');
	d = diff1(&b, &n, NULL);
	r = row(d, "m:f");
	ck_assert_uint_eq(r->base.total, 100);
	ck_assert_uint_eq(r->new_.total, 200);
	ck_assert_double_eq_tol(r->total.base, 50.0, EPS);
	ck_assert_double_eq_tol(r->total.new_, 100.0, EPS);
	ck_assert_double_eq_tol(r->self.base, 50.0, EPS);
	ck_assert_double_eq_tol(r->self.new_, 75.0, EPS);
	r = row(d, "m:g");
	ck_assert_uint_eq(r->new_.total, 50);
	ck_assert_double_eq_tol(r->self.change, -25.0, EPS);
	nupp_diff_free(d);
	prof_free(&b);
	prof_free(&n);
}
END_TEST

/* f goes from 10 % to 13 % of samples: +3 points, over threshold; flagged only when
 * there are enough samples for it to be beyond 3 standard errors. */
START_TEST(noise_guard_small_change_flagged_only_on_many_samples)
{
	static const __u64 sizes[] = { 200, 20000 };
	static const unsigned want[] = { 0, NUPP_DIFF_GREW | NUPP_DIFF_REGRESSION };
	size_t i;

	for (i = 0; i < 2; i++) {
		struct nupp_profile b, n;
		struct nupp_diff *d;
		const struct nupp_diff_row *r;
		__u64 N = sizes[i];
		double se;

		prof_init(&b);
		prof_init(&n);
		add(&b, "m:main;m:f", N / 10, 'N');
		add(&b, "m:main;m:g", N - N / 10, 'N');
		add(&n, "m:main;m:f", N * 13 / 100, 'N');
		add(&n, "m:main;m:g", N - N * 13 / 100, 'N');
		d = diff1(&b, &n, NULL);
		r = row(d, "m:f");
		ck_assert_double_eq_tol(r->self.change, 3.0, 1e-9);
		se = 100 * sqrt(0.115 * 0.885 * 2.0 / (double)N);
		ck_assert_double_eq_tol(r->self.se, se, 1e-9);
		/* 200 samples: z = 0.94; 20000: z = 9.4. */
		ck_assert_msg((r->flags & ~NUPP_DIFF_FEW) == want[i], "N=%llu flags %#x z %.2f", (unsigned long long)N,
			      r->flags, r->self.z);
		ck_assert_int_eq(d->regressions, i == 1 ? 1 : 0);
		nupp_diff_free(d);
		prof_free(&b);
		prof_free(&n);
	}
}
END_TEST

/* A change far beyond the noise but under the threshold is not flagged. */
START_TEST(threshold_holds_back_significant_small_changes)
{
	struct nupp_profile b, n;
	struct nupp_diff_opts o = { .sz = sizeof(o) };
	struct nupp_diff *d;
	const struct nupp_diff_row *r;

	prof_init(&b);
	prof_init(&n);
	add(&b, "m:f", 100000, 'N');
	add(&b, "m:g", 900000, 'N');
	add(&n, "m:f", 108000, 'N');
	add(&n, "m:g", 892000, 'N');
	d = diff1(&b, &n, NULL);
	r = row(d, "m:f");
	ck_assert_double_eq_tol(r->self.change, 0.8, 1e-9);
	ck_assert_double_eq_tol(d->opts.threshold, 1.0, EPS);
	ck_assert(r->self.z > 15);
	ck_assert_uint_eq(r->flags, 0);
	ck_assert_int_eq(d->regressions, 0);
	nupp_diff_free(d);

	o.threshold = 0.5;
	d = diff1(&b, &n, &o);
	ck_assert_uint_eq(row(d, "m:f")->flags, NUPP_DIFF_GREW | NUPP_DIFF_REGRESSION);
	ck_assert_uint_eq(row(d, "m:g")->flags, NUPP_DIFF_SHRANK);
	nupp_diff_free(d);

	/* More sigmas than the change has: not flagged. */
	o.sigmas = 30;
	d = diff1(&b, &n, &o);
	ck_assert_uint_eq(row(d, "m:f")->flags, 0);
	nupp_diff_free(d);
	prof_free(&b);
	prof_free(&n);
}
END_TEST

/* A new function with 15 of 1000 samples: +1.5 points at z = 3.9, but fewer than
 * --min-samples (default 20) samples: not flagged; with min_samples 10 it is. */
START_TEST(min_samples_holds_back_rare_functions)
{
	struct nupp_profile b, n;
	struct nupp_diff_opts o = { .sz = sizeof(o), .min_samples = 10 };
	struct nupp_diff *d;
	const struct nupp_diff_row *r;

	prof_init(&b);
	prof_init(&n);
	add(&b, "m:g", 1000, 'N');
	add(&n, "m:g", 985, 'N');
	add(&n, "m:h", 15, 'N');
	d = diff1(&b, &n, NULL);
	r = row(d, "m:h");
	ck_assert_double_eq_tol(r->self.change, 1.5, 1e-9);
	ck_assert(r->self.z > 3.5);
	ck_assert_uint_eq(r->flags, NUPP_DIFF_NEW | NUPP_DIFF_FEW);
	ck_assert_int_eq(d->regressions, 0);
	nupp_diff_free(d);
	d = diff1(&b, &n, &o);
	ck_assert_uint_eq(row(d, "m:h")->flags, NUPP_DIFF_NEW | NUPP_DIFF_GREW | NUPP_DIFF_REGRESSION);
	nupp_diff_free(d);
	prof_free(&b);
	prof_free(&n);
}
END_TEST

/* Same share, but it went from compiled to interpreted: a regression, "now interpreted". */
START_TEST(a_function_that_went_interpreted_is_a_regression)
{
	struct nupp_profile b, n;
	struct nupp_diff *d;
	const struct nupp_diff_row *r;
	char words[128];

	prof_init(&b);
	prof_init(&n);
	add(&b, "m:main;m:loop", 500, 'N');
	add(&b, "m:main;m:other", 500, 'N');
	add(&n, "m:main;m:loop", 490, 'I');
	add(&n, "m:main;m:loop", 10, 'N');
	add(&n, "m:main;m:other", 500, 'N');
	d = diff1(&b, &n, NULL);
	r = row(d, "m:loop");
	ck_assert_double_eq_tol(r->self.change, 0.0, EPS);
	ck_assert_double_eq_tol(r->interp.base, 0.0, EPS);
	ck_assert_double_eq_tol(r->interp.new_, 49.0, EPS);
	ck_assert_uint_eq(r->flags, NUPP_DIFF_MORE_INTERPRETED | NUPP_DIFF_NOW_INTERPRETED | NUPP_DIFF_REGRESSION);
	ck_assert_str_eq(nupp_diff_flag_words(r->flags, words, sizeof(words)), "now interpreted");
	ck_assert_uint_eq(row(d, "m:other")->flags, 0);
	ck_assert_int_eq(d->regressions, 1);
	nupp_diff_free(d);

	/* Back again: now compiled, an improvement. */
	d = diff1(&n, &b, NULL);
	r = row(d, "m:loop");
	ck_assert_uint_eq(r->flags, NUPP_DIFF_LESS_INTERPRETED | NUPP_DIFF_NOW_COMPILED);
	ck_assert_str_eq(nupp_diff_flag_words(r->flags, words, sizeof(words)), "now compiled");
	ck_assert_int_eq(d->regressions, 0);
	nupp_diff_free(d);
	prof_free(&b);
	prof_free(&n);
}
END_TEST

/* More interpreted, but it was mostly interpreted already: "more interpreted"; GC time
 * is neither compiled nor interpreted and does not count in the split. */
START_TEST(more_interpreted_without_crossing_is_not_now_interpreted)
{
	struct nupp_profile b, n;
	struct nupp_diff *d;
	const struct nupp_diff_row *r;
	char words[128];

	prof_init(&b);
	prof_init(&n);
	add(&b, "m:f", 300, 'I');
	add(&b, "m:f", 200, 'N');
	add(&b, "m:f", 500, 'G');
	add(&b, "m:g", 1000, 'C');
	add(&n, "m:f", 450, 'I');
	add(&n, "m:f", 50, 'N');
	add(&n, "m:f", 500, 'G');
	add(&n, "m:g", 1000, 'C');
	d = diff1(&b, &n, NULL);
	r = row(d, "m:f");
	ck_assert_double_eq_tol(r->interp.base, 15.0, EPS);
	ck_assert_double_eq_tol(r->interp.new_, 22.5, EPS);
	ck_assert_uint_eq(r->flags, NUPP_DIFF_MORE_INTERPRETED | NUPP_DIFF_REGRESSION);
	ck_assert_str_eq(nupp_diff_flag_words(r->flags, words, sizeof(words)), "more interpreted");
	nupp_diff_free(d);
	prof_free(&b);
	prof_free(&n);
}
END_TEST

/* Two runs a side are merged; when the runs' own shares spread, the noise is the spread. */
START_TEST(merged_runs_use_the_spread_of_their_shares)
{
	struct nupp_profile b[2], n[2];
	const struct nupp_profile *bp[] = { &b[0], &b[1] }, *np[] = { &n[0], &n[1] };
	struct nupp_diff_input bi = { .profiles = bp, .n = 2 }, ni = { .profiles = np, .n = 2 };
	const char *bnames[] = { "b1.json", "b2.json" };
	struct nupp_diff *d;
	const struct nupp_diff_row *r;
	double se_b;
	int i;

	for (i = 0; i < 2; i++) {
		prof_init(&b[i]);
		prof_init(&n[i]);
		add(&n[i], "m:f", 250, 'N');
		add(&n[i], "m:g", 750, 'N');
	}
	/* Shares 10 % and 30 %: merged 20 %, a spread of 10 points of standard error. */
	add(&b[0], "m:f", 100, 'N');
	add(&b[0], "m:g", 900, 'N');
	add(&b[1], "m:f", 300, 'N');
	add(&b[1], "m:g", 700, 'N');
	bi.names = bnames;
	ck_assert_int_eq(nupp_diff_compute(&bi, &ni, NULL, &d), 0);
	ck_assert_int_eq(d->base_runs, 2);
	ck_assert_int_eq(d->new_runs, 2);
	ck_assert_uint_eq(d->base_samples, 2000);
	ck_assert_str_eq(d->base_label, "b1.json, b2.json");
	ck_assert_str_eq(d->new_label, "NEW 1, NEW 2");
	r = row(d, "m:f");
	ck_assert_uint_eq(r->base.self, 400);
	ck_assert_double_eq_tol(r->self.base, 20.0, EPS);
	ck_assert_double_eq_tol(r->self.new_, 25.0, EPS);
	se_b = 100 * sqrt(0.225 * 0.775 * (2.0 / 2000));
	ck_assert(5.0 / se_b > 3); /* the binomial error alone would flag it */
	ck_assert_double_eq_tol(r->self.se, 10.0, 1e-9);
	ck_assert_uint_eq(r->flags, 0);
	nupp_diff_free(d);

	/* Runs that agree (20 % and 20 %): the binomial error decides, and it is flagged. */
	prof_free(&b[0]);
	prof_free(&b[1]);
	for (i = 0; i < 2; i++) {
		prof_init(&b[i]);
		add(&b[i], "m:f", 200, 'N');
		add(&b[i], "m:g", 800, 'N');
	}
	ck_assert_int_eq(nupp_diff_compute(&bi, &ni, NULL, &d), 0);
	r = row(d, "m:f");
	ck_assert_double_eq_tol(r->self.se, se_b, 1e-9);
	ck_assert_uint_eq(r->flags, NUPP_DIFF_GREW | NUPP_DIFF_REGRESSION);
	nupp_diff_free(d);
	for (i = 0; i < 2; i++) {
		prof_free(&b[i]);
		prof_free(&n[i]);
	}
}
END_TEST

START_TEST(new_blacklist_rows_are_regressions_unless_allowed)
{
	struct nupp_profile b, n;
	struct nupp_diff_opts o = { .sz = sizeof(o), .allow_aborts = true };
	struct nupp_diff *d;
	size_t i;
	int seen = 0;

	prof_init(&b);
	prof_init(&n);
	add(&b, "m:f", 1000, 'N');
	add(&n, "m:f", 1000, 'N');
	abort_row(&b, NUPP_SEV_WARN, "NYI: bytecode UCLO", "m.lua:3", 5);
	abort_row(&b, NUPP_SEV_BLACKLIST, "NYI: bytecode FNEW", "m.lua:7", 1);
	abort_row(&b, NUPP_SEV_WARN, "gone soon", "m.lua:9", 2);
	abort_row(&n, NUPP_SEV_WARN, "NYI: bytecode UCLO", "m.lua:3", 6);
	abort_row(&n, NUPP_SEV_BLACKLIST, "NYI: bytecode FNEW", "m.lua:7", 1);
	abort_row(&n, NUPP_SEV_BLACKLIST, "NYI: bytecode FNEW", "m.lua:12", 1);
	abort_row(&n, NUPP_SEV_WARN, "new warn", "m.lua:20", 3);
	d = diff1(&b, &n, NULL);
	ck_assert(d->aborts_compared);
	ck_assert_uint_eq(d->naborts, 5);
	/* The regression first. */
	ck_assert_str_eq(d->aborts[0].location, "m.lua:12");
	ck_assert_uint_eq(d->aborts[0].flags, NUPP_DIFF_ABORT_APPEARED | NUPP_DIFF_ABORT_REGRESSION);
	ck_assert_uint_eq(d->aborts[0].base, 0);
	ck_assert_uint_eq(d->aborts[0].new_, 1);
	for (i = 0; i < d->naborts; i++) {
		const struct nupp_diff_abort *a = &d->aborts[i];

		if (strcmp(a->location, "m.lua:7") == 0) {
			ck_assert_uint_eq(a->flags, 0);
			seen |= 1;
		} else if (strcmp(a->location, "m.lua:9") == 0) {
			ck_assert_uint_eq(a->flags, NUPP_DIFF_ABORT_DISAPPEARED);
			seen |= 2;
		} else if (strcmp(a->location, "m.lua:20") == 0) {
			ck_assert_uint_eq(a->flags, NUPP_DIFF_ABORT_APPEARED); /* a warn row: not a regression */
			seen |= 4;
		} else if (strcmp(a->location, "m.lua:3") == 0) {
			ck_assert_uint_eq(a->base, 5);
			ck_assert_uint_eq(a->new_, 6);
			seen |= 8;
		}
	}
	ck_assert_int_eq(seen, 15);
	ck_assert_int_eq(d->regressions, 1);
	nupp_diff_free(d);

	d = diff1(&b, &n, &o);
	ck_assert_uint_eq(d->aborts[0].flags & NUPP_DIFF_ABORT_REGRESSION, 0);
	ck_assert_int_eq(d->regressions, 0);
	nupp_diff_free(d);
	prof_free(&b);
	prof_free(&n);
}
END_TEST

/* Only one side counted benign aborts: info rows are left out, and the note says so. */
START_TEST(info_rows_are_left_out_when_one_side_has_them)
{
	struct nupp_profile b, n;
	struct nupp_diff *d;

	prof_init(&b);
	prof_init(&n);
	n.meta.include_benign = true;
	add(&b, "m:f", 100, 'N');
	add(&n, "m:f", 100, 'N');
	abort_row(&n, NUPP_SEV_INFO, "leaving loop in root trace", "m.lua:4", 9);
	abort_row(&n, NUPP_SEV_WARN, "NYI: bytecode UCLO", "m.lua:3", 1);
	d = diff1(&b, &n, NULL);
	ck_assert_uint_eq(d->naborts, 1);
	ck_assert_str_eq(d->aborts[0].location, "m.lua:3");
	ck_assert_ptr_nonnull(strstr(d->note, "--include-benign"));
	nupp_diff_free(d);
	prof_free(&b);
	prof_free(&n);
}
END_TEST

/* Expects nupp_diff_compute to refuse with a message holding want. */
static void expect_incompatible(const struct nupp_profile *b, const struct nupp_profile *n, const char *want)
{
	const struct nupp_profile *bp[] = { b }, *np[] = { n };
	const char *bn[] = { "base.json" }, *nn[] = { "new.json" };
	struct nupp_diff_input bi = { .profiles = bp, .names = bn, .n = 1 }, ni = { .profiles = np, .names = nn, .n = 1 };
	struct nupp_diff *d = (struct nupp_diff *)1;

	ck_assert_int_eq(nupp_diff_compute(&bi, &ni, NULL, &d), -EINVAL);
	ck_assert_ptr_null(d);
	ck_assert_msg(strstr(nupp_errmsg(), want), "message [%s] lacks [%s]", nupp_errmsg(), want);
}

START_TEST(incompatible_profiles_say_what_differs)
{
	struct nupp_profile b, n, empty;

	prof_init(&b);
	prof_init(&n);
	prof_init(&empty);
	add(&b, "m:f", 100, 'N');
	add(&n, "m:f", 100, 'N');
	n.meta.depth = 32;
	expect_incompatible(&b, &n, "cannot compare base.json and new.json: recorded with different --depth (64 and 32 frames)");
	n.meta.depth = 64;
	n.meta.aborts = false;
	expect_incompatible(&b, &n, "new.json was recorded with --no-aborts and base.json was not");
	n.meta.aborts = true;
	n.meta.root = "app";
	expect_incompatible(&b, &n, "different --root (none and app)");
	n.meta.root = NULL;
	n.meta.zone_filter = "frame";
	expect_incompatible(&b, &n, "different --zone (none and frame)");
	n.meta.zone_filter = NULL;
	n.meta.lines = true;
	expect_incompatible(&b, &n, "new.json was recorded with --lines (frames are source lines) and base.json "
				    "without (frames are functions)");
	n.meta.lines = false;
	n.meta.full_filenames = true;
	expect_incompatible(&b, &n, "new.json names chunks by full path (--full-filenames)");
	n.meta.full_filenames = false;
	expect_incompatible(&b, &empty, "new.json has no samples");
	/* Frequencies may differ: shares are normalised. */
	n.meta.frequency_hz = 999;
	nupp_diff_free(diff1(&b, &n, NULL));
	prof_free(&b);
	prof_free(&n);
}
END_TEST

/* --lines needs profiles recorded with --lines; on them it compares lines. */
START_TEST(lines_unit_needs_lines_profiles)
{
	struct nupp_profile b, n;
	struct nupp_diff_opts o = { .sz = sizeof(o), .unit = NUPP_DIFF_LINES };
	const struct nupp_profile *bp[] = { &b }, *np[] = { &n };
	const char *bn[] = { "base.json" };
	struct nupp_diff_input bi = { .profiles = bp, .names = bn, .n = 1 }, ni = { .profiles = np, .n = 1 };
	struct nupp_diff *d;

	prof_init(&b);
	prof_init(&n);
	add(&b, "m.lua:3;m.lua:12", 500, 'N');
	add(&b, "m.lua:3;m.lua:14", 500, 'N');
	add(&n, "m.lua:3;m.lua:12", 800, 'N');
	add(&n, "m.lua:3;m.lua:14", 200, 'N');
	ck_assert_int_eq(nupp_diff_compute(&bi, &ni, &o, &d), -EINVAL);
	ck_assert_ptr_nonnull(strstr(nupp_errmsg(), "cannot compare by line: base.json was recorded without --lines"));
	b.meta.lines = n.meta.lines = true;
	ck_assert_int_eq(nupp_diff_compute(&bi, &ni, &o, &d), 0);
	ck_assert(d->lines);
	ck_assert_str_eq(d->rows[0].key, "m.lua:12");
	ck_assert_uint_eq(d->rows[0].flags, NUPP_DIFF_GREW | NUPP_DIFF_REGRESSION);
	nupp_diff_free(d);
	prof_free(&b);
	prof_free(&n);
}
END_TEST

/* Collapsed stacks (no meta, no states, no aborts) compare by shares only. */
START_TEST(collapsed_input_compares_shares_only)
{
	struct nupp_profile b, n;
	struct nupp_diff *d;

	prof_init(&b);
	memset(&n, 0, sizeof(n)); /* as the reader leaves a collapsed file: no meta */
	add(&b, "m:f", 500, 'N');
	add(&b, "m:g", 500, 'I');
	ck_assert_int_eq(nupp_sample_set_add(&n.samples, "", "m:f", &(struct nupp_sample_row){ .count = 800 }), 0);
	ck_assert_int_eq(nupp_sample_set_add(&n.samples, "", "m:g", &(struct nupp_sample_row){ .count = 200 }), 0);
	abort_row(&b, NUPP_SEV_BLACKLIST, "x", "m.lua:1", 1);
	d = diff1(&b, &n, NULL);
	ck_assert(!d->aborts_compared);
	ck_assert(!d->states_compared);
	ck_assert_uint_eq(row(d, "m:f")->flags, NUPP_DIFF_GREW | NUPP_DIFF_REGRESSION);
	ck_assert_uint_eq(row(d, "m:g")->flags, NUPP_DIFF_SHRANK); /* not "less interpreted": no states */
	ck_assert_ptr_nonnull(strstr(d->note, "collapsed stacks have no VM states"));
	nupp_diff_free(d);
	prof_free(&b);
	prof_free(&n);
}
END_TEST

START_TEST(stacks_unit_compares_whole_stacks)
{
	struct nupp_profile b, n;
	struct nupp_diff_opts o = { .sz = sizeof(o), .unit = NUPP_DIFF_STACKS };
	struct nupp_diff *d;

	prof_init(&b);
	prof_init(&n);
	add(&b, "m:main;m:a;m:x", 500, 'N');
	add(&b, "m:main;m:b;m:x", 500, 'N');
	add(&n, "m:main;m:a;m:x", 200, 'N');
	add(&n, "m:main;m:b;m:x", 800, 'N');
	d = diff1(&b, &n, &o);
	ck_assert_uint_eq(d->n, 2);
	ck_assert_str_eq(d->rows[0].key, "m:main;m:b;m:x");
	ck_assert_double_eq_tol(d->rows[0].self.change, 30.0, EPS);
	ck_assert_uint_eq(d->rows[0].flags, NUPP_DIFF_GREW | NUPP_DIFF_REGRESSION);
	ck_assert_uint_eq(d->rows[1].flags, NUPP_DIFF_SHRANK);
	nupp_diff_free(d);
	/* As functions, x (the leaf of both) did not move. */
	d = diff1(&b, &n, NULL);
	ck_assert_uint_eq(row(d, "m:x")->flags, 0);
	ck_assert_uint_eq(row(d, "m:b")->flags & NUPP_DIFF_GREW, 0);
	ck_assert_double_eq_tol(row(d, "m:b")->total.change, 30.0, EPS);
	nupp_diff_free(d);
	prof_free(&b);
	prof_free(&n);
}
END_TEST

/* The writers: JSON and BMF parsed back by jansson, the text names what changed. */
START_TEST(writers_text_json_and_bmf)
{
	struct nupp_profile b, n;
	struct nupp_diff *d;
	char *buf = NULL;
	size_t len = 0;
	json_error_t je;
	json_t *doc, *rows, *m;
	FILE *f;

	prof_init(&b);
	prof_init(&n);
	add(&b, "m:main;m:a", 600, 'N');
	add(&b, "m:main;m:b", 400, 'N');
	add(&n, "m:main;m:a", 300, 'N');
	add(&n, "m:main;m:b", 700, 'I');
	abort_row(&n, NUPP_SEV_BLACKLIST, "NYI: bytecode FNEW", "m.lua:12", 1);
	d = diff1(&b, &n, NULL);
	ck_assert_int_eq(d->regressions, 2);

	f = open_memstream(&buf, &len);
	ck_assert_int_eq(nupp_diff_write_text(d, f, 0), 0);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(buf, "m:b  [grew, now interpreted]"));
	ck_assert_ptr_nonnull(strstr(buf, "m:a  [shrank]"));
	ck_assert_ptr_nonnull(strstr(buf, "+ blacklist      0 -> 1      NYI: bytecode FNEW at m.lua:12  [new blacklisting]"));
	ck_assert_ptr_nonnull(strstr(buf, "nupp-bpf diff: 2 regressions\n"));
	free(buf);

	f = open_memstream(&buf, &len);
	ck_assert_int_eq(nupp_diff_write_json(d, f), 0);
	fclose(f);
	doc = json_loads(buf, 0, &je);
	ck_assert_msg(doc, "%s", je.text);
	ck_assert_int_eq(json_integer_value(json_object_get(doc, "regressions")), 2);
	ck_assert_str_eq(json_string_value(json_object_get(doc, "unit")), "function");
	rows = json_object_get(doc, "rows");
	ck_assert_uint_eq(json_array_size(rows), 3);
	m = json_array_get(rows, 0);
	ck_assert_str_eq(json_string_value(json_object_get(m, "key")), "m:b");
	ck_assert(json_is_true(json_object_get(m, "regression")));
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(m, "flags"), 0)), "grew");
	ck_assert_double_eq_tol(json_real_value(json_object_get(json_object_get(m, "self"), "change")), 30.0, EPS);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(m, "new"), "interpreted")), 700);
	m = json_array_get(json_object_get(doc, "aborts"), 0);
	ck_assert(json_is_true(json_object_get(m, "regression")));
	ck_assert_str_eq(json_string_value(json_object_get(m, "location")), "m.lua:12");
	json_decref(doc);
	free(buf);

	f = open_memstream(&buf, &len);
	ck_assert_int_eq(nupp_diff_write_bmf(d, f), 0);
	fclose(f);
	doc = json_loads(buf, 0, &je);
	ck_assert_msg(doc, "%s", je.text);
	m = json_object_get(json_object_get(doc, "m:b"), "self-share");
	ck_assert_double_eq_tol(json_real_value(json_object_get(m, "value")), 70.0, EPS);
	ck_assert(json_real_value(json_object_get(m, "lower_value")) < 70.0);
	ck_assert(json_real_value(json_object_get(m, "upper_value")) > 70.0);
	m = json_object_get(json_object_get(doc, "m:b"), "interpreted-share");
	ck_assert_double_eq_tol(json_real_value(json_object_get(m, "value")), 70.0, EPS);
	ck_assert_ptr_null(json_object_get(doc, "m:main")); /* never a leaf: no self samples */
	m = json_object_get(doc, "nupp-bpf");
	ck_assert_double_eq_tol(json_real_value(json_object_get(json_object_get(m, "samples"), "value")), 1000.0, EPS);
	json_decref(doc);
	free(buf);
	nupp_diff_free(d);
	prof_free(&b);
	prof_free(&n);
}
END_TEST

NUPP_CHECK_MAIN("diff", 30, false, false, shares_changes_and_flags_are_exact, total_share_counts_a_recursive_frame_once,
		noise_guard_small_change_flagged_only_on_many_samples, threshold_holds_back_significant_small_changes,
		min_samples_holds_back_rare_functions, a_function_that_went_interpreted_is_a_regression,
		more_interpreted_without_crossing_is_not_now_interpreted, merged_runs_use_the_spread_of_their_shares,
		new_blacklist_rows_are_regressions_unless_allowed, info_rows_are_left_out_when_one_side_has_them,
		incompatible_profiles_say_what_differs, stacks_unit_compares_whole_stacks, lines_unit_needs_lines_profiles,
		collapsed_input_compares_shares_only, writers_text_json_and_bmf)
