/* The real sampler on a Lua stack 100 frames deep (tests/data/sampler/deep.lua): with a
 * depth of 16 and with the default (64), every sample is kept with its leaf-most frames
 * exact under a "[truncated]" root frame, and counted as a cut stack; with a depth of
 * 256 the whole stack is reported. And on a stack of 200 distinct functions
 * (tests/data/sampler/deep_distinct.lua), whose first walk on each CPU meets every one
 * with a cold frame cache: with a depth of 256 every sample is whole, none lost (each
 * prototype the walk reads is noted to be watched, and all 200 fit). */
#include <check.h>

#include "nupp_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_test.h"

#define FREQ 4999

/* deep_distinct.lua's stack of n functions: f1 is named by its caller, f2 .. fn by the
 * lines they start on (fi on line n + 3 - i). */
static char *expected_distinct(int n)
{
	static char buf[8192];
	int i, len;

	len = snprintf(buf, sizeof(buf), "pmain;deep_distinct.lua:0;deep_distinct.lua:f1;");
	for (i = 2; i <= n; i++)
		len += snprintf(buf + len, sizeof(buf) - (size_t)len, "deep_distinct.lua:%d;", n + 3 - i);
	snprintf(buf + len, sizeof(buf) - (size_t)len, "deep_distinct.lua:leaf");
	return buf;
}

/* The expected stack: [truncated] (if cut), then rec frames, then leaf; depth frames. */
static char *expected(int depth, int cut)
{
	static char buf[8192];
	int i, nrec = cut ? depth - 1 : 97;

	buf[0] = 0;
	strcat(buf, cut ? "[truncated];" : "pmain;deep.lua:0;");
	for (i = 0; i < nrec; i++)
		strcat(buf, "deep.lua:rec;");
	strcat(buf, "deep.lua:leaf");
	return buf;
}

/* Profiles workload (deep.lua, deep_distinct.lua) at depth (0: the default); checks the
 * leaf's stacks are want. */
static void profile_stack(const char *workload, int depth, int cut, const char *want, const char *leaf)
{
	struct nupp_sampler_opts o = { .sz = sizeof(o), .freq_hz = FREQ, .depth = depth };
	struct nupp_sample_set set = { 0 };
	char script[512], line[256] = "";
	char *argv[] = { NUPP_LUAJIT, script, "2", NULL };
	__u64 ns = 0, cnt = 0, exact = 0, in_leaf = 0, lost, truncated = 0;
	double cpu;
	size_t i, wl = strlen(want), ll = strlen(leaf);

	snprintf(script, sizeof(script), "%s/sampler/%s", NUPP_TEST_DATA, workload);
	ck_assert_int_eq(smp_profile_line(argv, &o, &set, &ns, &cnt, line, sizeof(line)), 0);
	ck_assert_int_eq(sscanf(line, "%lf", &cpu), 1);
	for (i = 0; i < set.n; i++) {
		const struct nupp_sample_row *r = &set.rows[i];
		size_t len = strlen(r->stack);

		if (strncmp(r->stack, "[truncated];", 12) == 0)
			truncated += r->count;
		if (strcmp(r->stack, want) == 0)
			exact += r->count;
		if (len >= ll && strcmp(r->stack + len - ll, leaf) == 0)
			in_leaf += r->count;
		else if (i < 8)
			printf("%6llu %.200s\n", (unsigned long long)r->count, r->stack);
	}
	lost = smp_lost(&set);
	printf("%s, depth %d: %llu samples (%.0f expected), %llu in leaf, %llu with the expected stack, %llu cut "
	       "(meta %llu), %llu lost; cost %llu ns/sample\n",
	       workload, depth ? depth : 64, (unsigned long long)set.samples, cpu * FREQ, (unsigned long long)in_leaf,
	       (unsigned long long)exact, (unsigned long long)truncated, (unsigned long long)set.cut_samples,
	       (unsigned long long)lost, cnt ? (unsigned long long)(ns / cnt) : 0ull);
	if (exact < in_leaf)
		for (i = 0; i < set.n; i++)
			if (strcmp(set.rows[i].stack, want) && strstr(set.rows[i].stack, leaf))
				printf("other (%llu): %.300s\n", (unsigned long long)set.rows[i].count, set.rows[i].stack);
	/* Every sample in the leaf has exactly the expected frames, and none is lost. The
	 * count against CPU time allows for the timer itself: on a loaded 2-vCPU VM its
	 * ticks come late (94 % of cpu * FREQ was seen at load average 9, none lost). */
	ck_assert_msg((double)in_leaf >= 0.90 * cpu * FREQ, "%llu samples in leaf for %.3f s", (unsigned long long)in_leaf,
		      cpu);
	ck_assert_uint_eq(exact, in_leaf);
	ck_assert_msg(lost * 1000 <= set.samples, "%llu of %llu samples lost", (unsigned long long)lost,
		      (unsigned long long)set.samples);
	/* No prototype of these few is ever left unwatched (which loses a sample as mapFull). */
	ck_assert_uint_eq(set.lost[NUPP_LOST_MAP_FULL], 0);
	ck_assert_uint_eq(truncated, set.cut_samples);
	if (cut)
		ck_assert_uint_ge(truncated, in_leaf);
	else
		ck_assert_uint_eq(truncated, 0);
	ck_assert(wl > 0);
	nupp_sample_set_free(&set);
}

/* Profiles deep.lua at depth (0: the default). */
static void profile_deep(int depth, int cut)
{
	profile_stack("deep.lua", depth, cut, expected(depth ? depth : 64, cut), "deep.lua:leaf");
}

START_TEST(deep_stack_depth_16_keeps_the_16_leaf_most_frames)
{
	profile_deep(16, 1);
}
END_TEST

START_TEST(deep_stack_default_depth_keeps_the_64_leaf_most_frames)
{
	profile_deep(0, 1);
}
END_TEST

START_TEST(deep_stack_depth_256_is_whole)
{
	profile_deep(256, 0);
}
END_TEST

START_TEST(deep_stack_of_200_distinct_functions_is_whole_from_a_cold_cache)
{
	profile_stack("deep_distinct.lua", 256, 0, expected_distinct(200), "deep_distinct.lua:leaf");
}
END_TEST

NUPP_CHECK_MAIN("sampler_deep", 240, true, true, deep_stack_depth_16_keeps_the_16_leaf_most_frames,
		deep_stack_default_depth_keeps_the_64_leaf_most_frames, deep_stack_depth_256_is_whole,
		deep_stack_of_200_distinct_functions_is_whole_from_a_cold_cache)
