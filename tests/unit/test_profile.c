/* The aggregate and its writers: merging, ordering, the zone and root filters of the
 * seed's SampleOptions, collapsed text and the JSON profile read back by jansson. */
#include <check.h>

#include "nupp_check.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/profile.h"

/* Adds n samples in one state ('N' compiled, 'I' interpreted, 'C' C code). */
static void add(struct nupp_sample_set *s, const char *zone, const char *stack, __u64 n, char state)
{
	struct nupp_sample_row c = { .count = n };

	if (state == 'N')
		c.compiled = n;
	else if (state == 'I')
		c.interpreted = n;
	else
		c.ccode = n;
	ck_assert_int_eq(nupp_sample_set_add(s, zone, stack, &c), 0);
}

/* Collapsed text of a set, in a static buffer. */
static const char *collapsed(const struct nupp_sample_set *s)
{
	static char buf[4096];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	ck_assert_int_eq(nupp_write_collapsed(s, f), 0);
	fclose(f);
	return buf;
}

START_TEST(rows_merge_and_sort_by_count)
{
	struct nupp_sample_set s = { 0 };

	add(&s, "", "main.lua:main;main.lua:a", 3, 'I');
	add(&s, "", "main.lua:main;main.lua:b", 5, 'N');
	add(&s, "", "main.lua:main;main.lua:a", 4, 'N');
	add(&s, "frame", "main.lua:main;main.lua:a", 1, 'C');
	ck_assert_uint_eq(s.n, 3);
	ck_assert_uint_eq(s.samples, 13);
	nupp_sample_set_sort(&s);
	ck_assert_str_eq(s.rows[0].stack, "main.lua:main;main.lua:a");
	ck_assert_uint_eq(s.rows[0].count, 7);
	ck_assert_uint_eq(s.rows[0].interpreted, 3);
	ck_assert_uint_eq(s.rows[0].compiled, 4);
	ck_assert_str_eq(s.rows[1].stack, "main.lua:main;main.lua:b");
	ck_assert_str_eq(s.rows[2].zone_path, "frame");
	ck_assert_str_eq(collapsed(&s), "main.lua:main;main.lua:a 7\n"
					"main.lua:main;main.lua:b 5\n"
					"main.lua:main;main.lua:a 1\n");
	nupp_sample_set_free(&s);
}
END_TEST

START_TEST(zone_prefix_keeps_the_subtree)
{
	struct nupp_sample_set s = { 0 }, out = { 0 };

	add(&s, "frame/render", "m.lua:r", 4, 'N');
	add(&s, "frame/update", "m.lua:u", 2, 'N');
	add(&s, "", "m.lua:idle", 9, 'I');
	s.lost[NUPP_LOST_READ_FAULT] = 3;
	ck_assert_int_eq(nupp_sample_set_filter(&s, "frame/render", NULL, &out), 0);
	ck_assert_uint_eq(out.n, 1);
	ck_assert_uint_eq(out.samples, 4);
	ck_assert_uint_eq(out.lost[NUPP_LOST_READ_FAULT], 3);
	nupp_sample_set_free(&out);
	ck_assert_int_eq(nupp_sample_set_filter(&s, "nomatch", NULL, &out), 0);
	ck_assert_uint_eq(out.n, 0);
	ck_assert_str_eq(collapsed(&out), "");
	nupp_sample_set_free(&out);
	nupp_sample_set_free(&s);
}
END_TEST

START_TEST(root_cuts_below_outermost_frame_and_merges)
{
	struct nupp_sample_set s = { 0 }, out = { 0 };

	/* Two loaders under the program: equal after the cut, so merged. */
	add(&s, "", "boot.lua:main;[C]:pcall;app.lua:main;app.lua:work", 3, 'N');
	add(&s, "", "loader.lua:run;app.lua:main;app.lua:work", 2, 'I');
	/* The outermost frame of app.lua, not the innermost. */
	add(&s, "", "boot.lua:main;app.lua:main;lib.lua:cb;app.lua:inner", 1, 'N');
	/* No frame of app.lua: kept whole. */
	add(&s, "", "boot.lua:main;boot.lua:idle", 4, 'C');
	/* A module name that is only a prefix of another does not match. */
	add(&s, "", "app.luax:main;app.luax:f", 1, 'N');
	ck_assert_int_eq(nupp_sample_set_filter(&s, NULL, "app.lua", &out), 0);
	ck_assert_str_eq(collapsed(&out), "app.lua:main;app.lua:work 5\n"
					  "boot.lua:main;boot.lua:idle 4\n"
					  "app.lua:main;lib.lua:cb;app.lua:inner 1\n"
					  "app.luax:main;app.luax:f 1\n");
	ck_assert_uint_eq(out.rows[0].compiled, 3);
	ck_assert_uint_eq(out.rows[0].interpreted, 2);
	nupp_sample_set_free(&out);
	nupp_sample_set_free(&s);
}
END_TEST

/* A synthetic stack of row i: distinct for every i, 6 frames, sharing prefixes. */
static void synth_stack(char *buf, size_t size, unsigned i)
{
	snprintf(buf, size, "main.lua:main;m%u.lua:a;m%u.lua:b%u;lib.lua:f%u;lib.lua:g;leaf.lua:x%u", i % 7, i % 13,
		 i % 101, i / 3, i);
}

/* 100k distinct stacks (each added twice, in two orders, a sort in between and rows in
 * two zones), every count exact; then the root cut merges them into a few rows. */
START_TEST(hundred_thousand_distinct_stacks)
{
	enum { N = 100000 };
	struct nupp_sample_set s = { 0 }, out = { 0 };
	char buf[256];
	unsigned i;
	size_t r;

	for (i = 0; i < N; i++) {
		synth_stack(buf, sizeof(buf), i);
		add(&s, i % 2 ? "z" : "", buf, i % 5 + 1, 'N');
	}
	ck_assert_uint_eq(s.n, N);
	nupp_sample_set_sort(&s); /* the index must follow the rows */
	for (i = N; i-- > 0;) {
		synth_stack(buf, sizeof(buf), i);
		add(&s, i % 2 ? "z" : "", buf, 1, 'I');
	}
	/* the same stack in another zone is another row */
	synth_stack(buf, sizeof(buf), 7);
	add(&s, "other", buf, 1000, 'C');
	ck_assert_uint_eq(s.n, N + 1);
	for (r = 0; r < s.n; r++) {
		const struct nupp_sample_row *row = &s.rows[r];

		if (strcmp(row->zone_path, "other") == 0) {
			ck_assert_uint_eq(row->count, 1000);
			continue;
		}
		i = (unsigned)strtoul(strrchr(row->stack, 'x') + 1, NULL, 10);
		synth_stack(buf, sizeof(buf), i);
		ck_assert_str_eq(row->stack, buf);
		ck_assert_str_eq(row->zone_path, i % 2 ? "z" : "");
		ck_assert_uint_eq(row->compiled, i % 5 + 1);
		ck_assert_uint_eq(row->interpreted, 1);
		ck_assert_uint_eq(row->count, i % 5 + 2);
	}
	/* sum over i of (i % 5 + 2), and the 1000 */
	ck_assert_uint_eq(s.samples, (__u64)N / 5 * (2 + 3 + 4 + 5 + 6) + 1000);

	/* no filter: every row copied as it is */
	ck_assert_int_eq(nupp_sample_set_filter(&s, NULL, NULL, &out), 0);
	ck_assert_uint_eq(out.n, N + 1);
	ck_assert_uint_eq(out.samples, s.samples);
	ck_assert_uint_eq(out.rows[0].count, 1000);
	nupp_sample_set_free(&out);
	/* cut at lib.lua: "lib.lua:f<i/3>;lib.lua:g;leaf.lua:x<i>" stays distinct */
	ck_assert_int_eq(nupp_sample_set_filter(&s, "z", "lib.lua", &out), 0);
	ck_assert_uint_eq(out.n, N / 2);
	nupp_sample_set_free(&out);
	/* cut at leaf.lua: one row per zone and leaf */
	ck_assert_int_eq(nupp_sample_set_filter(&s, "", "leaf.lua", &out), 0);
	ck_assert_uint_eq(out.n, N + 1);
	nupp_sample_set_free(&out);
	nupp_sample_set_free(&s);
}
END_TEST

/* Rows taken from per-drain sets (the session's merge: zone ids renamed, some rows kept)
 * give exactly the rows and totals that adding copies gives; the sets taken from hold
 * nothing afterwards, and a set that grew (rehashed from kept hashes) still finds every
 * row. */
START_TEST(rows_taken_give_the_same_totals)
{
	enum { N = 3000, DRAINS = 4 };
	struct nupp_sample_set by_add = { 0 }, by_take = { 0 };
	char buf[256];
	unsigned d, i;
	size_t r;

	for (d = 0; d < DRAINS; d++) {
		struct nupp_sample_set raw = { 0 };

		/* A drain: rows of two pids, some twice, zone "#1" (renamed) or "" (kept). */
		for (i = d * 500; i < d * 500 + N; i++) {
			struct nupp_sample_row c = { .pid = 10 + (pid_t)(i % 2), .tid = 7, .count = i % 3 + 1,
						     .compiled = i % 3 + 1 };

			synth_stack(buf, sizeof(buf), i % 2000);
			ck_assert_int_eq(nupp_sample_set_add(&raw, i % 4 ? "" : "#1", buf, &c), 0);
		}
		for (r = 0; r < raw.n; r++) {
			const char *zone = raw.rows[r].zone_path[0] == '#' ? "frame/update" : NULL;

			ck_assert_int_eq(nupp_sample_set_add(&by_add, zone ? zone : raw.rows[r].zone_path,
							     raw.rows[r].stack, &raw.rows[r]), 0);
		}
		for (r = 0; r < raw.n; r++) {
			const char *zone = raw.rows[r].zone_path[0] == '#' ? "frame/update" : NULL;

			ck_assert_int_eq(nupp_sample_set_take(&by_take, &raw, r, zone), 0);
			ck_assert_ptr_null(raw.rows[r].stack);
			ck_assert_uint_eq(raw.rows[r].count, 0);
			/* taken already: nothing more */
			ck_assert_int_eq(nupp_sample_set_take(&by_take, &raw, r, zone), 0);
		}
		nupp_sample_set_free(&raw);
	}
	/* Drains overlap by 2,500 of 3,000 stack numbers, folded onto 2,000 stacks. */
	ck_assert_uint_eq(by_take.n, by_add.n);
	ck_assert_uint_eq(by_take.samples, by_add.samples);
	ck_assert_uint_eq(by_take.samples, 4 * ((N / 3) * (1 + 2 + 3)));
	for (r = 0; r < by_add.n; r++) {
		const struct nupp_sample_row *a = &by_add.rows[r], *t = &by_take.rows[r];

		ck_assert_int_eq(a->pid, t->pid);
		ck_assert_int_eq(a->tid, t->tid);
		ck_assert_str_eq(a->zone_path, t->zone_path);
		ck_assert_str_eq(a->stack, t->stack);
		ck_assert_uint_eq(a->count, t->count);
		ck_assert_uint_eq(a->compiled, t->compiled);
	}
	/* Every row is found again after the growths (one more sample on each). */
	for (r = 0; r < by_add.n; r++) {
		struct nupp_sample_row c = { .pid = by_add.rows[r].pid, .tid = 7, .count = 1 };

		ck_assert_int_eq(nupp_sample_set_add(&by_take, by_add.rows[r].zone_path, by_add.rows[r].stack, &c), 0);
	}
	ck_assert_uint_eq(by_take.n, by_add.n);
	ck_assert_uint_eq(by_take.samples, by_add.samples + by_add.n);
	nupp_sample_set_free(&by_add);
	nupp_sample_set_free(&by_take);
}
END_TEST

/* Rows that merge under a root cut: 100k stacks onto 7 rows, counts summed exactly. */
START_TEST(root_cut_merges_many_rows)
{
	enum { N = 100000 };
	struct nupp_sample_set s = { 0 }, out = { 0 };
	char buf[128];
	__u64 want[7] = { 0 };
	unsigned i, k;

	for (i = 0; i < N; i++) {
		snprintf(buf, sizeof(buf), "boot%u.lua:main;app.lua:f%u;x.lua:y", i, i % 7);
		add(&s, "", buf, i % 3 + 1, 'N');
		want[i % 7] += i % 3 + 1;
	}
	ck_assert_int_eq(nupp_sample_set_filter(&s, NULL, "app.lua", &out), 0);
	ck_assert_uint_eq(out.n, 7);
	ck_assert_uint_eq(out.samples, s.samples);
	for (k = 0; k < 7; k++) {
		snprintf(buf, sizeof(buf), "app.lua:f%u;x.lua:y", k);
		for (i = 0; i < out.n && strcmp(out.rows[i].stack, buf); i++)
			;
		ck_assert_uint_lt(i, out.n);
		ck_assert_uint_eq(out.rows[i].count, want[k]);
		ck_assert_uint_eq(out.rows[i].compiled, want[k]);
	}
	nupp_sample_set_free(&out);
	nupp_sample_set_free(&s);
}
END_TEST

START_TEST(json_profile_reads_back)
{
	struct nupp_sample_set s = { 0 };
	struct nupp_abort_set a = { 0 };
	pid_t pids[] = { 4242 };
	struct nupp_profile_meta m = { .command = "nupp-bpf record -p 4242", .pids = pids, .npids = 1,
				       .frequency_hz = 99, .duration_sec = 2.5, .backend = "bpf",
				       .luajit = "test", .depth = 64, .aborts = true };
	char *buf = NULL;
	size_t len = 0;
	json_error_t jerr;
	json_t *doc, *row;
	FILE *f;

	add(&s, "", "a.lua:f;\"q\\uote\" x.lua:g", 7, 'N');
	s.lost[NUPP_LOST_TRUNCATED] = 2;
	ck_assert_int_eq(nupp_abort_set_add(&a, NUPP_SEV_WARN, "NYI: bytecode FNEW", "a.lua:3", "", 5), 0);
	ck_assert_int_eq(nupp_abort_set_add(&a, NUPP_SEV_BLACKLIST, "NYI: bytecode UCLO", "a.lua:9", "", 1), 0);
	a.total_aborts = 6;
	a.blacklisted = 1;
	nupp_abort_set_sort(&a);
	f = open_memstream(&buf, &len);
	ck_assert_int_eq(nupp_write_profile_json(&m, &s, &a, f), 0);
	fclose(f);
	doc = json_loads(buf, 0, &jerr);
	ck_assert_msg(doc, "invalid JSON: %s", jerr.text);
	ck_assert_int_eq(json_integer_value(json_object_get(doc, "version")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(doc, "meta"), "samples")), 7);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(json_object_get(doc, "meta"), "pids"), 0)),
			 4242);
	ck_assert_int_eq(
		json_integer_value(json_object_get(json_object_get(json_object_get(doc, "meta"), "lost"), "truncated")),
		2);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(doc, "meta"), "blacklisted")), 1);
	row = json_array_get(json_object_get(doc, "samples"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(row, "stack")), "a.lua:f;\"q\\uote\" x.lua:g");
	ck_assert_int_eq(json_integer_value(json_object_get(row, "compiled")), 7);
	ck_assert_int_eq(json_integer_value(json_object_get(row, "cCode")), 0);
	row = json_array_get(json_object_get(doc, "aborts"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(row, "severity")), "blacklist");
	ck_assert_str_eq(json_string_value(json_object_get(row, "location")), "a.lua:9");
	row = json_array_get(json_object_get(doc, "aborts"), 1);
	ck_assert_str_eq(json_string_value(json_object_get(row, "reason")), "NYI: bytecode FNEW");
	ck_assert_int_eq(json_integer_value(json_object_get(row, "count")), 5);
	json_decref(doc);
	free(buf);
	nupp_sample_set_free(&s);
	nupp_abort_set_free(&a);
}
END_TEST

/* A frame table is named by its id from its first entry until it is freed: a copy of
 * the struct (the session hands its table to each drain that way) is the same table, any
 * other table another, a freed table a new one. The sampler keeps a stack's name for the
 * table it recorded the stack's frames in, by this id. */
START_TEST(a_frame_table_keeps_its_id_until_freed)
{
	struct nupp_frame_table a = { 0 }, b = { 0 }, moved;
	unsigned long long id;

	ck_assert_uint_eq(a.id, 0);
	ck_assert_int_eq(nupp_frame_table_add(&a, "a.lua:f", "a.lua", 1, 3), 0);
	id = a.id;
	ck_assert_uint_ne(id, 0);
	ck_assert_int_eq(nupp_frame_table_add(&a, "a.lua:g", "a.lua", 5, 9), 0);
	ck_assert_uint_eq(a.id, id);
	moved = a;
	memset(&a, 0, sizeof(a));
	ck_assert_uint_eq(moved.id, id);
	ck_assert_int_eq(nupp_frame_table_add(&b, "b.lua:h", "b.lua", 2, 4), 0);
	ck_assert_uint_ne(b.id, 0);
	ck_assert_uint_ne(b.id, id);
	ck_assert_int_eq(nupp_frame_table_merge(&moved, &b), 0);
	ck_assert_uint_eq(moved.id, id);
	ck_assert_uint_eq(moved.n, 3);
	nupp_frame_table_free(&moved);
	ck_assert_uint_eq(moved.id, 0);
	ck_assert_int_eq(nupp_frame_table_add(&moved, "a.lua:f", "a.lua", 1, 3), 0);
	ck_assert_uint_ne(moved.id, 0);
	ck_assert_uint_ne(moved.id, id);
	ck_assert_uint_ne(moved.id, b.id);
	nupp_frame_table_free(&moved);
	nupp_frame_table_free(&b);
}
END_TEST

/* 60 s: the 100k-row tests take about a second on a machine shared with builds. */
NUPP_CHECK_MAIN("profile", 60, false, false,
		rows_merge_and_sort_by_count,
		zone_prefix_keeps_the_subtree,
		root_cuts_below_outermost_frame_and_merges,
		hundred_thousand_distinct_stacks, rows_taken_give_the_same_totals, root_cut_merges_many_rows,
		json_profile_reads_back, a_frame_table_keeps_its_id_until_freed)
