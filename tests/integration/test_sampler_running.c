/* The real sampler on a process that was already running (VM found from its memory by
 * nupp_vm_find, no vm_open seen), and pause/resume: paused, the timer fires but nothing
 * is counted. */
#include <check.h>

#include "nupp_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_test.h"

START_TEST(sampler_attaches_to_a_running_process_and_pauses)
{
	struct nupp_sampler_opts o = { .sz = sizeof(o), .freq_hz = 2999 };
	struct nupp_sample_set paused = { 0 }, set = { 0 };
	char script[512], line[64];
	char *argv[] = { NUPP_LUAJIT, script, "3", NULL };
	struct nupp_sampler *s;
	struct smp_run run;
	struct nupp_vm vm;
	__u64 ns = 0, cnt = 0, cnt_paused = 0, hot = 0;
	size_t i;
	int err = 0, tries;

	snprintf(script, sizeof(script), "%s/sampler/hotloop.lua", NUPP_TEST_DATA);
	ck_assert_int_eq(smp_run_start(&run, argv), 0);
	/* the script opened its VM and blocks on stdin: a running process */
	for (tries = 0; tries < 100 && nupp_vm_find(run.pid, &vm, 1) != 1; tries++)
		usleep(20000);
	ck_assert_int_eq(nupp_vm_find(run.pid, &vm, 1), 1);
	s = nupp_sampler_open(&o, &err);
	ck_assert_msg(s != NULL, "open: %s", nupp_errmsg());
	ck_assert_int_eq(nupp_sampler_add_pid(s, run.pid), 0);
	ck_assert_int_eq(nupp_sampler_pause(s, true), 0);
	smp_run_go(&run);
	usleep(500000);
	ck_assert_int_eq(nupp_sampler_drain(s, &paused), 0);
	ck_assert_int_eq(nupp_sampler_stats(s, &ns, &cnt_paused), 0);
	ck_assert_int_eq(nupp_sampler_pause(s, false), 0);
	while (!smp_run_done(&run, 200, line, sizeof(line)))
		ck_assert_int_eq(nupp_sampler_drain(s, &set), 0);
	ck_assert_int_eq(nupp_sampler_drain(s, &set), 0);
	ck_assert_int_eq(nupp_sampler_stats(s, &ns, &cnt), 0);
	smp_run_finish(&run);
	nupp_sampler_close(s);
	nupp_sample_set_sort(&set);
	smp_print(&set, 10);
	/* paused: nothing counted, not even as lost */
	ck_assert_uint_eq(paused.samples, 0);
	ck_assert_uint_eq(smp_lost(&paused), 0);
	for (i = 0; i < set.n; i++)
		if (strstr(set.rows[i].stack, "hotloop.lua:hot"))
			hot += set.rows[i].count;
	ck_assert_msg(set.samples >= 3000, "only %llu samples", (unsigned long long)set.samples);
	ck_assert_msg(hot * 100 >= set.samples * 90, "%llu of %llu samples in hot()", (unsigned long long)hot,
		      (unsigned long long)set.samples);
	ck_assert_msg(smp_lost(&set) * 100 <= set.samples + smp_lost(&set), "lost %llu", smp_lost(&set));
	if (cnt)
		printf("bpf: run_cnt %llu (%llu while paused), %llu ns per run\n", (unsigned long long)cnt,
		       (unsigned long long)cnt_paused, (unsigned long long)(ns / cnt));
	nupp_sample_set_free(&paused);
	nupp_sample_set_free(&set);
}
END_TEST

NUPP_CHECK_MAIN("sampler_running", 120, true, true, sampler_attaches_to_a_running_process_and_pauses)
