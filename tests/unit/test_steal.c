/* Time a hypervisor takes from a virtual CPU (steal) is not counted as a task's CPU time
 * (nupp_smp_steal_tick, include/nupp/sampler_abi.h): sequences of CPU-clock ticks with a
 * steal clock that moves as a hypervisor's does, and the ticks dropped counted exactly. */
#include <check.h>

#include "nupp_check.h"
#include "nupp/sampler_abi.h"
#include <string.h>

#define P 1000000ull /* a 1 ms period (1000 Hz) */

/* Runs n ticks on one CPU: tick i comes dt[i % ndt] ns after the one before, the steal
 * clock having moved ds[i % nds] ns since; returns the ticks dropped. */
static int run(int n, const __u64 *dt, int ndt, const __u64 *ds, int nds)
{
	struct nupp_smp_inflight f;
	__u64 now = 5000000000ull, steal = 123456789ull;
	int i, dropped = 0;

	memset(&f, 0, sizeof(f));
	ck_assert_int_eq(nupp_smp_steal_tick(&f, now, steal, P, 42), 0); /* the first tick: nothing to compare */
	for (i = 0; i < n; i++) {
		now += dt[i % ndt];
		steal += ds[i % nds];
		dropped += nupp_smp_steal_tick(&f, now, steal, P, 42);
	}
	return dropped;
}

START_TEST(no_steal_drops_nothing)
{
	const __u64 dt[] = { P }, dt_idle[] = { P, P, 50 * P, P }, ds[] = { 0 };

	ck_assert_int_eq(run(10000, dt, 1, ds, 1), 0);
	/* Ticks after an idle CPU (no tick while idle) are late, and nothing was stolen. */
	ck_assert_int_eq(run(10000, dt_idle, 4, ds, 1), 0);
}
END_TEST

START_TEST(steal_in_slices_shorter_than_a_period_is_taken_off)
{
	/* A quarter of every period stolen: the task ran 3/4 of the time the ticks count. */
	const __u64 dt[] = { P }, ds[] = { P / 4 };
	/* The scheduler's view of the steal clock moves at its own ticks (250 Hz: every
	 * fourth tick at 1000 Hz), by 4 periods' worth at a time. */
	const __u64 ds_sched[] = { 0, 0, 0, P };

	ck_assert_int_eq(run(10000, dt, 1, ds, 1), 2500);
	ck_assert_int_eq(run(10000, dt, 1, ds_sched, 4), 2500);
}
END_TEST

START_TEST(a_long_steal_costs_the_one_tick_it_made)
{
	/* 20 ms stolen at once: the tick after it comes 20 ms late and counts one period for
	 * the 1 ms the task ran: nothing to take off (ticks that did not fire counted nothing). */
	const __u64 dt[] = { P, P, P, 21 * P }, ds[] = { 0, 0, 0, 20 * P };
	/* The same, the steal clock seen one tick later (at the scheduler's tick). */
	const __u64 dt_late[] = { P, P, 21 * P, P }, ds_late[] = { 0, 0, 0, 20 * P };
	/* Half of it stolen: the late tick stood for 10.5 ms of running, counted 1. */
	const __u64 ds_half[] = { 0, 0, 0, 10 * P };

	ck_assert_int_eq(run(4000, dt, 4, ds, 4), 0);
	ck_assert_int_eq(run(4000, dt_late, 4, ds_late, 4), 0);
	ck_assert_int_eq(run(4000, dt, 4, ds_half, 4), 0);
}
END_TEST

/* The scheduler reads the steal clock at its own ticks (every 4 ms at HZ=250): stolen
 * time shows up to that long after the late tick it made, many periods at a high rate. */
START_TEST(a_long_steal_shown_a_scheduler_tick_later_costs_nothing_more)
{
	/* 20 ms stolen, shown 4 ticks after the late tick at 1000 Hz... */
	const __u64 dt[] = { P, P, 21 * P, P, P, P, P, P }, ds[] = { 0, 0, 0, 0, 0, 0, 20 * P, 0 };
	/* ... and 8 ms stolen, shown 20 ticks after it at 5000 Hz (a 200 us period). */
	__u64 dt5[40], ds5[40];
	struct nupp_smp_inflight f;
	__u64 now = 5000000000ull, steal = 1000, p5 = P / 5;
	int i, dropped = 0;

	ck_assert_int_eq(run(8000, dt, 8, ds, 8), 0);
	for (i = 0; i < 40; i++) {
		dt5[i] = i == 3 ? 41 * p5 : p5;
		ds5[i] = i == 23 ? 40 * p5 : 0;
	}
	memset(&f, 0, sizeof(f));
	nupp_smp_steal_tick(&f, now, steal, p5, 42);
	for (i = 0; i < 4000; i++) {
		now += dt5[i % 40];
		steal += ds5[i % 40];
		dropped += nupp_smp_steal_tick(&f, now, steal, p5, 42);
	}
	ck_assert_int_eq(dropped, 0);
}
END_TEST

/* Lateness is not credit for ever: a CPU idle for 50 ms (late ticks, nothing stolen),
 * then 5 periods stolen in slices on time 30 ms later, has those 5 ticks dropped. */
START_TEST(old_lateness_does_not_hide_later_steal)
{
	const __u64 dt[] = { 50 * P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P,
			     P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P },
		    ds[] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
			     0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5 * P, 0, 0, 0, 0, 0, 0, 0, 0, 0 };

	ck_assert_int_eq(run(40, dt, 40, ds, 40), 5);
}
END_TEST

START_TEST(a_burst_is_taken_off_64_ticks_at_most)
{
	/* 200 periods' steal shown at once on time (a clock that jumped): 64 ticks dropped,
	 * not 200, and none after. */
	const __u64 dt[] = { P }, ds[] = { 200 * P, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };

	ck_assert_int_eq(run(100, dt, 1, ds, 100), 64);
}
END_TEST

START_TEST(a_steal_clock_that_goes_back_is_ignored)
{
	struct nupp_smp_inflight f;

	memset(&f, 0, sizeof(f));
	nupp_smp_steal_tick(&f, 1000 * P, 50 * P, P, 42);
	ck_assert_int_eq(nupp_smp_steal_tick(&f, 1001 * P, 10 * P, P, 42), 0);
	ck_assert_uint_eq(f.debt_ns, 0);
	/* ... and counts on from where it is now. */
	ck_assert_int_eq(nupp_smp_steal_tick(&f, 1002 * P, 11 * P, P, 42), 1);
}
END_TEST

START_TEST(steal_that_shows_at_another_threads_tick_is_not_charged_to_it)
{
	struct nupp_smp_inflight f;
	__u64 now = 1000 * P, steal = 7 * P;
	int i, dropped = 0;

	memset(&f, 0, sizeof(f));
	/* Thread 1 runs; 3 periods stolen show at its last tick: 3 of its ticks go. */
	for (i = 0; i < 10; i++)
		nupp_smp_steal_tick(&f, now += P, steal, P, 1);
	steal += 3 * P;
	for (i = 0; i < 2; i++)
		dropped += nupp_smp_steal_tick(&f, now += P, steal, P, 1);
	ck_assert_int_eq(dropped, 2);
	/* Thread 2's first tick shows 5 more periods (the scheduler read the clock at the
	 * switch): neither those nor thread 1's last period of debt are taken from it. */
	steal += 5 * P;
	dropped = 0;
	for (i = 0; i < 20; i++)
		dropped += nupp_smp_steal_tick(&f, now += P, steal, P, 2);
	ck_assert_int_eq(dropped, 0);
	/* What is stolen while it runs is. */
	steal += 2 * P;
	for (i = 0; i < 20; i++)
		dropped += nupp_smp_steal_tick(&f, now += P, steal, P, 2);
	ck_assert_int_eq(dropped, 2);
}
END_TEST

NUPP_CHECK_MAIN("steal", 0, false, false, no_steal_drops_nothing, steal_in_slices_shorter_than_a_period_is_taken_off,
		a_long_steal_costs_the_one_tick_it_made, a_burst_is_taken_off_64_ticks_at_most,
		a_steal_clock_that_goes_back_is_ignored, steal_that_shows_at_another_threads_tick_is_not_charged_to_it,
		a_long_steal_shown_a_scheduler_tick_later_costs_nothing_more, old_lateness_does_not_hide_later_steal)
