/* The real sampler reads a VM's current zone id through the slot it was given
 * (nupp_sampler_set_zone_addr: a u64 pointing to the double of the id, as nupp.zone
 * keeps it): samples are keyed by zone, id 0 is the path "". */
#include <check.h>

#include "nupp_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_test.h"

START_TEST(sampler_keys_samples_by_zone_id)
{
	struct nupp_sampler_opts o = { .sz = sizeof(o), .freq_hz = 2999 };
	struct nupp_sample_set set = { 0 };
	char script[512], line[256] = "";
	char *argv[] = { NUPP_LUAJIT, script, "3", NULL };
	struct nupp_sampler *s;
	struct smp_run run;
	struct nupp_vm vm;
	unsigned long long addr = 0;
	__u64 in[3] = { 0 }, wrong = 0;
	size_t i;
	int err = 0;

	snprintf(script, sizeof(script), "%s/sampler/zones.lua", NUPP_TEST_DATA);
	ck_assert_int_eq(smp_run_start(&run, argv), 0);
	ck_assert(smp_run_done(&run, 10000, line, sizeof(line)));
	ck_assert_int_eq(sscanf(line, "%llu", &addr), 1);
	ck_assert_int_eq(nupp_vm_find(run.pid, &vm, 1), 1);
	s = nupp_sampler_open(&o, &err);
	ck_assert_msg(s != NULL, "open: %s", nupp_errmsg());
	ck_assert_int_eq(nupp_sampler_add_pid(s, run.pid), 0);
	ck_assert_int_eq(nupp_sampler_set_zone_addr(s, run.pid, vm.g, addr), 0);
	ck_assert_int_eq(nupp_sampler_set_zone_addr(s, run.pid, vm.g + 8, addr), -ENOENT);
	smp_run_go(&run);
	while (!smp_run_done(&run, 200, line, sizeof(line)))
		ck_assert_int_eq(nupp_sampler_drain(s, &set), 0);
	ck_assert_int_eq(nupp_sampler_drain(s, &set), 0);
	smp_run_finish(&run);
	nupp_sampler_close(s);
	nupp_sample_set_sort(&set);
	for (i = 0; i < set.n; i++) {
		const struct nupp_sample_row *r = &set.rows[i];
		int z = !strcmp(r->zone_path, "") ? 0 : !strcmp(r->zone_path, "#1") ? 1 : !strcmp(r->zone_path, "#2") ? 2 : -1;
		int a = strstr(r->stack, "zones.lua:work_a") != NULL, b = strstr(r->stack, "zones.lua:work_b") != NULL;

		ck_assert_msg(z >= 0, "unexpected zone path '%s'", r->zone_path);
		in[z] += r->count;
		/* zone 1 only in work_a, zone 2 only in work_b, and their spin() always in
		 * their zone: the stores precede and follow the call in program order */
		if ((z == 1 && !a) || (z == 2 && !b) || (z == 0 && (a || b) && strstr(r->stack, "spin")))
			wrong += r->count;
		if (z || a || b)
			printf("zone '%s' %llu %s\n", r->zone_path, (unsigned long long)r->count, r->stack);
	}
	printf("zone 0: %llu, zone 1: %llu, zone 2: %llu, misplaced %llu\n", (unsigned long long)in[0],
	       (unsigned long long)in[1], (unsigned long long)in[2], (unsigned long long)wrong);
	ck_assert_uint_gt(in[1], 1000);
	ck_assert_uint_gt(in[2], 500);
	ck_assert_uint_gt(in[1], in[2]); /* work_a spins twice as long */
	ck_assert_msg(wrong == 0, "%llu samples in the wrong zone", (unsigned long long)wrong);
	nupp_sample_set_free(&set);
}
END_TEST

NUPP_CHECK_MAIN("sampler_zones", 120, true, true, sampler_keys_samples_by_zone_id)
