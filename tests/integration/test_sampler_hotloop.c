/* The real sampler on a hot compiled loop: the snapshot of the trace gives the leaf
 * line, which is the loop body line for >= 99 % of the compiled samples in the loop's
 * function, and a function inlined into the trace appears as its own frame. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_test.h"

#define BODY "hotloop.lua:20" /* for i = 1, n do s = s + inner(t, i) end */

START_TEST(sampler_trace_leaf_is_the_loop_body_line)
{
	struct nupp_sampler_opts o = { .sz = sizeof(o), .freq_hz = 4999, .lines = true };
	struct nupp_sample_set set = { 0 };
	char script[512];
	char *argv[] = { NUPP_LUAJIT, script, "4", NULL };
	__u64 in_hot = 0, on_body = 0, inlined = 0, ns = 0, cnt = 0;
	size_t i;

	snprintf(script, sizeof(script), "%s/sampler/hotloop.lua", NUPP_TEST_DATA);
	ck_assert_int_eq(smp_profile(argv, &o, &set, &ns, &cnt), 0);
	smp_print(&set, 20);
	if (cnt)
		printf("bpf: run_cnt %llu, %llu ns per sample\n", (unsigned long long)cnt,
		       (unsigned long long)(ns / cnt));
	for (i = 0; i < set.n; i++) {
		const struct nupp_sample_row *r = &set.rows[i];
		const char *p = strstr(r->stack, "hotloop.lua:"), *hot, *end;
		char frame[64];

		/* pmain;hotloop.lua:<main line>;hotloop.lua:<hot's line>[;...] */
		if (!p || !(hot = strchr(p, ';')) || strncmp(hot + 1, "hotloop.lua:", 12) != 0)
			continue;
		hot++;
		end = strchr(hot, ';');
		snprintf(frame, sizeof(frame), "%.*s", (int)(end ? end - hot : (long)strlen(hot)), hot);
		in_hot += r->compiled;
		if (strcmp(frame, BODY) == 0)
			on_body += r->compiled;
		/* inner()'s body is lines 13-15 */
		if (end && strcmp(frame, BODY) == 0 &&
		    (!strcmp(end + 1, "hotloop.lua:13") || !strcmp(end + 1, "hotloop.lua:14") ||
		     !strcmp(end + 1, "hotloop.lua:15")))
			inlined += r->compiled;
	}
	printf("compiled samples in hot(): %llu, on the body line: %llu, in the inlined inner(): %llu\n",
	       (unsigned long long)in_hot, (unsigned long long)on_body, (unsigned long long)inlined);
	ck_assert_msg(in_hot >= 5000, "only %llu compiled samples in hot()", (unsigned long long)in_hot);
	ck_assert_msg(on_body * 100 >= in_hot * 99, "%llu of %llu compiled samples on " BODY,
		      (unsigned long long)on_body, (unsigned long long)in_hot);
	ck_assert_msg(inlined > 0, "no compiled sample shows the inlined inner() as its own frame");
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
	tcase_add_test(tc, sampler_trace_leaf_is_the_loop_body_line);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
