/* Benchmark driver: the time to aggregate N distinct synthetic stacks (each added twice,
 * as two drains would), to filter them (no filter, --zone, --root) and to write them as
 * the JSON profile and collapsed stacks. Prints one line per step in milliseconds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nupp/profile.h"

/* Monotonic milliseconds. */
static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A synthetic stack of row i: 12 frames, distinct for every i. */
static void stack_of(char *buf, size_t size, unsigned i)
{
	snprintf(buf, size,
		 "main.lua:main;app.lua:run;app.lua:loop;m%u.lua:a;m%u.lua:b%u;lib.lua:f%u;lib.lua:g;"
		 "lib.lua:h;x.lua:y;x.lua:z;leaf.lua:l%u;leaf.lua:x%u",
		 i % 7, i % 13, i % 101, i / 3, i % 977, i);
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 100000, i, pass;
	struct nupp_sample_set s = { 0 }, out = { 0 };
	struct nupp_abort_set ab = { 0 };
	struct nupp_profile_meta m = { .command = "bench", .backend = "bpf", .frequency_hz = 997, .depth = 64 };
	char buf[512];
	double t0, t1;
	FILE *f;

	t0 = now_ms();
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < n; i++) {
			struct nupp_sample_row c = { .count = 1, .compiled = 1 };

			stack_of(buf, sizeof(buf), i);
			if (nupp_sample_set_add(&s, i % 4 ? "" : "frame", buf, &c))
				return 1;
		}
	t1 = now_ms();
	printf("aggregate %u distinct stacks x2: %.1f ms (%zu rows, %llu samples)\n", n, t1 - t0, s.n,
	       (unsigned long long)s.samples);
	nupp_sample_set_sort(&s);
	t0 = now_ms();
	if (nupp_sample_set_filter(&s, NULL, NULL, &out))
		return 1;
	printf("final filter, no --zone/--root: %.1f ms\n", now_ms() - t0);
	nupp_sample_set_free(&out);
	t0 = now_ms();
	if (nupp_sample_set_filter(&s, "frame", "lib.lua", &out))
		return 1;
	printf("final filter, --zone frame --root lib.lua: %.1f ms (%zu rows)\n", now_ms() - t0, out.n);
	nupp_sample_set_free(&out);
	f = fopen("/dev/null", "w");
	t0 = now_ms();
	if (!f || nupp_write_profile_json(&m, &s, &ab, f))
		return 1;
	printf("write JSON profile: %.1f ms\n", now_ms() - t0);
	t0 = now_ms();
	if (nupp_write_collapsed(&s, f))
		return 1;
	printf("write collapsed stacks: %.1f ms\n", now_ms() - t0);
	fclose(f);
	nupp_sample_set_free(&s);
	return 0;
}
