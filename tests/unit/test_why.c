/* The --why join on synthetic profiles shaped like real recordings: a blacklisted loop
 * in a --lines profile (its block, shares and the abort at its line), the same program
 * recorded by function (joined by file), an abort in a function the loop calls, hot
 * interpreted code with no abort, nothing to explain, the share threshold, full paths
 * against basename locations, and the JSON read back by jansson. */
#include <check.h>

#include "nupp_check.h"
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/why.h"

/* A profile made in memory. */
static void prof_init(struct nupp_profile *p)
{
	memset(p, 0, sizeof(*p));
	p->meta.depth = 64;
	p->meta.aborts = true;
}

/* Adds a stack with its VM-state split: compiled, interpreted, C, GC, JIT compiler. */
static void add(struct nupp_profile *p, const char *stack, __u64 n, __u64 i, __u64 c, __u64 g, __u64 j)
{
	struct nupp_sample_row r = { .count = n + i + c + g + j, .compiled = n, .interpreted = i, .ccode = c,
				     .collecting = g, .compiling = j };

	ck_assert_int_eq(nupp_sample_set_add(&p->samples, "", stack, &r), 0);
}

/* Adds an abort row and counts it in the totals as the trace channel does. */
static void abort_row(struct nupp_profile *p, enum nupp_severity sev, const char *reason, const char *loc, __u64 n)
{
	ck_assert_int_eq(nupp_abort_set_add(&p->aborts, sev, reason, loc, "", n), 0);
	p->aborts.total_aborts += n;
	if (sev == NUPP_SEV_BLACKLIST)
		p->aborts.blacklisted += n;
}

/* Frees a profile made here. */
static void prof_free(struct nupp_profile *p)
{
	nupp_sample_set_free(&p->samples);
	nupp_abort_set_free(&p->aborts);
}

/* The text of a result, in a static buffer. */
static const char *text(const struct nupp_why *w)
{
	static char buf[8192];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	ck_assert_int_eq(nupp_why_write_text(w, f), 0);
	fclose(f);
	return buf;
}

/* Asserts that s contains want. */
#define ck_contains(s, want) ck_assert_msg(strstr((s), (want)), "[%s] lacks [%s]", (s), (want))

/* The program of the README's example, recorded with --lines (these are the rows
 * `record --lines` wrote for it): work() at lines 1-7 compiles; bad() at 9-15 creates a
 * closure in its loop (line 12), aborts "NYI: bytecode FNEW" until blacklisted. */
static void blacklisted_loop_lines(struct nupp_profile *p)
{
	prof_init(p);
	add(p, "pmain;bl.lua:21;bl.lua:12", 0, 29, 0, 358, 0);
	add(p, "pmain;bl.lua:21;bl.lua:13", 0, 216, 0, 0, 0);
	add(p, "pmain;bl.lua:21;bl.lua:4", 82, 0, 0, 0, 0);
	add(p, "pmain;bl.lua:21;bl.lua:13;bl.lua:12", 23, 45, 0, 0, 0);
	add(p, "pmain;bl.lua:21;bl.lua:1", 60, 0, 0, 0, 0);
	add(p, "pmain;bl.lua:21;bl.lua:11", 0, 11, 0, 0, 0);
	add(p, "pmain;bl.lua:21;bl.lua:3", 2, 0, 0, 0, 0);
	add(p, "pmain;bl.lua:20;os.clock", 0, 0, 1, 0, 0);
	add(p, "pmain;bl.lua:21;bl.lua:9", 0, 0, 1, 0, 0);
	abort_row(p, NUPP_SEV_BLACKLIST, "NYI: bytecode FNEW", "bl.lua:12", 1);
	abort_row(p, NUPP_SEV_WARN, "NYI: bytecode FNEW", "bl.lua:12", 18);
	nupp_abort_set_sort(&p->aborts);
}

START_TEST(a_blacklisted_loop_is_named_with_its_share_and_reason)
{
	struct nupp_why_opts o = { .sz = sizeof(o), .lines = true };
	struct nupp_profile p;
	struct nupp_why *w;
	const struct nupp_why_item *it;
	const char *t;

	blacklisted_loop_lines(&p);
	ck_assert_int_eq(nupp_why_compute(&p, &o, &w), 0);
	ck_assert_uint_eq(w->samples, 828);
	ck_assert_uint_eq(w->n, 1);
	it = &w->items[0];
	/* Lines 11-13: 11 (11 I), 12 (29 I + 358 GC, and 23 N + 45 I in the closure), 13 (216 I).
	 * Line 9 (one C sample, not a call site) and the compiled lines 1-4 are not in it. */
	ck_assert_str_eq(it->what, "bl.lua:11-13");
	ck_assert_str_eq(it->file, "bl.lua");
	ck_assert_int_eq(it->first, 11);
	ck_assert_int_eq(it->last, 13);
	ck_assert_uint_eq(it->samples, 682);
	ck_assert_uint_eq(it->interpreted, 301);
	ck_assert_uint_eq(it->compiled, 23);
	ck_assert_uint_eq(it->collecting, 358);
	ck_assert_uint_eq(it->inclusive, 682);
	ck_assert_uint_eq(it->naborts, 2);
	ck_assert_int_eq(it->aborts[0].row->severity, NUPP_SEV_BLACKLIST);
	ck_assert_int_eq(it->aborts[0].join, NUPP_WHY_WITHIN);
	ck_assert_uint_eq(it->aborts[1].row->count, 18);
	ck_assert_uint_eq(w->nunmatched, 0);
	t = text(w);
	ck_contains(t, "Hot code that ran interpreted (828 samples; 19 trace aborts, 1 blacklisted):");
	ck_contains(t, "1. the code at bl.lua:11-13 took 82.4 % of the samples, 93 % of its Lua time interpreted\n");
	ck_contains(t, "   its samples: 44.1 % interpreted, 3.4 % compiled, 0.0 % C, 52.5 % GC, 0.0 % JIT compiler\n");
	ck_contains(t, "   why: NYI: bytecode FNEW at bl.lua:12, blacklisted\n");
	ck_contains(t, "   why: NYI: bytecode FNEW at bl.lua:12 (18 aborts)\n");
	ck_assert_ptr_null(strstr(t, "nothing to explain"));
	nupp_why_free(w);
	prof_free(&p);
}
END_TEST

/* The closure defined on the loop's line 12 runs there too, in its own frame, and gets
 * compiled: its compiled samples on line 12 are another function's and do not split the
 * loop's block (lines are keyed with their callers). */
START_TEST(a_compiled_closure_on_the_loop_line_does_not_split_the_loop)
{
	struct nupp_why_opts o = { .sz = sizeof(o), .lines = true };
	struct nupp_profile p;
	struct nupp_why *w;

	prof_init(&p);
	add(&p, "pmain;bl.lua:21;bl.lua:12", 0, 29, 0, 358, 0);
	add(&p, "pmain;bl.lua:21;bl.lua:13", 0, 216, 0, 0, 0);
	add(&p, "pmain;bl.lua:21;bl.lua:11", 0, 11, 0, 0, 0);
	add(&p, "pmain;bl.lua:21;bl.lua:13;bl.lua:12", 90, 10, 0, 0, 0);
	add(&p, "pmain;bl.lua:21;bl.lua:4", 82, 0, 0, 0, 0);
	abort_row(&p, NUPP_SEV_BLACKLIST, "NYI: bytecode FNEW", "bl.lua:12", 1);
	ck_assert_int_eq(nupp_why_compute(&p, &o, &w), 0);
	ck_assert_uint_eq(w->n, 1);
	ck_assert_str_eq(w->items[0].what, "bl.lua:11-13");
	ck_assert_uint_eq(w->items[0].samples, 614); /* the loop's own lines; the closure is compiled */
	ck_assert_uint_eq(w->items[0].compiled, 0);
	ck_assert_uint_eq(w->items[0].inclusive, 714); /* with the closure it calls */
	ck_assert_uint_eq(w->items[0].naborts, 1);
	nupp_why_free(w);
	prof_free(&p);
}
END_TEST

/* The same program recorded without --lines: functions, joined with the aborts of their file. */
START_TEST(without_lines_functions_are_joined_by_file)
{
	struct nupp_profile p;
	struct nupp_why *w;
	const char *t;

	prof_init(&p);
	add(&p, "pmain;bl.lua:0;bl.lua:bad", 0, 229, 0, 381, 1);
	add(&p, "pmain;bl.lua:0;bl.lua:work", 161, 0, 0, 0, 0);
	add(&p, "pmain;bl.lua:0;bl.lua:bad;bl.lua:f", 13, 41, 0, 0, 0);
	add(&p, "pmain;bl.lua:0;os.clock", 0, 0, 1, 0, 0);
	add(&p, "pmain;other.lua:run", 0, 100, 0, 0, 0);
	abort_row(&p, NUPP_SEV_BLACKLIST, "NYI: bytecode FNEW", "bl.lua:12", 1);
	abort_row(&p, NUPP_SEV_WARN, "NYI: bytecode FNEW", "bl.lua:12", 18);
	ck_assert_int_eq(nupp_why_compute(&p, NULL, &w), 0);
	ck_assert_uint_eq(w->n, 3);
	ck_assert_str_eq(w->items[0].what, "bl.lua:bad");
	ck_assert_uint_eq(w->items[0].samples, 611);
	ck_assert_uint_eq(w->items[0].inclusive, 665);
	ck_assert_uint_eq(w->items[0].naborts, 2);
	ck_assert_int_eq(w->items[0].aborts[0].join, NUPP_WHY_FILE);
	ck_assert_str_eq(w->items[1].what, "other.lua:run");
	ck_assert_uint_eq(w->items[1].naborts, 0);
	ck_assert_str_eq(w->items[2].what, "bl.lua:f");
	ck_assert_uint_eq(w->items[2].naborts, 2);
	t = text(w);
	ck_contains(t, "1. the function bl.lua:bad took 65.9 % of the samples (71.7 % with what it calls), 100 % of its Lua "
		       "time interpreted\n");
	ck_contains(t, "   in the same file: NYI: bytecode FNEW at bl.lua:12, blacklisted\n");
	ck_contains(t, "2. the function other.lua:run took 10.8 % of the samples, 100 % of its Lua time interpreted\n"
		       "   its samples: 100.0 % interpreted, 0.0 % compiled, 0.0 % C, 0.0 % GC, 0.0 % JIT compiler\n"
		       "   no trace abort recorded there: the JIT may be off for it (jit.off)");
	ck_contains(t, "aborts are joined by file. Record with --lines");
	nupp_why_free(w);
	prof_free(&p);
}
END_TEST

/* A loop at main.lua:5-6 calls lib.lua's f, where the trace aborts: the abort explains
 * the callee's lines (within) and the loop (in code it calls). */
START_TEST(an_abort_in_a_called_function_explains_the_loop_too)
{
	struct nupp_why_opts o = { .sz = sizeof(o), .lines = true };
	struct nupp_profile p;
	struct nupp_why *w;
	const char *t;

	prof_init(&p);
	add(&p, "main.lua:30;main.lua:5", 0, 100, 0, 0, 0);
	add(&p, "main.lua:30;main.lua:6;/usr/share/lua/lib.lua:10", 0, 300, 0, 0, 0);
	add(&p, "main.lua:30;main.lua:6;/usr/share/lua/lib.lua:11", 0, 100, 0, 0, 0);
	add(&p, "main.lua:30;main.lua:20", 500, 0, 0, 0, 0);
	abort_row(&p, NUPP_SEV_BLACKLIST, "NYI: bytecode UCLO", "lib.lua:10", 1);
	abort_row(&p, NUPP_SEV_WARN, "elsewhere", "main.lua:40", 2);
	ck_assert_int_eq(nupp_why_compute(&p, &o, &w), 0);
	ck_assert_uint_eq(w->n, 2);
	ck_assert_str_eq(w->items[0].what, "/usr/share/lua/lib.lua:10-11");
	ck_assert_uint_eq(w->items[0].interpreted, 400);
	ck_assert_int_eq(w->items[0].aborts[0].join, NUPP_WHY_WITHIN);
	/* main.lua:6 is only a call site: it extends the loop's block. */
	ck_assert_str_eq(w->items[1].what, "main.lua:5-6");
	ck_assert_uint_eq(w->items[1].samples, 100);
	ck_assert_uint_eq(w->items[1].inclusive, 500);
	ck_assert_uint_eq(w->items[1].naborts, 1);
	ck_assert_int_eq(w->items[1].aborts[0].join, NUPP_WHY_CALLEE);
	ck_assert_uint_eq(w->nunmatched, 1);
	ck_assert_str_eq(w->unmatched[0]->location, "main.lua:40");
	t = text(w);
	ck_contains(t, "2. the code at main.lua:5-6 took 10.0 % of the samples (50.0 % with what it calls)");
	ck_contains(t, "   why (in code it calls): NYI: bytecode UCLO at lib.lua:10, blacklisted\n");
	ck_contains(t, "Trace aborts not joined to the code above:\n   elsewhere at main.lua:40 (2 aborts)\n");
	nupp_why_free(w);
	prof_free(&p);
}
END_TEST

/* A function under jit.off: LuaJIT reports it at its first line (22), above the hot
 * loop in its body (24). The nearest abort above a block, with nothing sampled between,
 * joins it; one with compiled code between, or a farther one, does not. */
START_TEST(an_abort_at_the_start_of_the_function_joins_from_above)
{
	struct nupp_why_opts o = { .sz = sizeof(o), .lines = true };
	struct nupp_profile p;
	struct nupp_why *w;
	const char *t;

	prof_init(&p);
	add(&p, "bench.lua:50;bench.lua:18", 300, 0, 0, 0, 0); /* alpha's compiled loop */
	add(&p, "bench.lua:51;bench.lua:24", 0, 300, 0, 0, 0); /* beta's, under jit.off */
	add(&p, "bench.lua:52;bench.lua:30", 300, 0, 0, 0, 0);
	abort_row(&p, NUPP_SEV_WARN, "JIT compilation disabled for function", "bench.lua:22", 1);
	abort_row(&p, NUPP_SEV_WARN, "farther up", "bench.lua:20", 1);
	abort_row(&p, NUPP_SEV_WARN, "above alpha's compiled line", "bench.lua:10", 1);
	nupp_abort_set_sort(&p.aborts);
	ck_assert_int_eq(nupp_why_compute(&p, &o, &w), 0);
	ck_assert_uint_eq(w->n, 1);
	ck_assert_str_eq(w->items[0].what, "bench.lua:24");
	ck_assert_uint_eq(w->items[0].naborts, 1);
	ck_assert_int_eq(w->items[0].aborts[0].join, NUPP_WHY_ABOVE);
	ck_assert_str_eq(w->items[0].aborts[0].row->location, "bench.lua:22");
	ck_assert_uint_eq(w->nunmatched, 2);
	t = text(w);
	ck_contains(t, "(900 samples; 3 trace aborts, 0 blacklisted)");
	ck_contains(t, "   why (above it, where its function or loop may start): JIT compilation disabled for function at "
		       "bench.lua:22 (1 abort)\n");
	nupp_why_free(w);
	prof_free(&p);
}
END_TEST

START_TEST(nothing_to_explain_when_nothing_hot_ran_interpreted)
{
	struct nupp_why_opts o = { .sz = sizeof(o), .lines = true };
	struct nupp_profile p;
	struct nupp_why *w;
	json_error_t je;
	json_t *doc;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	prof_init(&p);
	add(&p, "main.lua:3", 990, 0, 0, 0, 0);
	add(&p, "main.lua:9", 0, 5, 5, 0, 0); /* 0.5 % interpreted: under the 1 % default */
	ck_assert_int_eq(nupp_why_compute(&p, &o, &w), 0);
	ck_assert_uint_eq(w->n, 0);
	ck_assert_str_eq(text(w), "nothing to explain: no code ran interpreted for 1.0 % or more of the 1000 samples "
				  "(0 trace aborts, 0 blacklisted)\n");
	f = open_memstream(&buf, &len);
	ck_assert_int_eq(nupp_why_write_json(w, f), 0);
	fclose(f);
	doc = json_loads(buf, 0, &je);
	ck_assert_msg(doc, "%s", je.text);
	ck_assert(json_is_true(json_object_get(doc, "nothingToExplain")));
	ck_assert_uint_eq(json_array_size(json_object_get(doc, "items")), 0);
	json_decref(doc);
	free(buf);
	nupp_why_free(w);

	/* With a lower threshold the 5 interpreted samples are listed. */
	o.min_share = 0.4;
	ck_assert_int_eq(nupp_why_compute(&p, &o, &w), 0);
	ck_assert_uint_eq(w->n, 1);
	ck_assert_str_eq(w->items[0].what, "main.lua:9");
	nupp_why_free(w);
	prof_free(&p);
}
END_TEST

START_TEST(interpreted_code_without_aborts_counted)
{
	struct nupp_why_opts o = { .sz = sizeof(o), .lines = true };
	struct nupp_profile p;
	struct nupp_why *w;

	prof_init(&p);
	p.meta.aborts = false;
	add(&p, "main.lua:3", 0, 500, 0, 0, 0);
	ck_assert_int_eq(nupp_why_compute(&p, &o, &w), 0);
	ck_assert_uint_eq(w->n, 1);
	ck_contains(text(w), "trace aborts were not counted (recorded with --no-aborts)");
	nupp_why_free(w);
	prof_free(&p);
}
END_TEST

START_TEST(json_has_every_item_and_join)
{
	struct nupp_why_opts o = { .sz = sizeof(o), .lines = true };
	struct nupp_profile p;
	struct nupp_why *w;
	json_error_t je;
	json_t *doc, *it, *ab;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	blacklisted_loop_lines(&p);
	ck_assert_int_eq(nupp_why_compute(&p, &o, &w), 0);
	f = open_memstream(&buf, &len);
	ck_assert_int_eq(nupp_why_write_json(w, f), 0);
	fclose(f);
	doc = json_loads(buf, 0, &je);
	ck_assert_msg(doc, "%s", je.text);
	ck_assert(json_is_false(json_object_get(doc, "nothingToExplain")));
	ck_assert_int_eq(json_integer_value(json_object_get(doc, "samples")), 828);
	it = json_array_get(json_object_get(doc, "items"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(it, "what")), "bl.lua:11-13");
	ck_assert_int_eq(json_integer_value(json_object_get(it, "first")), 11);
	ck_assert_double_eq_tol(json_real_value(json_object_get(it, "share")), 100.0 * 682 / 828, 1e-9);
	ck_assert_double_eq_tol(json_real_value(json_object_get(it, "interpretedOfLua")), 100.0 * 301 / 324, 1e-9);
	ab = json_array_get(json_object_get(it, "aborts"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(ab, "severity")), "blacklist");
	ck_assert_str_eq(json_string_value(json_object_get(ab, "reason")), "NYI: bytecode FNEW");
	ck_assert_str_eq(json_string_value(json_object_get(ab, "join")), "within");
	json_decref(doc);
	free(buf);
	nupp_why_free(w);
	prof_free(&p);
}
END_TEST

NUPP_CHECK_MAIN("why", 30, false, false, a_blacklisted_loop_is_named_with_its_share_and_reason,
		a_compiled_closure_on_the_loop_line_does_not_split_the_loop,
		without_lines_functions_are_joined_by_file, an_abort_in_a_called_function_explains_the_loop_too,
		an_abort_at_the_start_of_the_function_joins_from_above,
		nothing_to_explain_when_nothing_hot_ran_interpreted, interpreted_code_without_aborts_counted,
		json_has_every_item_and_join)
