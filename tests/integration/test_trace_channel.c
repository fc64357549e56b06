/* The trace channel's controls: pause/resume, attaching to every process of a binary,
 * the libluajit shared library, zone ids read at each abort, and a full abort map. */
#include <limits.h>
#include <stdlib.h>

#include "nupp/nupp.h"
#include "nupp_trace_test.h"

static char tmpdir[256];

/* Forks path argv, blocked until *gate_w is written; returns the PID. */
static pid_t spawn_gated(const char *path, const char *const argv[], int *gate_w)
{
	int gate[2];
	pid_t pid;
	char c;

	ck_assert_int_eq(pipe(gate), 0);
	pid = fork();
	if (pid == 0) {
		close(gate[1]);
		if (read(gate[0], &c, 1) != 1)
			_exit(126);
		execv(path, (char **)argv);
		_exit(127);
	}
	ck_assert_int_gt(pid, 0);
	close(gate[0]);
	*gate_w = gate[1];
	return pid;
}

/* Releases a gated child and waits for it to exit 0. */
static void release_and_wait(pid_t pid, int gate_w, const char *what)
{
	int st;

	ck_assert_int_eq(write(gate_w, "g", 1), 1);
	close(gate_w);
	st = nupp_test_reap(pid, 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exited with status 0x%x", what, st);
}

/* Runs oracle.lua on tests/data/trace/<prog>.lua with the luajit at exe, files at prefix. */
static void run_oracle_with(const char *exe, const char *prog, const char *prefix)
{
	char script[512];
	const char *argv[] = { exe, TRACE_DATA "oracle.lua", prefix, script, NULL };
	int gate;
	pid_t pid;

	snprintf(script, sizeof(script), TRACE_DATA "%s.lua", prog);
	pid = spawn_gated(exe, argv, &gate);
	release_and_wait(pid, gate, prog);
}

/* A private copy of our luajit in tmpdir: probes attached to every process of it (PID
 * -1, one inode) see this test's processes only, not those of tests run alongside. */
static const char *private_luajit(void)
{
	static char path[300];
	char cmd[700];

	snprintf(path, sizeof(path), "%s/luajit", tmpdir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", NUPP_LUAJIT, path);
	ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
	return path;
}

/* Drains t and asserts its CSV equals the oracle's PREFIX.default.csv. */
static void assert_equals_oracle(struct nupp_trace *t, struct nupp_abort_set *set, const char *prefix)
{
	char path[512], opath[512], *ours, *theirs;

	ck_assert_int_eq(nupp_trace_drain(t, set), 0);
	nupp_abort_set_sort(set);
	snprintf(path, sizeof(path), "%s.bpf.csv", prefix);
	snprintf(opath, sizeof(opath), "%s.default.csv", prefix);
	trace_test_write_csv(set, path);
	ours = trace_test_slurp(path);
	theirs = trace_test_slurp(opath);
	ck_assert_msg(strcmp(ours, theirs) == 0, "table differs from LuaJIT's:\n--- ours\n%s--- LuaJIT\n%s", ours, theirs);
	ck_assert_uint_eq(set->total_aborts, trace_test_meta(prefix, "total_default"));
	free(ours);
	free(theirs);
}

START_TEST(trace_pause_then_resume_every_process)
{
	struct nupp_trace_opts o = { .sz = sizeof(o) };
	struct nupp_abort_set set = { 0 };
	struct nupp_trace_counters c;
	char p1[300], p2[300];
	struct nupp_trace *t;

	snprintf(p1, sizeof(p1), "%s/paused", tmpdir);
	snprintf(p2, sizeof(p2), "%s/resumed", tmpdir);
	const char *exe = private_luajit();

	t = trace_test_open(&o, exe, -1); /* every process of (a copy of) our luajit */
	ck_assert_int_eq(nupp_trace_pause(t, true), 0);
	run_oracle_with(exe, "fnew", p1);
	ck_assert_int_eq(nupp_trace_drain(t, &set), 0);
	ck_assert_uint_eq(set.n, 0);
	ck_assert_uint_eq(set.total_aborts, 0);
	ck_assert_int_eq(nupp_trace_counters(t, &c), 0);
	ck_assert_uint_eq(c.paused, trace_test_meta(p1, "total_benign")); /* each abort seen, none counted */
	ck_assert_int_eq(nupp_trace_pause(t, false), 0);
	ck_assert_int_eq(nupp_trace_pause(t, false), 0); /* idempotent */
	run_oracle_with(exe, "fnew", p2);
	assert_equals_oracle(t, &set, p2);
	ck_assert_uint_eq(set.n, 1);
	nupp_abort_set_free(&set);
	nupp_trace_close(t);
}
END_TEST

START_TEST(trace_shared_library_probes)
{
	char prefix[300], so[PATH_MAX];
	const char *host = NUPP_TEST_BIN "/prog_lua_host";
	const char *argv[] = { host, TRACE_DATA "oracle.lua", prefix, TRACE_DATA "uclo.lua", NULL };
	struct nupp_trace_opts o = { .sz = sizeof(o) };
	struct nupp_abort_set set = { 0 };
	struct nupp_trace *t;
	int gate;
	pid_t pid;

	ck_assert_ptr_nonnull(realpath(NUPP_LUAJIT_PREFIX "/lib/libluajit-5.1.so", so));
	snprintf(prefix, sizeof(prefix), "%s/host", tmpdir);
	pid = spawn_gated(host, argv, &gate);
	t = trace_test_open(&o, so, pid);
	release_and_wait(pid, gate, "prog_lua_host");
	assert_equals_oracle(t, &set, prefix);
	ck_assert_uint_eq(set.n, 1);
	ck_assert_str_eq(set.rows[0].reason, "NYI: bytecode UCLO");
	nupp_abort_set_free(&set);
	nupp_trace_close(t);
}
END_TEST

START_TEST(trace_full_map_is_counted)
{
	struct nupp_trace_opts o = { .sz = sizeof(o), .max_sites = 2 };
	struct nupp_abort_set set = { 0 };
	struct nupp_trace_counters c;
	char prefix[300], script[] = TRACE_DATA "names.lua";
	const char *argv[] = { NUPP_LUAJIT, TRACE_DATA "oracle.lua", prefix, script, NULL };
	struct nupp_trace *t;
	__u64 sum = 0;
	size_t i;
	int gate;
	pid_t pid;

	snprintf(prefix, sizeof(prefix), "%s/full", tmpdir);
	pid = spawn_gated(NUPP_LUAJIT, argv, &gate);
	t = trace_test_open(&o, NUPP_LUAJIT, pid);
	release_and_wait(pid, gate, "names.lua");
	ck_assert_int_eq(nupp_trace_drain(t, &set), 0);
	ck_assert_int_eq(nupp_trace_counters(t, &c), 0);
	ck_assert_uint_eq(set.n, 2); /* names.lua aborts at 4 sites */
	for (i = 0; i < set.n; i++)
		sum += set.rows[i].count;
	ck_assert_uint_gt(c.map_full, 0);
	ck_assert_uint_eq(sum + c.map_full, set.total_aborts);
	ck_assert_uint_eq(set.total_aborts, trace_test_meta(prefix, "total_default"));
	nupp_abort_set_free(&set);
	nupp_trace_close(t);
}
END_TEST

/* A session names each abort's zone id from the process's own nupp.zone table: a zone
 * pushed before the attach, none, and one pushed after. */
START_TEST(trace_zone_paths_from_the_zone_module)
{
	const char *argv[] = { NUPP_LUAJIT, TRACE_DATA "zone.lua", NULL };
	struct nupp_session_opts o = { .sz = sizeof(o), .aborts = true };
	struct nupp_session *ses;
	struct nupp_profile *p;
	struct nupp_trace_counters c;
	int in[2], out[2], st, seen = 0, err = 0;
	char line[128] = "";
	size_t i;
	FILE *fo;
	pid_t pid;

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
	ck_assert_str_eq(line, "ready\n");
	ses = nupp_session_open(&o, &err);
	ck_assert_msg(ses != NULL, "session: %s", nupp_errmsg());
	ck_assert_msg(nupp_session_attach(ses, pid) == 0, "attach: %s", nupp_errmsg());
	ck_assert_int_eq(nupp_session_start(ses), 0);
	ck_assert_int_eq(write(in[1], "\n", 1), 1);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), fo));
	ck_assert_str_eq(line, "done\n");
	p = nupp_session_stop(ses, &err);
	ck_assert_msg(p != NULL, "stop: %s", nupp_errmsg());
	ck_assert(nupp_session_zones_seen(ses));
	ck_assert_int_eq(write(in[1], "\n", 1), 1);
	close(in[1]);
	st = nupp_test_reap(pid, 0);
	fclose(fo);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "zone.lua exited with status 0x%x", st);
	ck_assert_int_eq(nupp_trace_counters(nupp_session_trace(ses), &c), 0);
	ck_assert_uint_eq(c.zone_faults, 0);
	ck_assert_uint_eq(p->aborts.n, 3);
	for (i = 0; i < p->aborts.n; i++) {
		const struct nupp_abort_row *r = &p->aborts.rows[i];
		const char *want = NULL;

		ck_assert_str_eq(r->reason, "NYI: bytecode FNEW");
		if (!strcmp(r->location, "zone render:1"))
			want = "frame/render", seen |= 1;
		else if (!strcmp(r->location, "zone none:1"))
			want = "", seen |= 2;
		else if (!strcmp(r->location, "zone io:1"))
			want = "io", seen |= 4;
		if (want)
			ck_assert_str_eq(r->zone_path, want);
		else
			ck_abort_msg("unexpected row at %s", r->location);
	}
	ck_assert_int_eq(seen, 7);
	nupp_session_profile_free(p);
	nupp_session_close(ses);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("trace_channel");
	TCase *tc = tcase_create("channel");
	SRunner *sr;
	int failed;

	nupp_test_need_root();
	trace_test_tmpdir(tmpdir, sizeof(tmpdir), "trace_channel");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, trace_pause_then_resume_every_process);
	tcase_add_test(tc, trace_shared_library_probes);
	tcase_add_test(tc, trace_full_map_is_counted);
	tcase_add_test(tc, trace_zone_paths_from_the_zone_module);
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
