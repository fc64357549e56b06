/* The real sampler against a CPU split the workload measures itself (os.clock): each
 * path's share of the profile is within 2 percentage points of the measured share, a
 * jit.off path is >= 95 % `interpreted` and a compiled path >= 95 % `compiled`. */
#include <check.h>

#include "nupp_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_test.h"

static const char *const paths[3] = { "shares.lua:path_interp", "shares.lua:path_jit", "shares.lua:path_mixed" };

START_TEST(sampler_shares_match_the_measured_cpu_split)
{
	struct nupp_sampler_opts o = { .sz = sizeof(o), .freq_hz = 4999 };
	struct nupp_sample_set set = { 0 };
	char script[512], measured[256] = "";
	char *argv[] = { NUPP_LUAJIT, script, "8", NULL };
	double spent[3], total_spent;
	__u64 n[3] = { 0 }, interp[3] = { 0 }, compiled[3] = { 0 }, in_paths = 0, ns = 0, cnt = 0;
	size_t i;
	int k;
	FILE *out;

	snprintf(script, sizeof(script), "%s/sampler/shares.lua", NUPP_TEST_DATA);
	/* The measured split comes back on the workload's stdout (the done pipe): read it
	 * by running the profile through a helper that keeps the first line. */
	ck_assert_int_eq(smp_profile_line(argv, &o, &set, &ns, &cnt, measured, sizeof(measured)), 0);
	smp_print(&set, 20);
	if (cnt)
		printf("bpf: run_cnt %llu, %llu ns per sample\n", (unsigned long long)cnt,
		       (unsigned long long)(ns / cnt));
	ck_assert_int_eq(sscanf(measured, "%lf %lf %lf", &spent[0], &spent[1], &spent[2]), 3);
	total_spent = spent[0] + spent[1] + spent[2];
	ck_assert(total_spent > 1.0);
	for (i = 0; i < set.n; i++) {
		const struct nupp_sample_row *r = &set.rows[i];

		for (k = 0; k < 3; k++)
			if (strstr(r->stack, paths[k])) {
				n[k] += r->count;
				interp[k] += r->interpreted;
				compiled[k] += r->compiled;
				in_paths += r->count;
				break;
			}
	}
	ck_assert_msg(in_paths >= 10000, "only %llu samples in the three paths", (unsigned long long)in_paths);
	out = stdout;
	for (k = 0; k < 3; k++) {
		double truth = 100.0 * spent[k] / total_spent, got = 100.0 * (double)n[k] / (double)in_paths;

		fprintf(out, "%-24s measured %6.2f %%  profile %6.2f %%  (%llu samples, %llu interpreted, %llu compiled)\n",
			paths[k], truth, got, (unsigned long long)n[k], (unsigned long long)interp[k],
			(unsigned long long)compiled[k]);
		ck_assert_msg(got - truth <= 2.0 && truth - got <= 2.0, "%s: profile %.2f %% vs measured %.2f %%", paths[k],
			      got, truth);
	}
	ck_assert_msg(interp[0] * 100 >= n[0] * 95, "jit.off path: %llu of %llu samples interpreted",
		      (unsigned long long)interp[0], (unsigned long long)n[0]);
	ck_assert_msg(compiled[1] * 100 >= n[1] * 95, "compiled path: %llu of %llu samples compiled",
		      (unsigned long long)compiled[1], (unsigned long long)n[1]);
	nupp_sample_set_free(&set);
}
END_TEST

NUPP_CHECK_MAIN("sampler_shares", 240, true, true, sampler_shares_match_the_measured_cpu_split)
