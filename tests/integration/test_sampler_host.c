/* The real sampler on a C host (tests/support/prog_host_threads.c) whose threads and
 * moments outside Lua are known by construction, each timed by CLOCK_THREAD_CPUTIME_ID:
 * a Lua stack gets the samples of the thread running Lua and only those (within 5 % of
 * its CPU time), host code is reported on "[host];<function>" rows (within 5 % of its CPU
 * time), a VM moved between threads follows the thread that runs it, and host code
 * between Lua calls is not lost as badFrame (< 0.5 %). */
#include <check.h>

#include "nupp_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_test.h"

#define FREQ 4999

/* Samples of the rows whose stack ends with suffix (host: "[host];" rows, else Lua rows). */
static __u64 rows_ending(const struct nupp_sample_set *set, const char *suffix, __u64 *interp)
{
	size_t i, n = strlen(suffix);
	__u64 c = 0;

	if (interp)
		*interp = 0;
	for (i = 0; i < set->n; i++) {
		const struct nupp_sample_row *r = &set->rows[i];
		size_t len = strlen(r->stack);

		if (len >= n && strcmp(r->stack + len - n, suffix) == 0) {
			c += r->count;
			if (interp)
				*interp += r->interpreted;
		}
	}
	return c;
}

/* Samples on "[host];..." rows and on Lua rows. */
static void split(const struct nupp_sample_set *set, __u64 *host, __u64 *lua)
{
	size_t i;

	*host = *lua = 0;
	for (i = 0; i < set->n; i++) {
		if (strncmp(set->rows[i].stack, "[host];", 7) == 0)
			*host += set->rows[i].count;
		else
			*lua += set->rows[i].count;
	}
}

/* Checks that n samples are cpu seconds at FREQ within 5 %. */
static void within5(const char *what, __u64 n, double cpu)
{
	double want = cpu * FREQ;

	printf("%-28s %7llu samples, CPU time %.3f s -> %.0f expected (%.2f %%)\n", what, (unsigned long long)n, cpu,
	       want, want > 0 ? 100.0 * ((double)n - want) / want : 0);
	ck_assert_msg((double)n >= 0.95 * want && (double)n <= 1.05 * want, "%s: %llu samples for %.3f s of CPU (%.0f)",
		      what, (unsigned long long)n, cpu, want);
}

/* Profiles prog_host_threads MODE SECONDS; the measured CPU seconds go to line. */
static void profile(const char *mode, struct nupp_sample_set *set, char *line, size_t size)
{
	struct nupp_sampler_opts o = { .sz = sizeof(o), .freq_hz = FREQ };
	char prog[512];
	char *argv[] = { prog, (char *)mode, "2", NULL };
	__u64 ns = 0, cnt = 0;

	snprintf(prog, sizeof(prog), "%s/prog_host_threads", NUPP_TEST_BIN);
	ck_assert_int_eq(smp_profile_line(argv, &o, set, &ns, &cnt, line, size), 0);
	smp_print(set, 16);
	printf("host samples %llu\n", (unsigned long long)set->host_samples);
}

START_TEST(a_thread_that_runs_no_lua_is_host_code)
{
	struct nupp_sample_set set = { 0 };
	char line[256] = "";
	double lua, c;
	__u64 work, interp, comp, host, in_lua;

	profile("busy", &set, line, sizeof(line));
	ck_assert_int_eq(sscanf(line, "%lf %lf", &lua, &c), 2);
	work = rows_ending(&set, ";hostprog:work;hostprog:loop", &interp);
	comp = rows_ending(&set, "[host];host_compute", NULL);
	split(&set, &host, &in_lua);
	within5("Lua thread: hostprog:work", work, lua);
	within5("C thread: [host];host_compute", comp, c);
	/* Every Lua sample is the Lua thread's: the C thread's time is on no Lua stack. */
	within5("all Lua stacks", in_lua, lua);
	ck_assert_msg(interp * 100 >= work * 99, "%llu of %llu work samples interpreted", (unsigned long long)interp,
		      (unsigned long long)work);
	ck_assert_uint_eq(set.host_samples, host);
	nupp_sample_set_free(&set);
}
END_TEST

START_TEST(host_code_between_lua_calls_is_reported_not_lost)
{
	struct nupp_sample_set set = { 0 };
	char line[256] = "";
	double lua, c;
	__u64 work, comp, host, in_lua, lost;

	profile("alternate", &set, line, sizeof(line));
	ck_assert_int_eq(sscanf(line, "%lf %lf", &lua, &c), 2);
	work = rows_ending(&set, ";hostprog:work;hostprog:loop", NULL);
	comp = rows_ending(&set, "[host];host_compute", NULL);
	split(&set, &host, &in_lua);
	within5("Lua calls: hostprog:work", work, lua);
	within5("between them: host_compute", comp, c);
	within5("all Lua stacks", in_lua, lua);
	lost = smp_lost(&set);
	printf("badFrame %llu of %llu\n", (unsigned long long)set.lost[NUPP_LOST_BAD_FRAME],
	       (unsigned long long)(set.samples + lost));
	ck_assert_msg(set.lost[NUPP_LOST_BAD_FRAME] * 200 < set.samples + lost, "badFrame %llu of %llu samples",
		      (unsigned long long)set.lost[NUPP_LOST_BAD_FRAME], (unsigned long long)(set.samples + lost));
	nupp_sample_set_free(&set);
}
END_TEST

START_TEST(a_vm_moved_between_threads_follows_the_running_thread)
{
	struct nupp_sample_set set = { 0 };
	char line[256] = "";
	double la, lb, ca, cb;

	profile("handoff", &set, line, sizeof(line));
	ck_assert_int_eq(sscanf(line, "%lf %lf %lf %lf", &la, &lb, &ca, &cb), 4);
	within5("thread A: hostprog:work_a", rows_ending(&set, ";hostprog:work_a;hostprog:loop", NULL), la);
	within5("thread B: hostprog:work_b", rows_ending(&set, ";hostprog:work_b;hostprog:loop", NULL), lb);
	within5("thread A: [host];spin_a", rows_ending(&set, "[host];spin_a", NULL), ca);
	within5("thread B: [host];spin_b", rows_ending(&set, "[host];spin_b", NULL), cb);
	nupp_sample_set_free(&set);
}
END_TEST

NUPP_CHECK_MAIN("sampler_host", 240, true, true, a_thread_that_runs_no_lua_is_host_code,
		host_code_between_lua_calls_is_reported_not_lost, a_vm_moved_between_threads_follows_the_running_thread)
