/* The real sampler on a hot compiled loop whose header and body are on different lines
 * (tests/data/sampler/hotloop.lua): a sample in the trace's machine code names the line
 * of the bytecode its snapshot executes. >= 99 % of the compiled samples in hot() name a
 * body line (each of them getting its share), the loop header's compare-and-branch is on
 * the `for` line (< 1 %), no sample names a line the loop does not run, and the function
 * inlined into the trace appears as its own frame at its own line. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_test.h"

/* Lines of hotloop.lua. */
#define L_INNER_FIRST 21 /* local function inner(a, s): its position when unknown */
#define L_INNER 22       /* if a < 0 then ...; local r = sqrt(sqrt(a + s)); ... */
#define L_HOT_FIRST 26   /* local function hot(n, t): its position when unknown */
#define L_FOR 28         /* for i = 1, n do */
#define L_B1 29          /* local a = sqrt(sqrt(t[i % 64 + 1] + s)) */
#define L_B2 30          /* if a > 1e300 ...; local b = sqrt(sqrt(a + 1.25)) */
#define L_B3 31          /* if b > 1e300 ...; s = inner(b, s) */
#define L_B4 32          /* if s > 1e300 ...; s = sqrt(sqrt(s + 0.125)) */
#define L_RET 34         /* return s */
#define NLINES 64

/* Line of frame "hotloop.lua:N" at p (up to ';' or the end), or -1. */
static int frame_line(const char *p)
{
	char *end;
	long v;

	if (strncmp(p, "hotloop.lua:", 12) != 0)
		return -1;
	v = strtol(p + 12, &end, 10);
	if (end == p + 12 || (*end && *end != ';') || v <= 0 || v >= NLINES)
		return -1;
	return (int)v;
}

START_TEST(sampler_trace_leaf_is_the_executing_body_line)
{
	struct nupp_sampler_opts o = { .sz = sizeof(o), .freq_hz = 4999, .lines = true };
	struct nupp_sample_set set = { 0 };
	char script[512];
	char *argv[] = { NUPP_LUAJIT, script, "4", NULL };
	/* compiled samples in hot() by hot's line, with nothing inlined below it */
	__u64 on[NLINES] = { 0 }, inlined[NLINES] = { 0 };
	__u64 in_hot = 0, odd = 0, body, ns = 0, cnt = 0;
	size_t i;
	int l;

	snprintf(script, sizeof(script), "%s/sampler/hotloop.lua", NUPP_TEST_DATA);
	ck_assert_int_eq(smp_profile(argv, &o, &set, &ns, &cnt), 0);
	smp_print(&set, 24);
	if (cnt)
		printf("bpf: run_cnt %llu, %llu ns per sample\n", (unsigned long long)cnt,
		       (unsigned long long)(ns / cnt));
	for (i = 0; i < set.n; i++) {
		const struct nupp_sample_row *r = &set.rows[i];
		const char *p = strstr(r->stack, "hotloop.lua:"), *hot, *below;
		int hl, il;

		/* pmain;hotloop.lua:<main line>;hotloop.lua:<hot's line>[;<inlined>] */
		if (!p || !(hot = strchr(p, ';')) || strncmp(hot + 1, "hotloop.lua:", 12) != 0 || !r->compiled)
			continue;
		hot++;
		in_hot += r->compiled;
		hl = frame_line(hot);
		below = strchr(hot, ';');
		if (hl < 0) {
			odd += r->compiled;
			continue;
		}
		if (!below) {
			on[hl] += r->compiled;
			continue;
		}
		/* Only inner() is inlined, only at its call on line L_B3, one frame deep. */
		il = frame_line(below + 1);
		if (hl == L_B3 && il > 0 && !strchr(below + 1, ';'))
			inlined[il] += r->compiled;
		else
			odd += r->compiled;
	}
	body = on[L_B1] + on[L_B2] + on[L_B3] + on[L_B4] + inlined[L_INNER];
	printf("compiled samples in hot(): %llu\n", (unsigned long long)in_hot);
	for (l = 0; l < NLINES; l++) {
		if (on[l])
			printf("  hot line %2d: %6llu (%.2f %%)\n", l, (unsigned long long)on[l], 100.0 * on[l] / in_hot);
		if (inlined[l])
			printf("  hot line %d, inlined inner() line %d: %6llu (%.2f %%)\n", L_B3, l,
			       (unsigned long long)inlined[l], 100.0 * inlined[l] / in_hot);
	}
	printf("  body: %llu (%.2f %%), other stacks: %llu\n", (unsigned long long)body,
	       in_hot ? 100.0 * body / in_hot : 0.0, (unsigned long long)odd);

	ck_assert_msg(in_hot >= 5000, "only %llu compiled samples in hot()", (unsigned long long)in_hot);
	/* The body dominates, and is reported on its own lines, not on the `for` line. */
	ck_assert_msg(body * 100 >= in_hot * 99, "%llu of %llu compiled samples on the body lines",
		      (unsigned long long)body, (unsigned long long)in_hot);
	/* Each body line with work (two dependent square roots each) gets its share: 4 such
	 * code blocks, so about a quarter each; at least a tenth, whatever the CPU. */
	ck_assert_msg(on[L_B1] * 10 >= in_hot, "line %d: %llu", L_B1, (unsigned long long)on[L_B1]);
	ck_assert_msg(on[L_B2] * 10 >= in_hot, "line %d: %llu", L_B2, (unsigned long long)on[L_B2]);
	ck_assert_msg(on[L_B4] * 10 >= in_hot, "line %d: %llu", L_B4, (unsigned long long)on[L_B4]);
	/* inner() is inlined: its work is in its own frame at its own line, below the call. */
	ck_assert_msg(inlined[L_INNER] * 10 >= in_hot, "inlined inner() line %d: %llu", L_INNER,
		      (unsigned long long)inlined[L_INNER]);
	/* Outside the body: the loop's compare-and-branch on the `for` line, the return of
	 * hot() (run once per call, after the loop) and a position not known (firstline:
	 * IP in an exit stub) -- together < 1 %. */
	ck_assert_msg((on[L_FOR] + on[L_RET] + on[L_HOT_FIRST]) * 100 < in_hot,
		      "for %llu, return %llu, unknown %llu of %llu", (unsigned long long)on[L_FOR],
		      (unsigned long long)on[L_RET], (unsigned long long)on[L_HOT_FIRST],
		      (unsigned long long)in_hot);
	/* No sample on any other line: every compiled sample in hot() is accounted for. */
	ck_assert_uint_eq(body + on[L_FOR] + on[L_RET] + on[L_HOT_FIRST], in_hot);
	ck_assert_uint_eq(odd, 0);
	nupp_sample_set_free(&set);
}
END_TEST

/* Runs the suite. */
int main(void)
{
	Suite *su = suite_create("sampler_hotloop");
	TCase *tc = tcase_create("hotloop");
	SRunner *sr;
	int failed;

	nupp_test_need_root();
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, sampler_trace_leaf_is_the_executing_body_line);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
