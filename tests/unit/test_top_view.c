/* nupp-bpf top's figures (user/cli/top_view.c) on profiles built by hand: the interval is
 * the difference of two cumulative profiles, function by function; the table's order,
 * shares, VM states, rows and width are exact; frame ids stay put across updates. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nupp_check.h"
#include "nupp/profile.h"
#include "cli/top.h"

/* Adds n samples of stack in one state ('N' compiled, 'I' interpreted, 'C' C code). */
static void add(struct nupp_profile *p, const char *stack, __u64 n, char state)
{
	struct nupp_sample_row c = { .count = n };

	if (state == 'N')
		c.compiled = n;
	else if (state == 'I')
		c.interpreted = n;
	else
		c.ccode = n;
	ck_assert_int_eq(nupp_sample_set_add(&p->samples, "", stack, &c), 0);
}

/* The table of v as text, in a static buffer. */
static const char *table(const struct top_view *v, const struct top_head *h, int rows, int width)
{
	static char buf[8192];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	ck_assert_int_eq(top_view_write(v, h, rows, width, f), 0);
	fclose(f);
	return buf;
}

/* The line of the table that ends with name, or NULL. */
static const char *row(const char *t, const char *name, char *out, size_t size)
{
	const char *l = t;

	while (l && *l) {
		const char *e = strchr(l, '\n');
		size_t len = e ? (size_t)(e - l) : strlen(l), n = strlen(name);

		if (len > n + 2 && !strncmp(l + len - n - 2, "  ", 2) && !strncmp(l + len - n, name, n)) {
			snprintf(out, size, "%.*s", (int)len, l);
			return out;
		}
		l = e ? e + 1 : NULL;
	}
	return NULL;
}

START_TEST(the_interval_is_the_difference_of_two_profiles)
{
	struct nupp_profile p = { 0 };
	struct top_view v = { 0 };
	struct top_head h = { .pid = 42, .freq = 99, .aborts = true };
	char r[256];
	const char *t;

	/* First second: a 60, b 40 (interpreted), under main. */
	add(&p, "m.lua:main;m.lua:a", 60, 'N');
	add(&p, "m.lua:main;m.lua:b", 40, 'I');
	p.aborts.total_aborts = 3;
	ck_assert_int_eq(top_view_update(&v, &p, 1.0), 0);
	t = table(&v, &h, 0, 0);
	ck_assert_ptr_nonnull(strstr(t, "samples: 100 in the last 1.0 s, 100 in all; lost 0 (0.0%); trace aborts: "
					"3 in the last 1.0 s, 3 in all (0 blacklisted)\n"));
	ck_assert_str_eq(row(t, "m.lua:a", r, sizeof(r)),
			 "  60.0%   60.0%    60.0%   60.0%    100.0%    0.0%    0.0%    0.0%    0.0%  m.lua:a");
	/* Second second: b 90 more (a compiled part of it), a 10 more, one lost. */
	add(&p, "m.lua:main;m.lua:b", 80, 'I');
	add(&p, "m.lua:main;m.lua:b", 10, 'N');
	add(&p, "m.lua:main;m.lua:a", 10, 'N');
	p.samples.lost[0] = 1;
	p.aborts.total_aborts = 5;
	p.aborts.blacklisted = 1;
	ck_assert_int_eq(top_view_update(&v, &p, 2.0), 0);
	t = table(&v, &h, 0, 0);
	ck_assert_ptr_nonnull(strstr(t, "nupp-bpf top: PID 42 at 99 Hz, 2.0 s; functions by self\n"));
	ck_assert_ptr_nonnull(strstr(t, "samples: 100 in the last 1.0 s, 200 in all; lost 1 (0.5%); trace aborts: "
					"2 in the last 1.0 s, 5 in all (1 blacklisted)\n"));
	/* b leads the interval (90 of 100), a the first second; main has no self samples. */
	ck_assert_str_eq(row(t, "m.lua:b", r, sizeof(r)),
			 "  90.0%   90.0%    65.0%   65.0%     11.1%   88.9%    0.0%    0.0%    0.0%  m.lua:b");
	ck_assert_str_eq(row(t, "m.lua:a", r, sizeof(r)),
			 "  10.0%   10.0%    35.0%   35.0%    100.0%    0.0%    0.0%    0.0%    0.0%  m.lua:a");
	ck_assert_str_eq(row(t, "m.lua:main", r, sizeof(r)),
			 "   0.0%  100.0%     0.0%  100.0%         -       -       -       -       -  m.lua:main");
	ck_assert(strstr(t, "m.lua:b\n") < strstr(t, "m.lua:a\n"));
	/* By total: main first (100 %), then b, a. */
	h.by_total = true;
	t = table(&v, &h, 2, 0);
	ck_assert_ptr_nonnull(strstr(t, "functions by total"));
	ck_assert(strstr(t, "m.lua:main\n") < strstr(t, "m.lua:b\n"));
	ck_assert_ptr_null(strstr(t, "m.lua:a\n")); /* two rows only */
	/* An interval with no sample: every interval share is "-", the run's stay. */
	ck_assert_int_eq(top_view_update(&v, &p, 3.0), 0);
	h.by_total = false;
	t = table(&v, &h, 0, 0);
	ck_assert_str_eq(row(t, "m.lua:b", r, sizeof(r)),
			 "      -       -    65.0%   65.0%         -       -       -       -       -  m.lua:b");
	top_view_free(&v);
	nupp_profile_free(&p);
}
END_TEST

START_TEST(rows_are_cut_to_the_width_and_keys_drawn_on_a_terminal)
{
	struct nupp_profile p = { 0 };
	struct top_view v = { 0 };
	struct top_head h = { .pid = 7, .target = "luajit app.lua", .freq = 499, .lines = true, .interactive = true };
	const char *t, *l;

	add(&p, "app.lua:12", 5, 'C');
	ck_assert_int_eq(top_view_update(&v, &p, 0.5), 0);
	t = table(&v, &h, 0, 40);
	for (l = t; *l; l = strchr(l, '\n') + 1)
		ck_assert_int_le(strchr(l, '\n') - l, 40);
	ck_assert_ptr_nonnull(strstr(t, "nupp-bpf top: PID 7 (luajit app.lua) at"));
	ck_assert_ptr_nonnull(strstr(t, "keys: s sort by self  t sort by total  l"));
	t = table(&v, &h, 0, 0);
	ck_assert_ptr_nonnull(strstr(t, "source lines by self"));
	ck_assert_ptr_nonnull(strstr(t, "   0.0%    0.0%  100.0%    0.0%    0.0%  app.lua:12\n"));
	top_view_free(&v);
	nupp_profile_free(&p);
}
END_TEST

START_TEST(an_empty_profile_says_so)
{
	struct nupp_profile p = { 0 };
	struct top_view v = { 0 };
	struct top_head h = { .pid = 1, .freq = 99 };

	ck_assert_int_eq(top_view_update(&v, &p, 1.0), 0);
	ck_assert_ptr_nonnull(strstr(table(&v, &h, 0, 0), "(no samples yet)\n"));
	top_view_free(&v);
}
END_TEST

NUPP_CHECK_MAIN("top_view", 30, false, false, the_interval_is_the_difference_of_two_profiles,
		rows_are_cut_to_the_width_and_keys_drawn_on_a_terminal, an_empty_profile_says_so)
