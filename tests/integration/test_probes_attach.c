/* Every luajit:* probe of our LuaJIT attaches with libbpf 1.1.2 and fires with its
 * documented argument count on a script that exercises all of them. */
#include <check.h>

#include "nupp/abi.h"
#include "nupp/nupp.h"
#include "nupp_check.h"

/* Argument counts of scripts/luajit-usdt.patch, indexed by enum nupp_probe. */
static const int probe_nargs[NUPP_PROBES] = { 3, 1, 6, 6, 6, 5, 1, 4, 3, 2, 6 };

START_TEST(every_probe_attaches_and_fires)
{
	const char *args[] = { NUPP_TEST_DATA "/all_probes.lua", NULL };
	int attach_err[NUPP_PROBES], err = 0, i, st;
	struct nupp_probecheck *pc;
	int gate[2];
	pid_t pid;

	ck_assert_int_eq(pipe(gate), 0);
	pid = nupp_test_spawn_luajit(args, gate[0]);
	ck_assert_int_gt(pid, 0);
	close(gate[0]);
	pc = nupp_probecheck_open(NUPP_LUAJIT, pid, attach_err, &err);
	ck_assert_msg(pc, "probe check failed to load: %d %s", err, nupp_errmsg());
	for (i = 0; i < NUPP_PROBES; i++)
		ck_assert_msg(attach_err[i] == 0, "luajit:%s failed to attach: %s", nupp_probe_names[i],
			      strerror(-attach_err[i]));
	ck_assert_int_eq(write(gate[1], "x", 1), 1);
	close(gate[1]);
	st = nupp_test_reap(pid, 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "luajit all_probes.lua failed: status %d", st);
	for (i = 0; i < NUPP_PROBES; i++) {
		__u64 hits;
		int nargs;

		ck_assert_int_eq(nupp_probecheck_read(pc, i, &hits, &nargs), 0);
		ck_assert_msg(hits > 0, "luajit:%s never fired", nupp_probe_names[i]);
		ck_assert_msg(nargs == probe_nargs[i], "luajit:%s decoded %d arguments, want %d",
			      nupp_probe_names[i], nargs, probe_nargs[i]);
	}
	/* One VM: exactly one vm_open and one vm_close. */
	{
		__u64 h;
		int n;

		nupp_probecheck_read(pc, NUPP_PROBE_VM_OPEN, &h, &n);
		ck_assert_uint_eq(h, 1);
		nupp_probecheck_read(pc, NUPP_PROBE_VM_CLOSE, &h, &n);
		ck_assert_uint_eq(h, 1);
		nupp_probecheck_read(pc, NUPP_PROBE_TRACE_FLUSH, &h, &n);
		ck_assert_uint_eq(h, 1);
	}
	nupp_probecheck_close(pc);
}
END_TEST

NUPP_CHECK_MAIN("probes", 120, true, false, every_probe_attaches_and_fires)
