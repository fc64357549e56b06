/* nupp_doctor_verdict(), the one-call verdict for in-process sessions (profile.available(),
 * which nupp_available() returns): 0 as root on the machine and on a process of our
 * LuaJIT; -EPERM naming the missing capability as an unprivileged user; -ENOENT for a
 * process that is not LuaJIT; -ENOTSUP for Debian's unpatched LuaJIT; -ESRCH for no
 * process. And nupp_doctor_run's contract: checks in enum order, the blocker, bad options. */
#include <check.h>

#include "nupp_check.h"
#include <grp.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>

#include "nupp/doctor.h"
#include "nupp/nupp.h"

/* Runs nupp_doctor_verdict(pid) in a child as uid/gid 65534 with no capabilities; its
 * result in *err and its message in msg. */
static void verdict_as_nobody(int pid, int *err, char *msg, size_t size)
{
	int fds[2];
	pid_t c;
	ssize_t n;

	ck_assert_int_eq(pipe(fds), 0);
	c = fork();
	if (c == 0) {
		char why[1024];
		int e;

		close(fds[0]);
		if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(100);
		e = nupp_doctor_verdict(pid, why, sizeof(why));
		if (write(fds[1], &e, sizeof(e)) != sizeof(e) || write(fds[1], why, strlen(why)) < 0)
			_exit(101);
		_exit(0);
	}
	close(fds[1]);
	ck_assert_int_eq(read(fds[0], err, sizeof(*err)), sizeof(*err));
	n = read(fds[0], msg, size - 1);
	msg[n > 0 ? n : 0] = 0;
	close(fds[0]);
	ck_assert_int_eq(nupp_test_reap(c, 0), 0);
}

START_TEST(root_can_profile_here_and_our_luajit)
{
	const char *argv[] = { "-e", "local t = os.clock() while os.clock() - t < 20 do end", NULL };
	pid_t lj = nupp_test_spawn_luajit(argv, -1);
	char why[1024];
	int i;

	ck_assert_msg(nupp_doctor_verdict(-1, why, sizeof(why)) == 0, "%s", why);
	ck_assert_str_eq(why, "");
	/* Our LuaJIT: once its VM is open (it is, after a moment). */
	for (i = 0; i < 100 && nupp_doctor_verdict(lj, NULL, 0) != 0; i++)
		usleep(20000);
	ck_assert_msg(nupp_doctor_verdict(lj, why, sizeof(why)) == 0, "%s", why);
	/* This test program itself (pid 0: this process) is not LuaJIT. */
	ck_assert_int_eq(nupp_doctor_verdict(0, why, sizeof(why)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(why, "is not running LuaJIT"));
	nupp_test_reap(lj, SIGKILL);
}
END_TEST

START_TEST(unprivileged_is_refused_naming_the_capability)
{
	char msg[1024];
	int err = 0;

	verdict_as_nobody(-1, &err, msg, sizeof(msg));
	ck_assert_int_eq(err, -EPERM);
	/* Every missing capability at once, what each is for, and how to grant them. */
	ck_assert_msg(strstr(msg, "missing CAP_BPF (to load BPF programs and maps), CAP_PERFMON (") &&
			      strstr(msg, "CAP_SYS_PTRACE (") && strstr(msg, "CAP_SYS_ADMIN (") &&
			      strstr(msg, "run as root (sudo)") && strstr(msg, "setcap cap_bpf,cap_perfmon"),
		      "%s", msg);
}
END_TEST

/* Sets this thread's effective capabilities to the permitted ones less cap (-1: none less). */
static void caps_drop_effective(int cap)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	ck_assert_int_eq(syscall(SYS_capget, &h, d), 0);
	d[0].effective = d[0].permitted;
	d[1].effective = d[1].permitted;
	if (cap >= 0)
		d[cap / 32].effective &= ~(1u << (cap % 32));
	ck_assert_int_eq(syscall(SYS_capset, &h, d), 0);
}

/* nupp_available is the verdict; the verdict keeps what it tried only for the same
 * capabilities: dropping CAP_SYS_ADMIN from the effective set makes it try again and
 * refuse (the uprobe cannot be created), and raising it again makes it accept. */
START_TEST(available_is_the_verdict_and_follows_the_capabilities)
{
	char a[1024], b[1024];
	int st;
	pid_t c = fork();

	if (c == 0) {
		int e1, e2, e3;

		e1 = nupp_available(-1, a, sizeof(a));
		caps_drop_effective(CAP_SYS_ADMIN);
		e2 = nupp_available(-1, a, sizeof(a));
		if (nupp_doctor_verdict(-1, b, sizeof(b)) != e2 || strcmp(a, b))
			_exit(10);
		caps_drop_effective(-1);
		e3 = nupp_available(-1, b, sizeof(b));
		if (e1 != 0)
			_exit(11);
		if (e2 != -EPERM || !strstr(a, "missing CAP_SYS_ADMIN (this kernel wants it for uprobes: creating a uprobe"))
			_exit(12);
		_exit(e3 == 0 ? 0 : 13);
	}
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child exit %d", WEXITSTATUS(st));
}
END_TEST

START_TEST(targets_that_cannot_be_profiled)
{
	const char *lj[] = { "/usr/bin/luajit", "-e", "local t = os.clock() while os.clock() - t < 20 do end", NULL };
	pid_t other = fork(), plain;

	if (other == 0) {
		pause();
		_exit(0);
	}
	ck_assert_int_eq(nupp_doctor_verdict(other, NULL, 0), -ENOENT);
	ck_assert_msg(strstr(nupp_errmsg(), "LuaJIT: PID") && strstr(nupp_errmsg(), "is not running LuaJIT"), "%s",
		      nupp_errmsg());
	nupp_test_reap(other, SIGKILL);
	ck_assert_int_eq(nupp_doctor_verdict(4194303, NULL, 0), -ESRCH);
	ck_assert_ptr_nonnull(strstr(nupp_errmsg(), "no such process: PID 4194303"));

	plain = fork();
	if (plain == 0) {
		execv(lj[0], (char **)lj);
		_exit(127);
	}
	usleep(300000);
	ck_assert_int_eq(nupp_doctor_verdict(plain, NULL, 0), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(nupp_errmsg(), "has no nupp-bpf probes and layout"));
	nupp_test_reap(plain, SIGKILL);
}
END_TEST

START_TEST(doctor_run_fills_checks_in_order)
{
	struct nupp_doctor_opts o = { .sz = sizeof(o), .quick = true };
	struct nupp_check c[NUPP_CHECK__MAX];
	int n, i;

	n = nupp_doctor_run(&o, c, NUPP_CHECK__MAX);
	ck_assert_int_eq(n, NUPP_CHECK_PROCESS);
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(c[i].id, i);
		ck_assert_ptr_nonnull(c[i].name);
		ck_assert(c[i].detail[0]);
		ck_assert_msg(c[i].status != NUPP_CHECK_FAIL || c[i].remedy[0], "%s fails without a remedy", c[i].name);
	}
	ck_assert_int_eq(c[NUPP_CHECK_CHANNELS].status, NUPP_CHECK_SKIP);
	ck_assert_ptr_null(nupp_doctor_blocker(c, n));
	o.pid = getpid();
	ck_assert_int_eq(nupp_doctor_run(&o, c, NUPP_CHECK_PROCESS), -EINVAL);
	ck_assert_int_eq(nupp_doctor_run(&o, c, NUPP_CHECK__MAX), NUPP_CHECK__MAX);
	/* This test program is not LuaJIT. */
	ck_assert_int_eq(nupp_doctor_blocker(c, NUPP_CHECK__MAX)->id, NUPP_CHECK_LUAJIT);
	ck_assert_str_eq(nupp_check_status_name(NUPP_CHECK_FAIL), "FAIL");
}
END_TEST

NUPP_CHECK_MAIN("available", 120, true, false, root_can_profile_here_and_our_luajit,
		unprivileged_is_refused_naming_the_capability, available_is_the_verdict_and_follows_the_capabilities,
		targets_that_cannot_be_profiled,
		doctor_run_fills_checks_in_order)
