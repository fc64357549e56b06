/* The real sampler on a workload that allocates in the interpreter
 * (tests/data/sampler/alloc.lua: tables growing, #t, string building), whose time is
 * largely in C helpers the interpreter calls (lj_tab_newkey, rehashtab, lj_alloc_malloc,
 * lj_tab_len, lj_buf_*, memcpy) and in the GC: < 0.5 % lost as badFrame; each function's
 * share within 2 percentage points of its os.clock share; every sample in a VM state it
 * can be in (jit.off: never compiled or compiling; a Lua leaf never in C code; the GC's
 * time seen as collecting). */
#include <check.h>

#include "nupp_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_test.h"

static const char *const fns[3] = { "alloc.lua:grow", "alloc.lua:len", "alloc.lua:build" };

START_TEST(allocation_in_the_interpreter_is_walked_in_the_right_state)
{
	struct nupp_sampler_opts o = { .sz = sizeof(o), .freq_hz = 4999 };
	struct nupp_sample_set set = { 0 };
	char script[512], line[256] = "";
	char *argv[] = { NUPP_LUAJIT, script, "4", NULL };
	double spent[3], total = 0;
	__u64 n[3] = { 0 }, in_fns = 0, ns = 0, cnt = 0, lost, gc = 0, jit = 0, leaf_c = 0;
	size_t i;
	int k;

	snprintf(script, sizeof(script), "%s/sampler/alloc.lua", NUPP_TEST_DATA);
	ck_assert_int_eq(smp_profile_line(argv, &o, &set, &ns, &cnt, line, sizeof(line)), 0);
	smp_print(&set, 20);
	ck_assert_int_eq(sscanf(line, "%lf %lf %lf", &spent[0], &spent[1], &spent[2]), 3);
	for (k = 0; k < 3; k++)
		total += spent[k];
	for (i = 0; i < set.n; i++) {
		const struct nupp_sample_row *r = &set.rows[i];
		const char *leaf = strrchr(r->stack, ';');

		leaf = leaf ? leaf + 1 : r->stack;
		jit += r->compiled + r->compiling;
		for (k = 0; k < 3; k++)
			if (strstr(r->stack, fns[k])) {
				n[k] += r->count;
				in_fns += r->count;
				gc += r->collecting;
				/* A Lua function as leaf: interpreted or collecting, never C code. */
				if (strncmp(leaf, "alloc.lua:", 10) == 0)
					leaf_c += r->ccode;
				break;
			}
	}
	lost = smp_lost(&set);
	printf("badFrame %llu of %llu samples; %llu collecting; %llu compiled or compiling\n",
	       (unsigned long long)set.lost[NUPP_LOST_BAD_FRAME], (unsigned long long)(set.samples + lost),
	       (unsigned long long)gc, (unsigned long long)jit);
	for (k = 0; k < 3; k++) {
		double truth = 100.0 * spent[k] / total, got = 100.0 * (double)n[k] / (double)in_fns;

		printf("%-16s measured %6.2f %%  profile %6.2f %%  (%llu samples)\n", fns[k], truth, got,
		       (unsigned long long)n[k]);
		ck_assert_msg(got - truth <= 2.0 && truth - got <= 2.0, "%s: profile %.2f %% vs measured %.2f %%", fns[k],
			      got, truth);
	}
	ck_assert_msg(in_fns >= 15000, "only %llu samples in the functions", (unsigned long long)in_fns);
	ck_assert_msg(set.lost[NUPP_LOST_BAD_FRAME] * 200 < set.samples + lost, "badFrame %llu of %llu samples",
		      (unsigned long long)set.lost[NUPP_LOST_BAD_FRAME], (unsigned long long)(set.samples + lost));
	ck_assert_msg(lost * 100 < set.samples + lost, "lost %llu of %llu samples", (unsigned long long)lost,
		      (unsigned long long)(set.samples + lost));
	ck_assert_uint_eq(jit, 0);
	ck_assert_uint_eq(leaf_c, 0);
	ck_assert_msg(gc > 0, "no sample of the GC");
	nupp_sample_set_free(&set);
}
END_TEST

NUPP_CHECK_MAIN("sampler_alloc", 240, true, true, allocation_in_the_interpreter_is_walked_in_the_right_state)
