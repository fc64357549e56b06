/* The real sampler on a workload with a known call graph (interpreted and compiled
 * code, builtins, a C function, table.sort with a Lua comparator, varargs, an __index
 * function, pcall, coroutine.wrap, two VMs in two threads): every sampled stack is a
 * path of that graph (the host's own code aside, on "[host];" rows), >= 10,000 samples,
 * <= 1 % lost. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_test.h"

#define MAX_EDGES 128

static char roots[16][128], edges[MAX_EDGES][2][128];
static int nroots, nedges;

/* Loads callgraph.expect. */
static void load_graph(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512], a[128], b[128];

	ck_assert_msg(f != NULL, "cannot open %s", path);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "root %127s", a) == 1 && nroots < 16)
			snprintf(roots[nroots++], 128, "%s", a);
		else if (sscanf(line, "edge %127s %127s", a, b) == 2 && nedges < MAX_EDGES) {
			snprintf(edges[nedges][0], 128, "%s", a);
			snprintf(edges[nedges++][1], 128, "%s", b);
		}
	}
	fclose(f);
	ck_assert_int_gt(nroots, 0);
	ck_assert_int_gt(nedges, 10);
}

/* Is "a -> b" an edge of the graph? */
static int is_edge(const char *a, const char *b)
{
	int i;

	for (i = 0; i < nedges; i++)
		if (strcmp(edges[i][0], a) == 0 && strcmp(edges[i][1], b) == 0)
			return 1;
	return 0;
}

/* Is the stack ("root;...;leaf") a path of the graph from a root? */
static int is_path(const char *stack)
{
	char buf[4096], *save = NULL, *tok, prev[128] = "";
	int i, first = 1;

	snprintf(buf, sizeof(buf), "%s", stack);
	for (tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
		if (first) {
			for (i = 0; i < nroots; i++)
				if (strcmp(roots[i], tok) == 0)
					break;
			if (i == nroots)
				return 0;
			first = 0;
		} else if (!is_edge(prev, tok)) {
			return 0;
		}
		snprintf(prev, sizeof(prev), "%s", tok);
	}
	return !first;
}

START_TEST(sampler_stacks_are_paths_of_the_call_graph)
{
	struct nupp_sampler_opts o = { .sz = sizeof(o), .freq_hz = 4999 };
	struct nupp_sample_set set = { 0 };
	char prog[512], script[512];
	char *argv[] = { prog, script, "main", "8", NULL };
	unsigned long long bad = 0, lost, host = 0;
	size_t i;
	__u64 ns = 0, cnt = 0;

	snprintf(prog, sizeof(prog), "%s/prog_sampler_host", NUPP_TEST_BIN);
	snprintf(script, sizeof(script), "%s/sampler/callgraph.lua", NUPP_TEST_DATA);
	load_graph(NUPP_TEST_DATA "/sampler/callgraph.expect");
	/* Attached before the VMs open: they are learned from luajit:vm_open. */
	ck_assert_int_eq(smp_profile(argv, &o, &set, &ns, &cnt), 0);
	smp_print(&set, getenv("NUPP_TEST_VERBOSE") ? 1000 : 30);
	if (cnt)
		printf("bpf: run_cnt %llu, %llu ns per sample\n", (unsigned long long)cnt,
		       (unsigned long long)(ns / cnt));
	for (i = 0; i < set.n; i++) {
		/* The C host's own code (opening the VMs, loading the script, joining): not a
		 * Lua stack, and below 1 % of the samples here. */
		if (strncmp(set.rows[i].stack, "[host];", 7) == 0) {
			host += set.rows[i].count;
			continue;
		}
		if (!is_path(set.rows[i].stack)) {
			printf("NOT A PATH (%llu): %s\n", (unsigned long long)set.rows[i].count, set.rows[i].stack);
			bad += set.rows[i].count;
		}
	}
	/* Every frame kind and mechanism of the workload was seen and named. */
	{
		static const char *const must[] = {
			"callgraph.lua:step;callgraph.lua:hot_loop",               /* compiled loop */
			"callgraph.lua:use_ff;math.floor",                         /* fast function */
			"callgraph.lua:c_call;host_spin",                          /* lua_pushcfunction */
			"callgraph.lua:sorter;table.sort;callgraph.lua:25",        /* Lua comparator */
			"callgraph.lua:vararg_fn;callgraph.lua:leaf_interp",       /* varargs */
			"callgraph.lua:meta;callgraph.lua:__index",                /* metamethod */
			"callgraph.lua:protected;pcall;callgraph.lua:5",           /* pcall */
			"coroutine.wrap_aux;[coroutine];callgraph.lua:54",         /* coroutine chain */
			"callgraph.lua:c_callback;host_callback;callgraph.lua:5", /* C calling Lua */
		};
		size_t m;

		for (m = 0; m < sizeof(must) / sizeof(must[0]); m++) {
			__u64 n = 0;

			for (i = 0; i < set.n; i++)
				if (strstr(set.rows[i].stack, must[m]))
					n += set.rows[i].count;
			ck_assert_msg(n > 0, "no sample on %s", must[m]);
		}
	}
	lost = smp_lost(&set);
	ck_assert_msg(bad == 0, "%llu samples on stacks that are not paths of the call graph", bad);
	printf("host code: %llu samples\n", host);
	ck_assert_uint_eq(host, set.host_samples);
	ck_assert_msg(host * 100 < set.samples, "%llu of %llu samples in host code", host,
		      (unsigned long long)set.samples);
	ck_assert_msg(set.samples >= 10000, "only %llu samples", (unsigned long long)set.samples);
	ck_assert_msg(lost * 100 <= set.samples + lost, "lost %llu of %llu samples (> 1 %%)", lost,
		      (unsigned long long)(set.samples + lost));
	nupp_sample_set_free(&set);
}
END_TEST

/* Print callback for NUPP_TEST_VERBOSE. */
static int print_cb(enum nupp_log_level level, const char *fmt, va_list ap)
{
	return vfprintf(stdout, fmt, ap);
}

/* Runs the suite. */
int main(void)
{
	Suite *su = suite_create("sampler_callgraph");
	TCase *tc = tcase_create("callgraph");
	SRunner *sr;
	int failed;

	nupp_test_need_root();
	if (getenv("NUPP_TEST_VERBOSE"))
		nupp_set_print(print_cb);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, sampler_stacks_are_paths_of_the_call_graph);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
