/* The real sampler against short-lived prototypes at reused addresses
 * (tests/data/sampler/churn.lua): every frame is named as the prototype it sampled was
 * named, although a prototype of the other chunk, with a chunk name of the same length,
 * sits at its address by the time the profile is drained; and the two chunks' shares
 * match the split the workload measures itself (os.clock) within 2 percentage points;
 * and a builtin written in bytecode (table.remove) is named "remove", as jit.p names it. */
#include <check.h>

#include "nupp_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_test.h"

/* The call graph's frames (jit.p's names): anything else is a misnamed frame. (The
 * first lines, before the workload waits on stdin, call jit.off and tonumber.) */
static const char *const known[] = { "pmain",          "churn.lua:0",    "churn.lua:run", "chunkA:f",
				     "chunkB:f",       "loadstring",     "os.clock",      "assert",
				     "collectgarbage", "io.read",        "print",         "string.format",
				     "io.method.flush", "remove", "jit.off", "tonumber" };

/* Whether every frame of a collapsed stack is a known one. */
static int stack_known(const char *stack)
{
	char buf[1024], *save = NULL, *f;
	size_t i;

	snprintf(buf, sizeof(buf), "%s", stack);
	for (f = strtok_r(buf, ";", &save); f; f = strtok_r(NULL, ";", &save)) {
		for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			if (strcmp(f, known[i]) == 0)
				break;
		if (i == sizeof(known) / sizeof(known[0]))
			return 0;
	}
	return 1;
}

START_TEST(short_lived_prototypes_keep_their_names)
{
	struct nupp_sampler_opts o = { .sz = sizeof(o), .freq_hz = 4999 };
	struct nupp_sample_set set = { 0 };
	char script[512], measured[256] = "";
	char *argv[] = { NUPP_LUAJIT, script, "4", NULL };
	double spent_a, spent_b, truth, got;
	__u64 a = 0, b = 0, rm = 0, lost = 0, ns = 0, cnt = 0, host = 0;
	size_t i;

	snprintf(script, sizeof(script), "%s/sampler/churn.lua", NUPP_TEST_DATA);
	ck_assert_int_eq(smp_profile_line(argv, &o, &set, &ns, &cnt, measured, sizeof(measured)), 0);
	smp_print(&set, 20);
	ck_assert_int_eq(sscanf(measured, "%lf %lf", &spent_a, &spent_b), 2);
	ck_assert(spent_a + spent_b > 1.0);
	for (i = 0; i < set.n; i++) {
		const struct nupp_sample_row *r = &set.rows[i];
		size_t len = strlen(r->stack);

		/* The process's own C code before its VM opens and after it closes. */
		if (strncmp(r->stack, "[host];", 7) == 0) {
			host += r->count;
			continue;
		}
		/* pmain opening the standard libraries, if the sampler saw the process early. */
		if (strncmp(r->stack, "pmain;luaopen_", 14) == 0 && !strchr(r->stack + 6, ';'))
			continue;
		ck_assert_msg(stack_known(r->stack), "misnamed frame in \"%s\" (%llu samples)", r->stack,
			      (unsigned long long)r->count);
		if (len >= 9 && strcmp(r->stack + len - 9, ";chunkA:f") == 0)
			a += r->count;
		else if (len >= 9 && strcmp(r->stack + len - 9, ";chunkB:f") == 0)
			b += r->count;
		else if (strcmp(r->stack, "pmain;churn.lua:0;remove") == 0)
			rm += r->count;
	}
	for (i = 0; i < NUPP_LOST__MAX; i++)
		lost += set.lost[i];
	truth = 100.0 * spent_a / (spent_a + spent_b);
	got = 100.0 * (double)a / (double)(a + b);
	printf("chunkA: measured %.2f %% of %.2f s, profile %.2f %% (%llu vs %llu samples); %llu samples, %llu lost "
	       "(symbolize %llu)\n",
	       truth, spent_a + spent_b, got, (unsigned long long)a, (unsigned long long)b, (unsigned long long)set.samples,
	       (unsigned long long)lost, (unsigned long long)set.lost[NUPP_LOST_SYMBOLIZE]);
	/* The chunks' CPU time at the sampling rate, less what a loaded machine may miss. */
	ck_assert_msg((double)(a + b) >= 0.8 * o.freq_hz * (spent_a + spent_b),
		      "only %llu samples in the chunks for %.2f s at %u Hz", (unsigned long long)(a + b),
		      spent_a + spent_b, (unsigned)o.freq_hz);
	ck_assert_uint_eq(host, set.host_samples);
	ck_assert_msg(host * 100 < set.samples, "%llu of %llu samples in host code", (unsigned long long)host,
		      (unsigned long long)set.samples);
	/* The bytecode builtin is named (its prototype is born with firstline ~0). */
	ck_assert_msg(rm >= 50, "only %llu samples in table.remove", (unsigned long long)rm);
	ck_assert_msg(got - truth <= 2.0 && truth - got <= 2.0, "chunkA: profile %.2f %% vs measured %.2f %%", got,
		      truth);
	/* Naming loses nothing here (the walk's own losses, samples in C helpers the
	 * interpreter calls without syncing L->base such as table.remove's #t, are the
	 * callgraph test's business). */
	ck_assert_msg(set.lost[NUPP_LOST_SYMBOLIZE] * 200 <= set.samples + lost, "%llu of %llu samples lost to naming",
		      (unsigned long long)set.lost[NUPP_LOST_SYMBOLIZE], (unsigned long long)(set.samples + lost));
	nupp_sample_set_free(&set);
}
END_TEST

NUPP_CHECK_MAIN("sampler_churn", 120, true, true, short_lived_prototypes_keep_their_names)
