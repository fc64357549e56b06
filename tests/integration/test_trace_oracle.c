/* The trace channel against LuaJIT's own account: each program under tests/data/trace
 * runs with our BPF probes and with oracle.lua's jit.attach handler in the same process;
 * the two abort tables must be byte-identical CSV, by default and with include_benign. */
#include <sys/stat.h>

#include "nupp_trace_test.h"

#define DATA TRACE_DATA

static char tmpdir[256];

/* The two sessions a run is checked with: default and include_benign. */
struct trace_pair {
	struct nupp_trace *def, *benign;
	struct nupp_abort_set def_set, benign_set;
};

/* Opens one trace session and attaches it to our luajit for pid. */
static struct nupp_trace *open_attached(bool benign, pid_t pid)
{
	struct nupp_trace_opts o = { .sz = sizeof(o), .include_benign = benign };

	return trace_test_open(&o, NUPP_LUAJIT, pid);
}

/* Drains t, writes its CSV next to the oracle's and asserts equality and totals. */
static void check_session(struct nupp_trace *t, struct nupp_abort_set *set, const char *prefix, bool benign)
{
	struct nupp_trace_counters c;
	char path[512], opath[512];
	char *ours, *theirs;

	ck_assert_int_eq(nupp_trace_drain(t, set), 0);
	nupp_abort_set_sort(set);
	snprintf(path, sizeof(path), "%s.bpf.%s.csv", prefix, benign ? "benign" : "default");
	snprintf(opath, sizeof(opath), "%s.%s.csv", prefix, benign ? "benign" : "default");
	trace_test_write_csv(set, path);
	ours = trace_test_slurp(path);
	theirs = trace_test_slurp(opath);
	ck_assert_msg(strcmp(ours, theirs) == 0, "%s table differs from LuaJIT's:\n--- ours (%s)\n%s--- LuaJIT (%s)\n%s",
		      benign ? "include_benign" : "default", path, ours, opath, theirs);
	ck_assert_uint_eq(set->total_aborts, trace_test_meta(prefix, benign ? "total_benign" : "total_default"));
	ck_assert_uint_eq(set->blacklisted, trace_test_meta(prefix, "blacklisted"));
	ck_assert_int_eq(nupp_trace_counters(t, &c), 0);
	ck_assert_uint_eq(c.map_full, 0);
	ck_assert_uint_eq(c.read_faults, 0);
	ck_assert_uint_eq(c.truncated, 0);
	ck_assert_uint_eq(c.bl_unmatched, 0);
	/* Every trace_blacklist event became exactly one blacklist count (action 2); the
	 * rest of blacklisted are stitch self-links (action 3), which have no such event. */
	ck_assert_uint_le(c.blacklist_events, c.blacklisted);
	free(ours);
	free(theirs);
}

/* Runs tests/data/trace/<name>.lua under oracle.lua, by the LuaJIT binary, with both
 * sessions attached from before the first instruction; returns the sessions drained and
 * checked. */
static void run_program_by(const char *binary, const char *name, struct trace_pair *p)
{
	char prog[512], prefix[512];
	const char *argv[] = { DATA "oracle.lua", prefix, prog, NULL };
	struct nupp_trace_opts def = { .sz = sizeof(def) }, benign = { .sz = sizeof(benign), .include_benign = true };
	int gate[2], st;
	pid_t pid;

	snprintf(prog, sizeof(prog), DATA "%s.lua", name);
	snprintf(prefix, sizeof(prefix), "%s/%s", tmpdir, name);
	ck_assert_int_eq(pipe(gate), 0);
	/* A test that gives up before attaching closes the gate: the child does not run. */
	pid = nupp_test_spawn(binary, argv, gate[0], gate[1]);
	ck_assert_int_gt(pid, 0);
	close(gate[0]);
	memset(p, 0, sizeof(*p));
	p->def = trace_test_open(&def, binary, pid);
	p->benign = trace_test_open(&benign, binary, pid);
	ck_assert_int_eq(write(gate[1], "g", 1), 1);
	close(gate[1]);
	st = nupp_test_reap(pid, 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exited with status 0x%x", name, st);
	check_session(p->def, &p->def_set, prefix, false);
	check_session(p->benign, &p->benign_set, prefix, true);
}

/* run_program_by our LuaJIT. */
static void run_program(const char *name, struct trace_pair *p)
{
	run_program_by(NUPP_LUAJIT, name, p);
}

/* Frees what run_program returned. */
static void pair_free(struct trace_pair *p)
{
	nupp_trace_close(p->def);
	nupp_trace_close(p->benign);
	nupp_abort_set_free(&p->def_set);
	nupp_abort_set_free(&p->benign_set);
}

/* The count of the row (severity, reason, location), or 0. */
static __u64 row_count(const struct nupp_abort_set *s, enum nupp_severity sev, const char *reason, const char *loc)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (s->rows[i].severity == sev && !strcmp(s->rows[i].reason, reason) && !strcmp(s->rows[i].location, loc))
			return s->rows[i].count;
	return 0;
}

/* Rows of a severity. */
static size_t rows_of(const struct nupp_abort_set *s, enum nupp_severity sev)
{
	size_t i, n = 0;

	for (i = 0; i < s->n; i++)
		n += s->rows[i].severity == sev;
	return n;
}

static const char *const programs[] = { "fnew", "uclo", "cfunc", "blacklist", "jitoff", "lleave", "mixtab", "names", "many" };

START_TEST(trace_table_equals_luajit)
{
	struct trace_pair p;

	run_program(programs[_i], &p);
	ck_assert_uint_gt(p.benign_set.total_aborts, 0); /* each program does abort */
	pair_free(&p);
}
END_TEST

START_TEST(trace_fnew_row_names_the_bytecode)
{
	struct trace_pair p;

	run_program("fnew", &p);
	ck_assert_uint_eq(p.def_set.n, 1);
	ck_assert_str_eq(p.def_set.rows[0].reason, "NYI: bytecode FNEW");
	ck_assert_str_eq(p.def_set.rows[0].location, "fnew.lua:3");
	ck_assert_uint_eq(p.def_set.rows[0].severity, NUPP_SEV_WARN);
	pair_free(&p);
}
END_TEST

START_TEST(trace_blacklist_counted_once)
{
	struct trace_pair p;
	struct nupp_trace_counters c;

	run_program("blacklist", &p);
	ck_assert_uint_eq(p.def_set.blacklisted, 1);
	ck_assert_uint_eq(rows_of(&p.def_set, NUPP_SEV_BLACKLIST), 1);
	ck_assert_uint_eq(row_count(&p.def_set, NUPP_SEV_BLACKLIST, "NYI: bytecode FNEW", "blacklist.lua:5"), 1);
	/* Penalties 72, ~144, ... double until the 11th abort exceeds PENALTY_MAX. */
	ck_assert_uint_eq(row_count(&p.def_set, NUPP_SEV_WARN, "NYI: bytecode FNEW", "blacklist.lua:5"), 10);
	ck_assert_uint_eq(p.def_set.n, 2);
	ck_assert_uint_eq(p.def_set.total_aborts, 11);
	ck_assert_int_eq(nupp_trace_counters(p.def, &c), 0);
	ck_assert_uint_eq(c.blacklist_events, 1);
	ck_assert_uint_eq(c.blacklisted, 1);
	pair_free(&p);
}
END_TEST

START_TEST(trace_benign_rows_only_with_include_benign)
{
	struct trace_pair p;
	struct nupp_trace_counters c;

	run_program("lleave", &p);
	ck_assert_uint_eq(p.def_set.n, 0);
	ck_assert_uint_eq(p.def_set.total_aborts, 0);
	ck_assert_uint_gt(rows_of(&p.benign_set, NUPP_SEV_INFO), 0);
	/* Without include_benign those aborts never reach the program: our LuaJIT fires them
	 * at luajit:trace_abort_benign, which is not attached (no probe call for them). */
	ck_assert_int_eq(nupp_trace_counters(p.def, &c), 0);
	ck_assert_uint_eq(c.benign_skipped, 0);
	ck_assert_uint_eq(c.total_aborts, 0);
	pair_free(&p);
}
END_TEST

START_TEST(trace_attach_to_running_process)
{
	char prefix[512];
	const char *argv[] = { NUPP_LUAJIT, DATA "oracle.lua", prefix, DATA "attach.lua", NULL };
	int in[2], out[2], st;
	unsigned long before = 0;
	char line[64] = "";
	struct trace_pair p;
	FILE *fo;
	pid_t pid;

	snprintf(prefix, sizeof(prefix), "%s/attach", tmpdir);
	ck_assert_int_eq(pipe(in), 0);
	ck_assert_int_eq(pipe(out), 0);
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execv(NUPP_LUAJIT, (char **)argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	fo = fdopen(out[0], "r");
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), fo));
	ck_assert_int_eq(sscanf(line, "ready %lu", &before), 1);
	ck_assert_uint_gt(before, 0); /* it was already aborting */
	memset(&p, 0, sizeof(p));
	p.def = open_attached(false, pid);
	p.benign = open_attached(true, pid);
	ck_assert_int_eq(write(in[1], "\n", 1), 1);
	close(in[1]);
	st = nupp_test_reap(pid, 0);
	fclose(fo);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "attach.lua exited with status 0x%x", st);
	check_session(p.def, &p.def_set, prefix, false);
	check_session(p.benign, &p.benign_set, prefix, true);
	ck_assert_uint_gt(p.def_set.total_aborts, 0);
	pair_free(&p);
}
END_TEST

/* Makes path a copy of our LuaJIT as a LuaJIT built before luajit:trace_abort_benign
 * existed: the site of that probe becomes one more site of luajit:trace_abort (its USDT
 * note renamed, its arguments moved up, the rest of its descriptor zeros), so benign
 * aborts fire trace_abort as they did then. */
static void make_luajit_without_benign_probe(const char *path)
{
	static const char old_name[] = "luajit\0trace_abort_benign"; /* provider, name */
	static const char new_name[] = "luajit\0trace_abort";
	size_t n, at, args, alen, i, found = 0;
	char *buf = NULL;
	FILE *f = fopen(NUPP_LUAJIT, "rb");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	ck_assert_int_gt(ftell(f), 0);
	n = (size_t)ftell(f);
	rewind(f);
	buf = malloc(n);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, n, f), n);
	fclose(f);
	for (at = 0; at + sizeof(old_name) < n; at++) {
		if (memcmp(buf + at, old_name, sizeof(old_name)) != 0) /* with the name's NUL */
			continue;
		args = at + sizeof(old_name);
		alen = strnlen(buf + args, n - args);
		ck_assert_uint_lt(args + alen, n);
		memcpy(buf + at, new_name, sizeof(new_name));
		memmove(buf + at + sizeof(new_name), buf + args, alen + 1);
		for (i = at + sizeof(new_name) + alen + 1; i <= args + alen; i++)
			buf[i] = 0;
		found++;
	}
	ck_assert_uint_eq(found, 1); /* one trace_abort_benign site in our LuaJIT */
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(path, 0755), 0);
	free(buf);
}

/* A LuaJIT built before luajit:trace_abort_benign: attaching with include_benign skips
 * the probe it lacks, and both tables still equal LuaJIT's own (the program tells the
 * benign aborts by their error code and leaves them out by default). */
START_TEST(trace_tables_equal_luajit_on_a_build_without_the_benign_probe)
{
	struct trace_pair p;
	struct nupp_trace_counters c;
	char old[512];

	snprintf(old, sizeof(old), "%s/luajit-old", tmpdir);
	make_luajit_without_benign_probe(old);
	run_program_by(old, "lleave", &p);
	ck_assert_uint_eq(p.def_set.n, 0);
	ck_assert_uint_gt(rows_of(&p.benign_set, NUPP_SEV_INFO), 0);
	/* This time the benign aborts reach the default session's program, which skips them. */
	ck_assert_int_eq(nupp_trace_counters(p.def, &c), 0);
	ck_assert_uint_eq(c.benign_skipped, p.benign_set.total_aborts);
	pair_free(&p);
	run_program_by(old, "blacklist", &p);
	ck_assert_uint_eq(p.def_set.blacklisted, 1);
	ck_assert_uint_eq(p.def_set.total_aborts, 11);
	pair_free(&p);
	unlink(old);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("trace_oracle");
	TCase *tc = tcase_create("oracle");
	SRunner *sr;
	int failed;

	nupp_test_need_root();
	trace_test_tmpdir(tmpdir, sizeof(tmpdir), "trace_oracle");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, trace_table_equals_luajit, 0, sizeof(programs) / sizeof(programs[0]));
	tcase_add_test(tc, trace_fnew_row_names_the_bytecode);
	tcase_add_test(tc, trace_blacklist_counted_once);
	tcase_add_test(tc, trace_benign_rows_only_with_include_benign);
	tcase_add_test(tc, trace_attach_to_running_process);
	tcase_add_test(tc, trace_tables_equal_luajit_on_a_build_without_the_benign_probe);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_VERBOSE);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (failed) {
		printf("oracle and BPF tables kept in %s\n", tmpdir);
		return 1;
	}
	return trace_test_rmdir(tmpdir);
}
