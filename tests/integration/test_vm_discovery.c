/* Finding a LuaJIT VM: from luajit:vm_open when the process starts under us, and from
 * the exported layout and VM list when it was already running. */
#include <check.h>

#include "nupp/nupp.h"
#include "nupp_check.h"

#define BUSY_LUA "local t = os.clock() while os.clock() - t < 30 do end"

/* Reads vmstate through g and checks it is a state LuaJIT stores (lj_obj.h:528-539).
 * Right after luajit:vm_open it may still be 0: lua_newstate zeroes GG_State and sets no
 * state; the VM sets one when it first runs (vm_x64.dasc set_vmstate). Never after. */
static void check_vmstate(pid_t pid, const struct nupp_vm *vm)
{
	const struct nupp_lj_layout *lo = &vm->layout;
	__u64 J = vm->g + (__s64)lo->gg_g2j;
	__u32 sizetrace = 0;
	int i, ran = 0, wait;

	/* 20 checks once it runs, within 2 s. */
	for (i = 0, wait = 0; i < 20 && wait < 1000; wait++) {
		__s32 st = 0;

		ck_assert_int_eq(nupp_vm_read(pid, vm->g + lo->g_vmstate, &st, sizeof(st)), 0);
		/* The trace array only grows: read its size after the state. */
		ck_assert_int_eq(nupp_vm_read(pid, J + lo->J_sizetrace, &sizetrace, sizeof(sizetrace)), 0);
		usleep(2000);
		if (st == 0 && sizetrace == 0 && !ran)
			continue; /* not run yet */
		ran = 1;
		i++;
		ck_assert_msg((st >= lo->vmst_asm && st <= lo->vmst_interp) || (st > 0 && (__u32)st < sizetrace),
			      "vmstate %d is not a LuaJIT state (sizetrace %u)", st, sizetrace);
	}
	ck_assert_msg(ran, "vmstate stayed 0 for 2 s: the VM never ran");
}

/* Checks the identities of a VM and that its layout is the one its binary exports. */
static void check_vm(pid_t pid, const struct nupp_vm *vm)
{
	ck_assert_uint_eq(vm->layout.magic, NUPP_LJ_LAYOUT_MAGIC);
	ck_assert_uint_eq(vm->layout.version, NUPP_LJ_LAYOUT_VERSION);
	ck_assert_uint_eq(vm->L, vm->g + (__s64)vm->layout.gg_g2l);
	ck_assert_int_eq(nupp_vm_validate(pid, vm->g, &vm->layout), 0);
	/* A wrong g fails the identities. */
	ck_assert_int_ne(nupp_vm_validate(pid, vm->g + 8, &vm->layout), 0);
	check_vmstate(pid, vm);
}

START_TEST(vm_open_reports_g_of_new_process)
{
	const char *args[] = { "-e", BUSY_LUA, NULL };
	struct nupp_vmwatch_opts o = { .sz = sizeof(o), .binary = NUPP_LUAJIT };
	struct nupp_vm vm, found[4];
	struct nupp_vmwatch *w;
	int gate[2], err = 0, r = 0, i, n;
	pid_t pid;

	ck_assert_int_eq(pipe(gate), 0);
	pid = nupp_test_spawn_luajit(args, gate[0]);
	close(gate[0]);
	o.pid = pid;
	w = nupp_vmwatch_open(&o, &err);
	ck_assert_msg(w, "vmwatch: %d %s", err, nupp_errmsg());
	ck_assert_int_eq(write(gate[1], "x", 1), 1);
	for (i = 0; i < 100 && r == 0; i++)
		r = nupp_vmwatch_next(w, 100, &vm);
	ck_assert_int_eq(r, 1);
	ck_assert_int_eq(vm.pid, pid);
	check_vm(pid, &vm);
	nupp_vmwatch_close(w);

	/* The late-attach path finds exactly the g that vm_open reported. */
	n = nupp_vm_find(pid, found, 4);
	ck_assert_int_eq(n, 1);
	ck_assert_uint_eq(found[0].g, vm.g);
	ck_assert_int_eq(memcmp(&found[0].layout, &vm.layout, sizeof(vm.layout)), 0);
	close(gate[1]);
	nupp_test_reap(pid, SIGKILL);
}
END_TEST

/* Starts prog_host with n VMs and reads the lua_State pointers it prints. */
static pid_t start_host(int n, __u64 *Ls, int *in_fd)
{
	int out[2], in[2], i;
	char nbuf[8];
	pid_t pid;
	FILE *f;

	ck_assert_int_eq(pipe(out), 0);
	ck_assert_int_eq(pipe(in), 0);
	snprintf(nbuf, sizeof(nbuf), "%d", n);
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(NUPP_TEST_BIN "/prog_host", "prog_host", nbuf, BUSY_LUA, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	f = fdopen(out[0], "r");
	for (i = 0; i < n; i++) {
		unsigned long long v = 0;
		char line[64];

		ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
		ck_assert_int_eq(sscanf(line, "L=%llx", &v), 1);
		Ls[i] = v;
	}
	fclose(f);
	*in_fd = in[1];
	return pid;
}

START_TEST(late_attach_finds_g_of_running_host)
{
	struct nupp_vm vms[4];
	__u64 Ls[2];
	int in_fd, n, i;
	pid_t pid = start_host(2, Ls, &in_fd);

	/* The host is past luaL_newstate and running Lua: no probe has been attached. */
	n = nupp_vm_find(pid, vms, 4);
	ck_assert_msg(n == 2, "found %d VMs: %s", n, n < 0 ? nupp_errmsg() : "");
	for (i = 0; i < 2; i++) {
		ck_assert_msg(vms[i].L == Ls[0] || vms[i].L == Ls[1], "VM %d: L=%llx not printed by the host", i,
			      (unsigned long long)vms[i].L);
		ck_assert_msg(strstr(vms[i].path, "libluajit-5.1.so"), "VM found in %s", vms[i].path);
		check_vm(pid, &vms[i]);
	}
	ck_assert_uint_ne(vms[0].g, vms[1].g);
	close(in_fd);
	nupp_test_reap(pid, SIGKILL);
}
END_TEST

START_TEST(find_errors_name_the_cause)
{
	struct nupp_vm vm;
	pid_t pid;
	int st;

	ck_assert_int_eq(nupp_vm_find(4194303, &vm, 1), -ESRCH);
	ck_assert_ptr_nonnull(strstr(nupp_errmsg(), "no such process"));
	pid = fork();
	if (pid == 0) {
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	usleep(100000);
	ck_assert_int_eq(nupp_vm_find(pid, &vm, 1), -ENOENT);
	ck_assert_ptr_nonnull(strstr(nupp_errmsg(), "not running LuaJIT"));
	st = nupp_test_reap(pid, SIGKILL);
	ck_assert(WIFSIGNALED(st));
}
END_TEST

NUPP_CHECK_MAIN("vm_discovery", 120, true, false,
		vm_open_reports_g_of_new_process,
		late_attach_finds_g_of_running_host,
		find_errors_name_the_cause)
