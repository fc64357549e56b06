/* Doctor: tries each piece record needs (privileges, kernel features, a target's LuaJIT)
 * and says, per check, what was found and what to do. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "nupp/doctor.h"
#include "nupp/sampler.h"
#include "nupp/trace.h"
#include "nupp_internal.h"
#include "doctor.skel.h"

#define DOCTOR_BPF_FS_MAGIC 0xcafe4a11
#define DOCTOR_TRACEFS_MAGIC 0x74726163
#define DOCTOR_DEBUGFS_MAGIC 0x64626720
#define DOCTOR_MAX_CPUS 1024
#define DOCTOR_ENOUGH_MEMLOCK (128ull << 20) /* more than record's maps take at their defaults */

/* What the checks learn and later checks use. */
struct doctor {
	struct nupp_check c[NUPP_CHECK__MAX];
	unsigned long long capeff;
	struct doctor_bpf *skel; /* loaded, or NULL */
	int bpf_err;
	int uprobe_err;          /* 0 fired; -errno of the failed step */
	const char *uprobe_step; /* which step failed */
	bool verdict;            /* for nupp_doctor_verdict: a uprobe is created, not fired */
};

/* -- Results ------------------------------------------------------------------ */

static const char *const doctor_names[NUPP_CHECK__MAX] = {
	[NUPP_CHECK_USER] = "user",
	[NUPP_CHECK_CAP_BPF] = "CAP_BPF",
	[NUPP_CHECK_CAP_PERFMON] = "CAP_PERFMON",
	[NUPP_CHECK_CAP_SYS_PTRACE] = "CAP_SYS_PTRACE",
	[NUPP_CHECK_CAP_SYS_ADMIN] = "CAP_SYS_ADMIN",
	[NUPP_CHECK_BTF] = "kernel BTF",
	[NUPP_CHECK_BPF] = "BPF programs",
	[NUPP_CHECK_PERF] = "perf events",
	[NUPP_CHECK_UPROBES] = "uprobes",
	[NUPP_CHECK_BPFFS] = "bpffs",
	[NUPP_CHECK_TRACEFS] = "tracefs",
	[NUPP_CHECK_MEMLOCK] = "locked memory",
	[NUPP_CHECK_CHANNELS] = "record's programs",
	[NUPP_CHECK_PROCESS] = "process",
	[NUPP_CHECK_LUAJIT] = "LuaJIT",
	[NUPP_CHECK_BUILD] = "nupp-bpf build",
	[NUPP_CHECK_PROBES] = "USDT probes",
	[NUPP_CHECK_GC64] = "GC64",
	[NUPP_CHECK_VMS] = "Lua VMs",
	[NUPP_CHECK_BINARY] = "binary",
};

/* "ok", "note", "warn", "FAIL" or "skip". */
const char *nupp_check_status_name(enum nupp_check_status s)
{
	switch (s) {
	case NUPP_CHECK_OK:
		return "ok";
	case NUPP_CHECK_NOTE:
		return "note";
	case NUPP_CHECK_WARN:
		return "warn";
	case NUPP_CHECK_FAIL:
		return "FAIL";
	case NUPP_CHECK_SKIP:
		return "skip";
	}
	return "?";
}

/* Sets a check's status, error and detail line. */
static void __attribute__((format(printf, 5, 6)))
doctor_set(struct doctor *d, enum nupp_check_id id, enum nupp_check_status st, int err, const char *fmt, ...)
{
	struct nupp_check *c = &d->c[id];
	va_list ap;

	c->id = id;
	c->name = doctor_names[id];
	c->status = st;
	c->err = err;
	va_start(ap, fmt);
	vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
	va_end(ap);
}

/* Sets a check's remedy. */
static void __attribute__((format(printf, 3, 4))) doctor_remedy(struct doctor *d, enum nupp_check_id id, const char *fmt,
								...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->c[id].remedy, sizeof(d->c[id].remedy), fmt, ap);
	va_end(ap);
}

/* True if the check worked (ok or note). */
static bool doctor_ok(const struct doctor *d, enum nupp_check_id id)
{
	return d->c[id].status == NUPP_CHECK_OK || d->c[id].status == NUPP_CHECK_NOTE ||
	       d->c[id].status == NUPP_CHECK_WARN;
}

/* Reads a small text file into buf (trailing newline cut); 0 or -errno. */
static int doctor_read_text(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = 0;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

/* Reads an integer sysctl under /proc/sys; the value or def when unreadable. */
static long doctor_sysctl(const char *path, long def)
{
	char buf[64];

	return doctor_read_text(path, buf, sizeof(buf)) ? def : strtol(buf, NULL, 10);
}

/* -- Privileges ----------------------------------------------------------------- */

/* The effective capability set of this thread. */
static unsigned long long doctor_capeff(void)
{
	unsigned long long eff = 0;
	char line[256];
	FILE *f = fopen("/proc/self/status", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	if (f)
		fclose(f);
	return eff;
}

/* True if the capability is in this thread's effective set. */
static bool doctor_has(const struct doctor *d, int cap)
{
	return d->capeff & (1ull << cap);
}

/* The user line and the three capabilities record refuses to run without. */
static void doctor_privileges(struct doctor *d)
{
	static const struct {
		enum nupp_check_id id;
		int cap;
		const char *why;
	} caps[] = {
		{ NUPP_CHECK_CAP_BPF, CAP_BPF, "loading BPF programs and maps" },
		{ NUPP_CHECK_CAP_PERFMON, CAP_PERFMON, "CPU-clock perf events for every process, tracing programs" },
		{ NUPP_CHECK_CAP_SYS_PTRACE, CAP_SYS_PTRACE, "reading the target's memory (process_vm_readv)" },
	};
	const char *sudo = getenv("SUDO_USER");
	size_t i;

	d->capeff = doctor_capeff();
	if (geteuid() == 0)
		doctor_set(d, NUPP_CHECK_USER, NUPP_CHECK_OK, 0, "root (uid 0%s%s)", sudo ? ", via sudo from " : "",
			   sudo ? sudo : "");
	else
		doctor_set(d, NUPP_CHECK_USER, NUPP_CHECK_NOTE, 0, "uid %u, not root: the capabilities below decide",
			   (unsigned)geteuid());
	for (i = 0; i < NUPP_ARRAY_SIZE(caps); i++) {
		if (doctor_has(d, caps[i].cap)) {
			doctor_set(d, caps[i].id, NUPP_CHECK_OK, 0, "present: for %s", caps[i].why);
			continue;
		}
		doctor_set(d, caps[i].id, NUPP_CHECK_FAIL, -EPERM, "missing: needed for %s", caps[i].why);
		doctor_remedy(d, caps[i].id,
			      "run with sudo, or grant it to the binary: sudo setcap "
			      "cap_bpf,cap_perfmon,cap_sys_ptrace,cap_sys_admin+ep nupp-bpf");
	}
}

/* -- Kernel --------------------------------------------------------------------- */

/* Kernel BTF: the sampler's programs use BTF-typed task access (bpf_get_current_task_btf). */
static void doctor_btf(struct doctor *d)
{
	struct stat st;

	if (stat("/sys/kernel/btf/vmlinux", &st) == 0 && access("/sys/kernel/btf/vmlinux", R_OK) == 0) {
		doctor_set(d, NUPP_CHECK_BTF, NUPP_CHECK_OK, 0, "/sys/kernel/btf/vmlinux (%.1f MB)",
			   st.st_size / 1e6);
		return;
	}
	doctor_set(d, NUPP_CHECK_BTF, NUPP_CHECK_FAIL, -errno, "/sys/kernel/btf/vmlinux: %s", strerror(errno));
	doctor_remedy(d, NUPP_CHECK_BTF, "use a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian's are)");
}

/* Loads the doctor's two programs, and probes the helpers and map type the sampler uses. */
static void doctor_bpf(struct doctor *d)
{
	static const struct {
		enum bpf_func_id id;
		const char *name, *since;
	} helpers[] = {
		{ BPF_FUNC_loop, "bpf_loop", "5.17" },
		{ BPF_FUNC_task_pt_regs, "bpf_task_pt_regs", "5.15" },
		{ BPF_FUNC_get_current_task_btf, "bpf_get_current_task_btf", "5.11" },
		{ BPF_FUNC_ringbuf_reserve, "bpf_ringbuf_reserve", "5.8" },
	};
	long unpriv = doctor_sysctl("/proc/sys/kernel/unprivileged_bpf_disabled", -1);
	char missing[256] = "";
	size_t i;
	int err;

	d->skel = doctor_bpf__open();
	if (!d->skel) {
		err = -errno;
		doctor_set(d, NUPP_CHECK_BPF, NUPP_CHECK_FAIL, err, "cannot open a BPF object: %s", strerror(-err));
		d->bpf_err = err;
		return;
	}
	err = doctor_bpf__load(d->skel);
	if (err) {
		doctor_bpf__destroy(d->skel);
		d->skel = NULL;
		d->bpf_err = err;
		doctor_set(d, NUPP_CHECK_BPF, NUPP_CHECK_FAIL, err, "loading a perf_event program fails: %s%s",
			   strerror(-err),
			   unpriv > 0 && !doctor_has(d, CAP_BPF) ? " (kernel.unprivileged_bpf_disabled is set)" : "");
		if (!doctor_has(d, CAP_BPF) || !doctor_has(d, CAP_PERFMON))
			doctor_remedy(d, NUPP_CHECK_BPF, "run with sudo, or grant CAP_BPF and CAP_PERFMON");
		else
			doctor_remedy(d, NUPP_CHECK_BPF, "run with -vv to see libbpf's reason");
		return;
	}
	for (i = 0; i < NUPP_ARRAY_SIZE(helpers); i++)
		if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, helpers[i].id, NULL) != 1)
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s (Linux %s)",
				 missing[0] ? ", " : "", helpers[i].name, helpers[i].since);
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) != 1)
		snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%sring buffer maps (Linux 5.8)",
			 missing[0] ? ", " : "");
	if (missing[0]) {
		doctor_set(d, NUPP_CHECK_BPF, NUPP_CHECK_FAIL, -ENOTSUP, "programs load, but the kernel lacks %s",
			   missing);
		doctor_remedy(d, NUPP_CHECK_BPF, "use Linux 5.17 or later");
		return;
	}
	doctor_set(d, NUPP_CHECK_BPF, NUPP_CHECK_OK, 0,
		   "a perf_event and a uprobe program load; bpf_loop, bpf_task_pt_regs, "
		   "bpf_get_current_task_btf and ring buffers are available");
}

/* perf_event_open(2). */
static int doctor_perf_open(struct perf_event_attr *a, pid_t pid, int cpu)
{
	return (int)syscall(__NR_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* Parses /sys/devices/system/cpu/online ("0-1,4") into cpus[]; count or -errno. */
static int doctor_online_cpus(int *cpus, int max)
{
	char buf[4096], *p = buf;
	int n = 0, err = doctor_read_text("/sys/devices/system/cpu/online", buf, sizeof(buf));

	if (err)
		return err;
	while (*p) {
		char *end;
		long a = strtol(p, &end, 10), b = a;

		if (end == p)
			break;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			p = end;
		}
		for (; a <= b && n < max; a++)
			cpus[n++] = (int)a;
		if (*p == ',')
			p++;
		else
			break;
	}
	return n ? n : -ENOENT;
}

/* The CPU time of this thread, in seconds. */
static double doctor_cputime(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Opens a CPU-clock sampling event for every process on each online CPU, as the sampler
 * does; with the doctor's program loaded, attaches it and spins until a sample arrives. */
static void doctor_perf(struct doctor *d)
{
	long paranoid = doctor_sysctl("/proc/sys/kernel/perf_event_paranoid", 2);
	struct bpf_link *links[DOCTOR_MAX_CPUS] = { 0 };
	int cpus[DOCTOR_MAX_CPUS], fds[DOCTOR_MAX_CPUS];
	int n = doctor_online_cpus(cpus, DOCTOR_MAX_CPUS), i, opened = 0, err = 0;
	double t0;

	if (n < 0) {
		doctor_set(d, NUPP_CHECK_PERF, NUPP_CHECK_FAIL, n, "cannot read the online CPUs: %s", strerror(-n));
		return;
	}
	for (i = 0; i < n; i++) {
		struct perf_event_attr a = {
			.size = sizeof(a),
			.type = PERF_TYPE_SOFTWARE,
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.freq = 1,
			.sample_freq = 1000,
			.exclude_idle = 1,
		};

		fds[i] = doctor_perf_open(&a, -1, cpus[i]);
		if (fds[i] < 0) {
			err = -errno;
			break;
		}
		opened++;
	}
	if (err) {
		doctor_set(d, NUPP_CHECK_PERF, NUPP_CHECK_FAIL, err,
			   "cannot open a CPU-clock event for every process on CPU %d: %s (kernel.perf_event_paranoid=%ld)",
			   cpus[opened], strerror(-err), paranoid);
		if (err == -EACCES || err == -EPERM)
			doctor_remedy(d, NUPP_CHECK_PERF,
				      "grant CAP_PERFMON (or run with sudo); perf_event_paranoid %ld allows such events "
				      "only with it",
				      paranoid);
		else if (err == -ENOENT || err == -EOPNOTSUPP)
			doctor_remedy(d, NUPP_CHECK_PERF, "use a kernel with perf events (CONFIG_PERF_EVENTS=y)");
		goto out;
	}
	if (!d->skel) {
		doctor_set(d, NUPP_CHECK_PERF, NUPP_CHECK_OK, 0,
			   "CPU-clock events open on %d CPUs (kernel.perf_event_paranoid=%ld); not tried with a BPF "
			   "program (see BPF programs)",
			   n, paranoid);
		goto out;
	}
	for (i = 0; i < n; i++) {
		links[i] = bpf_program__attach_perf_event(d->skel->progs.doctor_tick, fds[i]);
		if (!links[i]) {
			err = -errno;
			doctor_set(d, NUPP_CHECK_PERF, NUPP_CHECK_FAIL, err,
				   "cannot attach a BPF program to the CPU-clock event of CPU %d: %s", cpus[i],
				   strerror(-err));
			doctor_remedy(d, NUPP_CHECK_PERF, "run with -vv to see libbpf's reason");
			goto out;
		}
		fds[i] = -1; /* the link owns it now */
	}
	t0 = doctor_cputime();
	while (!__atomic_load_n(&d->skel->bss->ticks, __ATOMIC_RELAXED) && doctor_cputime() - t0 < 0.5)
		;
	if (!d->skel->bss->ticks) {
		doctor_set(d, NUPP_CHECK_PERF, NUPP_CHECK_FAIL, -ETIME,
			   "CPU-clock events open but delivered no sample in 0.5 s of CPU time");
		doctor_remedy(d, NUPP_CHECK_PERF, "check kernel.perf_event_max_sample_rate (record asks for 99 Hz)");
		goto out;
	}
	doctor_set(d, NUPP_CHECK_PERF, NUPP_CHECK_OK, 0,
		   "CPU-clock events open on %d CPUs and deliver samples to BPF (kernel.perf_event_paranoid=%ld%s)", n,
		   paranoid, doctor_has(d, CAP_PERFMON) ? ", which CAP_PERFMON overrides" : "");
out:
	for (i = 0; i < opened; i++) {
		if (links[i])
			bpf_link__destroy(links[i]);
		else if (fds[i] >= 0)
			close(fds[i]);
	}
}

/* The function the uprobe check probes: a call libnupp makes only here. */
static __attribute__((noinline, used)) void doctor_probe_target(void)
{
	__asm__ volatile("" ::: "memory");
}

/* Finds the file and file offset of our own code at addr (/proc/self/maps). */
static int doctor_self_offset(const void *addr, char *path, size_t size, __u64 *off)
{
	struct nupp_map *maps = NULL;
	int n = nupp_maps_read(getpid(), &maps), i, err = -ENOENT;

	for (i = 0; i < n; i++)
		if ((__u64)(uintptr_t)addr >= maps[i].start && (__u64)(uintptr_t)addr < maps[i].end &&
		    maps[i].path[0] == '/') {
			snprintf(path, size, "%s", maps[i].path);
			*off = (__u64)(uintptr_t)addr - maps[i].start + maps[i].offset;
			err = 0;
			break;
		}
	free(maps);
	return n < 0 ? n : err;
}

/* Closes the uprobe event of a verdict (a thread of its own). */
static void *doctor_close_later(void *arg)
{
	close((int)(intptr_t)arg);
	return NULL;
}

/* Closes fd in a detached thread: a uprobe's release waits about 0.1 s for the kernel
 * (uprobe_unregister), which a verdict need not wait for. Closes it now if no thread. */
static void doctor_close_async(int fd)
{
	pthread_attr_t a;
	pthread_t t;
	int e;

	if (pthread_attr_init(&a)) {
		close(fd);
		return;
	}
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	e = pthread_create(&t, &a, doctor_close_later, (void *)(intptr_t)fd);
	pthread_attr_destroy(&a);
	if (e)
		close(fd);
}

/* Creates a uprobe on our own code (the uprobe PMU, no BPF); then, with the doctor's
 * program loaded, attaches it the way libbpf attaches record's probes and calls the
 * function: the probe must fire once. A verdict stops after the creation, which is the
 * step the kernel's privileges gate (CAP_SYS_ADMIN here), and does not wait for the
 * release of the uprobe. */
static void doctor_uprobes(struct doctor *d)
{
	void (*volatile target)(void) = doctor_probe_target;
	char path[PATH_MAX], type[32];
	struct bpf_link *link;
	bool pmu = doctor_read_text("/sys/bus/event_source/devices/uprobe/type", type, sizeof(type)) == 0;
	__u64 off;
	int err = doctor_self_offset((const void *)doctor_probe_target, path, sizeof(path), &off);

	d->uprobe_err = -EAGAIN;
	d->uprobe_step = "";
	if (err) {
		doctor_set(d, NUPP_CHECK_UPROBES, NUPP_CHECK_FAIL, err, "cannot find our own code in /proc/self/maps: %s",
			   strerror(-err));
		d->uprobe_err = err;
		return;
	}
	if (pmu) {
		struct perf_event_attr a = {
			.size = sizeof(a),
			.type = (__u32)strtoul(type, NULL, 10),
			.config1 = (__u64)(uintptr_t)path,
			.config2 = off,
		};
		int fd = doctor_perf_open(&a, getpid(), -1);

		if (fd < 0) {
			d->uprobe_err = -errno;
			d->uprobe_step = "creating a uprobe";
		} else if (d->verdict) {
			doctor_close_async(fd);
			d->uprobe_err = 0;
			doctor_set(d, NUPP_CHECK_UPROBES, NUPP_CHECK_OK, 0, "a uprobe on %s can be created", path);
			return;
		} else {
			close(fd);
		}
	}
	if (!d->uprobe_step[0] && d->skel) {
		LIBBPF_OPTS(bpf_uprobe_opts, uo);

		link = bpf_program__attach_uprobe_opts(d->skel->progs.doctor_uprobe, getpid(), path, (size_t)off, &uo);
		if (!link) {
			d->uprobe_err = -errno;
			d->uprobe_step = "attaching a BPF program to a uprobe";
		} else {
			target();
			d->uprobe_err = d->skel->bss->uprobe_hits == 1 ? 0 : -ENODATA;
			if (d->uprobe_err)
				d->uprobe_step = "firing a uprobe";
			bpf_link__destroy(link);
		}
	}
	if (d->uprobe_err == 0) {
		doctor_set(d, NUPP_CHECK_UPROBES, NUPP_CHECK_OK, 0,
			   "a uprobe on %s attaches and fires%s", path,
			   pmu ? "" : " (through tracefs: no uprobe PMU)");
		return;
	}
	if (!d->uprobe_step[0]) {
		/* The uprobe could be created, but without BPF nothing could be attached to it. */
		doctor_set(d, NUPP_CHECK_UPROBES, NUPP_CHECK_SKIP, 0, "%snot attached: BPF programs cannot be loaded",
			   pmu ? "a uprobe on our own code can be created, but " : "");
		return;
	}
	doctor_set(d, NUPP_CHECK_UPROBES, NUPP_CHECK_FAIL, d->uprobe_err, "%s on %s fails: %s", d->uprobe_step, path,
		   strerror(-d->uprobe_err));
	if ((d->uprobe_err == -EACCES || d->uprobe_err == -EPERM) && !doctor_has(d, CAP_PERFMON))
		doctor_remedy(d, NUPP_CHECK_UPROBES, "grant CAP_PERFMON (or run with sudo)");
	else if ((d->uprobe_err == -EACCES || d->uprobe_err == -EPERM) && !doctor_has(d, CAP_SYS_ADMIN))
		doctor_remedy(d, NUPP_CHECK_UPROBES, "this kernel wants CAP_SYS_ADMIN for uprobes: run with sudo, or "
						     "grant CAP_SYS_ADMIN too");
	else
		doctor_remedy(d, NUPP_CHECK_UPROBES, "use a kernel with CONFIG_UPROBE_EVENTS=y; run with -vv to see "
						     "libbpf's reason");
}

/* CAP_SYS_ADMIN: needed for uprobes on some kernels; the uprobe check tells which. */
static void doctor_sys_admin(struct doctor *d)
{
	enum nupp_check_id id = NUPP_CHECK_CAP_SYS_ADMIN;

	if (doctor_has(d, CAP_SYS_ADMIN))
		doctor_set(d, id, NUPP_CHECK_OK, 0, "present: for uprobes, on kernels that want it");
	else if (d->uprobe_err == 0)
		doctor_set(d, id, NUPP_CHECK_OK, 0, "missing, and not needed: a uprobe attached without it");
	else if ((d->uprobe_err == -EACCES || d->uprobe_err == -EPERM) && doctor_has(d, CAP_BPF) &&
		 doctor_has(d, CAP_PERFMON) && d->uprobe_step[0]) {
		doctor_set(d, id, NUPP_CHECK_FAIL, d->uprobe_err,
			   "missing, and this kernel wants it for uprobes (%s with CAP_BPF and CAP_PERFMON fails: %s)",
			   d->uprobe_step, strerror(-d->uprobe_err));
		doctor_remedy(d, id, "run with sudo, or grant CAP_SYS_ADMIN too");
	} else {
		doctor_set(d, id, NUPP_CHECK_SKIP, 0,
			   "missing; whether this kernel wants it for uprobes shows once CAP_BPF and CAP_PERFMON are "
			   "granted");
	}
}

/* The filesystem type mounted at path, or 0. */
static long doctor_fstype(const char *path)
{
	struct statfs s;

	return statfs(path, &s) == 0 ? (long)s.f_type : 0;
}

/* bpffs and tracefs: which record needs, and whether they are there. */
static void doctor_filesystems(struct doctor *d)
{
	char type[32];
	bool pmu = doctor_read_text("/sys/bus/event_source/devices/uprobe/type", type, sizeof(type)) == 0;
	const char *tracefs = doctor_fstype("/sys/kernel/tracing") == DOCTOR_TRACEFS_MAGIC ? "/sys/kernel/tracing"
			      : doctor_fstype("/sys/kernel/debug/tracing") == DOCTOR_TRACEFS_MAGIC
				      ? "/sys/kernel/debug/tracing"
				      : NULL;

	if (doctor_fstype("/sys/fs/bpf") == DOCTOR_BPF_FS_MAGIC)
		doctor_set(d, NUPP_CHECK_BPFFS, NUPP_CHECK_OK, 0,
			   "mounted at /sys/fs/bpf (record pins nothing, so it does not need it)");
	else
		doctor_set(d, NUPP_CHECK_BPFFS, NUPP_CHECK_NOTE, 0,
			   "not mounted at /sys/fs/bpf; record pins nothing, so it does not need it");
	if (pmu)
		doctor_set(d, NUPP_CHECK_TRACEFS, tracefs ? NUPP_CHECK_OK : NUPP_CHECK_NOTE, 0,
			   "%s%s; not needed: the kernel has the uprobe PMU", tracefs ? "mounted at " : "not mounted",
			   tracefs ? tracefs : "");
	else if (tracefs)
		doctor_set(d, NUPP_CHECK_TRACEFS, NUPP_CHECK_OK, 0,
			   "mounted at %s; needed: the kernel has no uprobe PMU, uprobes are made through it", tracefs);
	else {
		doctor_set(d, NUPP_CHECK_TRACEFS, NUPP_CHECK_FAIL, -ENOENT,
			   "not mounted, and needed: the kernel has no uprobe PMU, so uprobes are made through tracefs");
		doctor_remedy(d, NUPP_CHECK_TRACEFS, "mount -t tracefs nodev /sys/kernel/tracing");
	}
}

/* RLIMIT_MEMLOCK, and whether BPF memory counts against it here: a map one MiB larger
 * than the limit is created (kernels since 5.11 charge BPF memory to the memory cgroup). */
static void doctor_memlock(struct doctor *d)
{
	struct rlimit rl;
	char lim[32];
	__u64 bytes;
	int fd;

	if (getrlimit(RLIMIT_MEMLOCK, &rl)) {
		doctor_set(d, NUPP_CHECK_MEMLOCK, NUPP_CHECK_WARN, -errno, "getrlimit: %s", strerror(errno));
		return;
	}
	if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(lim, sizeof(lim), "unlimited");
	else
		snprintf(lim, sizeof(lim), "%llu KiB", (unsigned long long)rl.rlim_cur / 1024);
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= DOCTOR_ENOUGH_MEMLOCK) {
		doctor_set(d, NUPP_CHECK_MEMLOCK, NUPP_CHECK_OK, 0, "RLIMIT_MEMLOCK %s: enough for record's maps", lim);
		return;
	}
	if (!d->skel) {
		doctor_set(d, NUPP_CHECK_MEMLOCK, NUPP_CHECK_SKIP, 0,
			   "RLIMIT_MEMLOCK %s; whether BPF maps count against it is not tried (see BPF programs)", lim);
		return;
	}
	/* A hash map without preallocation: a kernel that charges BPF maps to the limit
	 * charges its full nominal size at creation, one that charges the memory cgroup only
	 * what it allocates (its buckets, 64 KiB): the same answer without zeroing the size
	 * of the limit. */
	bytes = rl.rlim_cur + (1 << 20);
	{
		LIBBPF_OPTS(bpf_map_create_opts, mo, .map_flags = BPF_F_NO_PREALLOC);

		fd = bpf_map_create(BPF_MAP_TYPE_HASH, "nupp_memlock", 4, 4096, (__u32)(bytes / 4096), &mo);
	}
	if (fd >= 0) {
		close(fd);
		doctor_set(d, NUPP_CHECK_MEMLOCK, NUPP_CHECK_OK, 0,
			   "RLIMIT_MEMLOCK %s does not bind: a BPF map of %llu KiB was created (BPF memory is "
			   "charged to the memory cgroup)",
			   lim, (unsigned long long)bytes / 1024);
		return;
	}
	doctor_set(d, NUPP_CHECK_MEMLOCK, NUPP_CHECK_FAIL, -errno,
		   "RLIMIT_MEMLOCK %s binds BPF maps on this kernel: a %llu KiB map fails: %s", lim,
		   (unsigned long long)bytes / 1024, strerror(errno));
	doctor_remedy(d, NUPP_CHECK_MEMLOCK,
		      "raise it: ulimit -l unlimited (as root), or LimitMEMLOCK=infinity in a systemd unit");
}

/* Loads record's own sampler and abort programs and attaches the sampler to every CPU
 * (no target: nothing is sampled), then closes them. */
static void doctor_channels(struct doctor *d)
{
	struct nupp_sampler_opts so = { .sz = sizeof(so), .freq_hz = 99, .max_stacks = 64 };
	struct nupp_trace_opts to = { .sz = sizeof(to), .max_sites = 64 };
	struct nupp_sampler *s;
	struct nupp_trace *t;
	int err = 0;

	s = nupp_sampler_open(&so, &err);
	if (!s) {
		doctor_set(d, NUPP_CHECK_CHANNELS, NUPP_CHECK_FAIL, err, "the sampler: %s", nupp_errmsg());
		return;
	}
	nupp_sampler_close(s);
	t = nupp_trace_open(&to, &err);
	if (!t) {
		doctor_set(d, NUPP_CHECK_CHANNELS, NUPP_CHECK_FAIL, err, "the abort channel: %s", nupp_errmsg());
		return;
	}
	nupp_trace_close(t);
	doctor_set(d, NUPP_CHECK_CHANNELS, NUPP_CHECK_OK, 0,
		   "the sampler loads and attaches to every CPU; the abort channel loads");
}

/* -- The target process --------------------------------------------------------- */

/* One file mapped by /proc/PID/maps, with its device and inode. */
struct doctor_map {
	char path[PATH_MAX];    /* the path, without " (deleted)" */
	char mapname[PATH_MAX]; /* the path as /proc/PID/maps prints it */
	char elf[PATH_MAX];     /* where to read its ELF from (/proc/PID/exe for a deleted exe) */
	unsigned long dev_major, dev_minor;
	unsigned long long inode;
	bool deleted;
};

/* The file mappings of pid, one per path (the first), into a malloc'ed array. */
static int doctor_maps(pid_t pid, struct doctor_map **out)
{
	char fname[64], line[PATH_MAX + 128];
	struct doctor_map *v = NULL;
	struct stat exe;
	bool have_exe;
	int n = 0, cap = 0;
	FILE *f;

	snprintf(fname, sizeof(fname), "/proc/%d/exe", (int)pid);
	have_exe = stat(fname, &exe) == 0;
	snprintf(fname, sizeof(fname), "/proc/%d/maps", (int)pid);
	f = fopen(fname, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		struct doctor_map m = { 0 };
		int pos = 0, i;
		size_t len;

		if (sscanf(line, "%*x-%*x %*s %*x %lx:%lx %llu %n", &m.dev_major, &m.dev_minor, &m.inode, &pos) < 3 ||
		    !pos || line[pos] != '/')
			continue;
		snprintf(m.mapname, sizeof(m.mapname), "%s", line + pos);
		len = strlen(m.mapname);
		while (len && (m.mapname[len - 1] == '\n' || m.mapname[len - 1] == ' '))
			m.mapname[--len] = 0;
		snprintf(m.path, sizeof(m.path), "%s", m.mapname);
		snprintf(m.elf, sizeof(m.elf), "%s", m.mapname);
		if (len > 10 && strcmp(m.path + len - 10, " (deleted)") == 0) {
			m.path[len - 10] = 0;
			m.deleted = true;
			if (have_exe && exe.st_ino == m.inode)
				snprintf(m.elf, sizeof(m.elf), "/proc/%d/exe", (int)pid);
			else
				snprintf(m.elf, sizeof(m.elf), "%s", m.path);
		}
		for (i = 0; i < n && strcmp(v[i].mapname, m.mapname) != 0; i++)
			;
		if (i < n)
			continue;
		if (n == cap) {
			struct doctor_map *nv = realloc(v, (size_t)(cap = cap ? cap * 2 : 32) * sizeof(*v));

			if (!nv) {
				free(v);
				fclose(f);
				return -ENOMEM;
			}
			v = nv;
		}
		v[n++] = m;
	}
	fclose(f);
	*out = v;
	return n;
}

/* The start time of pid in seconds since the epoch, or 0. */
static double doctor_start_time(pid_t pid)
{
	char fname[64], buf[4096], *p;
	unsigned long long start = 0, btime = 0;
	FILE *f;

	snprintf(fname, sizeof(fname), "/proc/%d/stat", (int)pid);
	if (doctor_read_text(fname, buf, sizeof(buf)))
		return 0;
	p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
			 &start) != 1)
		return 0;
	f = fopen("/proc/stat", "re");
	while (f && fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "btime %llu", &btime) == 1)
			break;
	if (f)
		fclose(f);
	return btime ? (double)btime + (double)start / sysconf(_SC_CLK_TCK) : 0;
}

/* Counts the luajit:* probes of nupp_probe_names in an ELF file's .note.stapsdt; the
 * names of the missing ones go to missing. The count, or -errno. */
static int doctor_usdt_probes(const char *path, char *missing, size_t size)
{
	bool have[NUPP_PROBES] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC), i, n = 0;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	Elf *e;

	if (fd < 0)
		return -errno;
	if (elf_version(EV_CURRENT) == EV_NONE || !(e = elf_begin(fd, ELF_C_READ, NULL))) {
		close(fd);
		return -EINVAL;
	}
	while (elf_getshdrstrndx(e, &shstrndx) == 0 && (scn = elf_nextscn(e, scn)) != NULL) {
		/* Each note's desc: pc, base and semaphore addresses, then "provider\0name\0args\0". */
		size_t addrs = 3 * (gelf_getclass(e) == ELFCLASS32 ? 4 : 8), off = 0, noff, doff;
		const char *name;
		Elf_Data *data;
		GElf_Shdr sh;
		GElf_Nhdr nh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE ||
		    !(name = elf_strptr(e, shstrndx, sh.sh_name)) || strcmp(name, ".note.stapsdt") != 0)
			continue;
		data = elf_getdata(scn, NULL);
		while (data && (off = gelf_getnote(data, off, &nh, &noff, &doff)) > 0) {
			const char *desc = (const char *)data->d_buf + doff, *end = desc + nh.n_descsz, *prov, *pname;

			if (nh.n_type != 3 || nh.n_namesz != 8 || memcmp((const char *)data->d_buf + noff, "stapsdt", 8) ||
			    nh.n_descsz <= addrs)
				continue;
			prov = desc + addrs;
			pname = prov + strnlen(prov, (size_t)(end - prov)) + 1;
			if (pname >= end || strnlen(pname, (size_t)(end - pname)) == (size_t)(end - pname) ||
			    strcmp(prov, "luajit") != 0)
				continue;
			for (i = 0; i < NUPP_PROBES; i++)
				if (strcmp(pname, nupp_probe_names[i]) == 0)
					have[i] = true;
		}
	}
	elf_end(e);
	close(fd);
	missing[0] = 0;
	for (i = 0; i < NUPP_PROBES; i++) {
		if (have[i])
			n++;
		else
			snprintf(missing + strlen(missing), size - strlen(missing), "%s%s", missing[0] ? ", " : "",
				 nupp_probe_names[i]);
	}
	return n;
}

/* Runtime address in pid of an exported data symbol of a mapped object, or 0. */
static __u64 doctor_sym_addr(pid_t pid, const struct doctor_map *obj, const char *sym)
{
	struct nupp_map *maps = NULL;
	__u64 value, off, addr = 0;
	int n;

	if (nupp_elf_sym(obj->elf, sym, &value, NULL) || nupp_elf_vaddr_to_off(obj->elf, value, &off))
		return 0;
	n = nupp_maps_read(pid, &maps);
	if (n > 0)
		addr = nupp_maps_addr(maps, n, obj->mapname, off);
	free(maps);
	return addr;
}

/* Skips the target checks from one on (inclusive), saying why. */
static void doctor_skip_from(struct doctor *d, enum nupp_check_id from, const char *why)
{
	int id;

	for (id = from; id < NUPP_CHECK__MAX; id++)
		doctor_set(d, id, NUPP_CHECK_SKIP, 0, "not checked: %s", why);
}

/* Whether the object pid runs is the file now at its path, unchanged since pid started. */
static void doctor_binary(struct doctor *d, pid_t pid, const struct doctor_map *obj)
{
	double started = doctor_start_time(pid);
	struct stat st;

	if (obj->deleted)
		doctor_set(d, NUPP_CHECK_BINARY, NUPP_CHECK_FAIL, -ESTALE,
			   "%s was deleted or replaced after PID %d started: it runs a file that is gone", obj->path,
			   (int)pid);
	else if (stat(obj->path, &st) != 0)
		doctor_set(d, NUPP_CHECK_BINARY, NUPP_CHECK_FAIL, -errno, "%s: %s", obj->path, strerror(errno));
	else if (st.st_ino != obj->inode || major(st.st_dev) != obj->dev_major || minor(st.st_dev) != obj->dev_minor)
		doctor_set(d, NUPP_CHECK_BINARY, NUPP_CHECK_FAIL, -ESTALE,
			   "%s is another file now (inode %llu) than the one PID %d runs (inode %llu)", obj->path,
			   (unsigned long long)st.st_ino, (int)pid, obj->inode);
	else if (started > 0 && (double)st.st_mtime > started + 1)
		doctor_set(d, NUPP_CHECK_BINARY, NUPP_CHECK_FAIL, -ESTALE,
			   "%s was modified %.0f s after PID %d started: its code may not match the file", obj->path,
			   (double)st.st_mtime - started, (int)pid);
	else
		doctor_set(d, NUPP_CHECK_BINARY, NUPP_CHECK_OK, 0, "%s is the file PID %d started with (inode %llu)",
			   obj->path, (int)pid, obj->inode);
	if (d->c[NUPP_CHECK_BINARY].status == NUPP_CHECK_FAIL)
		doctor_remedy(d, NUPP_CHECK_BINARY,
			      "restart the process: probes attach by file offset to the file now at that path");
}

/* Our build: the exported layout read from the target, the probes in its file, GC64. */
static void doctor_build(struct doctor *d, pid_t pid, const struct doctor_map *obj)
{
	struct nupp_lj_layout lo;
	__u64 addr = doctor_sym_addr(pid, obj, NUPP_LJ_LAYOUT_SYMBOL);
	char missing[256];
	int err = addr ? nupp_vm_read(pid, addr, &lo, sizeof(lo)) : -ENOENT, n;

	if (err) {
		doctor_set(d, NUPP_CHECK_BUILD, NUPP_CHECK_FAIL, err == -EACCES ? -EPERM : err,
			   "cannot read the layout %s exports from PID %d: %s", obj->path, (int)pid, strerror(-err));
		doctor_remedy(d, NUPP_CHECK_BUILD, err == -EPERM || err == -EACCES ? "run with sudo, or grant CAP_SYS_PTRACE"
										  : "restart the process with our LuaJIT build");
	} else if (lo.magic != NUPP_LJ_LAYOUT_MAGIC || lo.version != NUPP_LJ_LAYOUT_VERSION || lo.size != sizeof(lo)) {
		doctor_set(d, NUPP_CHECK_BUILD, NUPP_CHECK_FAIL, -ENOTSUP,
			   "%s exports layout version %u (size %u); this nupp-bpf reads version %u (size %zu)",
			   obj->path, lo.version, lo.size, NUPP_LJ_LAYOUT_VERSION, sizeof(lo));
		doctor_remedy(d, NUPP_CHECK_BUILD, "rebuild LuaJIT with this nupp-bpf's scripts/build-luajit");
	} else {
		doctor_set(d, NUPP_CHECK_BUILD, NUPP_CHECK_OK, 0, "our build: layout v%u exported by %s", lo.version,
			   obj->path);
	}

	n = doctor_usdt_probes(obj->elf, missing, sizeof(missing));
	if (n == NUPP_PROBES)
		doctor_set(d, NUPP_CHECK_PROBES, NUPP_CHECK_OK, 0, "all %d luajit:* probes are in %s", NUPP_PROBES,
			   obj->path);
	else if (n < 0)
		doctor_set(d, NUPP_CHECK_PROBES, NUPP_CHECK_FAIL, n, "cannot read %s: %s", obj->path, strerror(-n));
	else
		doctor_set(d, NUPP_CHECK_PROBES, NUPP_CHECK_FAIL, -ENOTSUP, "%s has %d of the %d luajit:* probes (no %s)",
			   obj->path, n, NUPP_PROBES, missing);
	if (d->c[NUPP_CHECK_PROBES].status == NUPP_CHECK_FAIL)
		doctor_remedy(d, NUPP_CHECK_PROBES, "rebuild LuaJIT with this nupp-bpf's scripts/build-luajit");

	/* The mode fields keep their place in every layout version with our magic. */
	if (err || lo.magic != NUPP_LJ_LAYOUT_MAGIC) {
		doctor_set(d, NUPP_CHECK_GC64, NUPP_CHECK_SKIP, 0, "not checked: the layout cannot be read");
	} else if (lo.gc64 == 1 && lo.fr2 == 1) {
		doctor_set(d, NUPP_CHECK_GC64, NUPP_CHECK_OK, 0, "GC64 with two-slot frames (LJ_GC64, LJ_FR2)");
	} else {
		doctor_set(d, NUPP_CHECK_GC64, NUPP_CHECK_FAIL, -ENOTSUP,
			   "LuaJIT built with GC64 %s and FR2 %s: nupp-bpf walks only GC64 two-slot frames",
			   lo.gc64 ? "on" : "off", lo.fr2 ? "on" : "off");
		doctor_remedy(d, NUPP_CHECK_GC64, "rebuild LuaJIT with scripts/build-luajit (GC64 is on there)");
	}
}

/* The Lua VMs open in pid, as record finds them. */
static void doctor_vms(struct doctor *d, pid_t pid)
{
	struct nupp_vm vms[NUPP_LJ_VMLIST_MAX];
	char gs[256] = "";
	int n = nupp_vm_find(pid, vms, NUPP_LJ_VMLIST_MAX), i;

	if (n > 0) {
		for (i = 0; i < n; i++)
			snprintf(gs + strlen(gs), sizeof(gs) - strlen(gs), "%s%#llx", i ? ", " : "",
				 (unsigned long long)vms[i].g);
		doctor_set(d, NUPP_CHECK_VMS, NUPP_CHECK_OK, 0, "%d VM%s open (g = %s)", n, n == 1 ? "" : "s", gs);
	} else if (n == 0) {
		doctor_set(d, NUPP_CHECK_VMS, NUPP_CHECK_FAIL, -ENOENT, "no Lua VM open yet in PID %d", (int)pid);
		doctor_remedy(d, NUPP_CHECK_VMS,
			      "attach once the program has created its lua_State, or start it under record "
			      "(record -- COMMAND sees every VM from the first)");
	} else {
		doctor_set(d, NUPP_CHECK_VMS, NUPP_CHECK_FAIL, n, "%s", nupp_errmsg());
	}
}

/* The checks of a target process: LuaJIT, our build, probes, GC64, VMs, its binary. */
static void doctor_target(struct doctor *d, pid_t pid)
{
	struct doctor_map *maps = NULL, *obj = NULL, *plain = NULL;
	char exe[PATH_MAX], comm[64] = "?", fname[64];
	ssize_t len;
	__u64 v;
	int n, i;

	if (kill(pid, 0) && errno == ESRCH) {
		doctor_set(d, NUPP_CHECK_PROCESS, NUPP_CHECK_FAIL, -ESRCH, "no such process: PID %d", (int)pid);
		doctor_remedy(d, NUPP_CHECK_PROCESS, "give the PID of a running process (pgrep -n luajit)");
		doctor_skip_from(d, NUPP_CHECK_LUAJIT, "no process");
		return;
	}
	snprintf(fname, sizeof(fname), "/proc/%d/comm", (int)pid);
	doctor_read_text(fname, comm, sizeof(comm));
	snprintf(fname, sizeof(fname), "/proc/%d/exe", (int)pid);
	len = readlink(fname, exe, sizeof(exe) - 1);
	n = len < 0 ? -errno : doctor_maps(pid, &maps);
	if (n < 0) {
		doctor_set(d, NUPP_CHECK_PROCESS, NUPP_CHECK_FAIL, n == -EACCES ? -EPERM : n,
			   "PID %d (%s) cannot be inspected: %s", (int)pid, comm, strerror(-n));
		doctor_remedy(d, NUPP_CHECK_PROCESS, "run with sudo, or grant CAP_SYS_PTRACE");
		doctor_skip_from(d, NUPP_CHECK_LUAJIT, "the process cannot be inspected");
		return;
	}
	exe[len] = 0;
	doctor_set(d, NUPP_CHECK_PROCESS, NUPP_CHECK_OK, 0, "PID %d (%s) runs %s", (int)pid, comm, exe);
	for (i = 0; i < n && !obj; i++) {
		if (nupp_elf_sym(maps[i].elf, NUPP_LJ_LAYOUT_SYMBOL, &v, NULL) == 0)
			obj = &maps[i];
		else if (!plain && nupp_elf_sym(maps[i].elf, "luaJIT_setmode", &v, NULL) == 0)
			plain = &maps[i];
	}
	if (!obj && !plain) {
		doctor_set(d, NUPP_CHECK_LUAJIT, NUPP_CHECK_FAIL, -ENOENT,
			   "PID %d is not running LuaJIT (no LuaJIT VM in its memory maps)", (int)pid);
		doctor_remedy(d, NUPP_CHECK_LUAJIT, "give the PID of a process running our LuaJIT build");
		doctor_skip_from(d, NUPP_CHECK_BUILD, "not LuaJIT");
	} else if (!obj) {
		doctor_set(d, NUPP_CHECK_LUAJIT, NUPP_CHECK_OK, 0, "LuaJIT in %s", plain->path);
		doctor_set(d, NUPP_CHECK_BUILD, NUPP_CHECK_FAIL, -ENOTSUP,
			   "%s has no nupp-bpf probes and layout (an unpatched LuaJIT)", plain->path);
		doctor_remedy(d, NUPP_CHECK_BUILD,
			      "run the program with our build (%s/bin/luajit, or link %s/lib/libluajit-5.1.so)",
			      NUPP_LUAJIT_PREFIX, NUPP_LUAJIT_PREFIX);
		doctor_skip_from(d, NUPP_CHECK_PROBES, "not our LuaJIT build");
	} else {
		doctor_set(d, NUPP_CHECK_LUAJIT, NUPP_CHECK_OK, 0, "LuaJIT in %s", obj->path);
		doctor_build(d, pid, obj);
		doctor_binary(d, pid, obj);
		if (obj->deleted)
			doctor_set(d, NUPP_CHECK_VMS, NUPP_CHECK_SKIP, 0, "not checked: its binary is gone (see binary)");
		else if (d->c[NUPP_CHECK_BUILD].status != NUPP_CHECK_OK)
			doctor_set(d, NUPP_CHECK_VMS, NUPP_CHECK_SKIP, 0, "not checked: the layout cannot be read");
		else
			doctor_vms(d, pid);
	}
	free(maps);
}

/* -- Entry points --------------------------------------------------------------- */

/* The checks of the machine and our privileges (NUPP_CHECK_USER .. NUPP_CHECK_CHANNELS). */
static void doctor_machine(struct doctor *d, bool quick)
{
	doctor_privileges(d);
	doctor_btf(d);
	doctor_bpf(d);
	doctor_perf(d);
	doctor_uprobes(d);
	doctor_sys_admin(d);
	doctor_filesystems(d);
	doctor_memlock(d);
	if (quick)
		doctor_set(d, NUPP_CHECK_CHANNELS, NUPP_CHECK_SKIP, 0, "not tried (quick)");
	else if (!doctor_ok(d, NUPP_CHECK_BPF) || !doctor_ok(d, NUPP_CHECK_PERF) || !doctor_ok(d, NUPP_CHECK_BTF))
		doctor_set(d, NUPP_CHECK_CHANNELS, NUPP_CHECK_SKIP, 0, "not tried: the checks above fail");
	else
		doctor_channels(d);
	if (d->skel)
		doctor_bpf__destroy(d->skel);
	d->skel = NULL;
}

/* Runs every check into out[]. */
int nupp_doctor_run(const struct nupp_doctor_opts *opts, struct nupp_check *out, int max)
{
	struct doctor *d;
	pid_t pid = opts && opts->sz >= offsetof(struct nupp_doctor_opts, pid) + sizeof(pid_t) ? opts->pid : 0;
	bool quick = opts && opts->sz >= offsetof(struct nupp_doctor_opts, quick) + sizeof(bool) && opts->quick;
	int n = pid > 0 ? NUPP_CHECK__MAX : NUPP_CHECK_PROCESS, i;

	if (pid < 0 || max < n)
		return nupp_fail(-EINVAL, "nupp_doctor_run: %s", pid < 0 ? "invalid PID" : "out[] is too small");
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	doctor_machine(d, quick);
	if (pid > 0)
		doctor_target(d, pid);
	for (i = 0; i < n; i++)
		out[i] = d->c[i];
	free(d);
	return n;
}

/* The first check that makes record fail, or NULL. */
const struct nupp_check *nupp_doctor_blocker(const struct nupp_check *out, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (out[i].status == NUPP_CHECK_FAIL)
			return &out[i];
	return NULL;
}

/* Silences libbpf while the verdict tries things in a host process. */
static int doctor_libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

/* The machine checks of the last verdict, kept for as long as this process has the same
 * effective user and capabilities (what they depend on that can change under it). */
static struct {
	pthread_mutex_t lock;
	bool valid;
	uid_t euid;
	unsigned long long capeff;
	struct nupp_check c[NUPP_CHECK_PROCESS];
	pid_t self_ok; /* this process passed the target checks (a process's LuaJIT stays) */
} doctor_cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The machine checks, tried once per effective user and capability set (the verdict
 * mode: a uprobe is created, not fired; record's own programs are not loaded). */
static void doctor_machine_cached(struct doctor *d)
{
	unsigned long long capeff = doctor_capeff();
	uid_t euid = geteuid();
	libbpf_print_fn_t old;

	if (doctor_cache.valid && doctor_cache.euid == euid && doctor_cache.capeff == capeff) {
		memcpy(d->c, doctor_cache.c, sizeof(doctor_cache.c));
		d->capeff = capeff;
		return;
	}
	d->verdict = true;
	old = libbpf_set_print(doctor_libbpf_quiet);
	doctor_machine(d, true);
	libbpf_set_print(old);
	memcpy(doctor_cache.c, d->c, sizeof(doctor_cache.c));
	doctor_cache.euid = euid;
	doctor_cache.capeff = capeff;
	doctor_cache.valid = true;
	doctor_cache.self_ok = 0;
}

/* The verdict when capabilities are missing: every one of them at once, what each is
 * for (CAP_SYS_ADMIN as the uprobe check found it), and how to grant them. -EPERM. */
static int doctor_missing_caps(const struct doctor *d, char *why, size_t size)
{
	static const struct {
		enum nupp_check_id id;
		const char *what;
	} caps[] = {
		{ NUPP_CHECK_CAP_BPF, "to load BPF programs and maps" },
		{ NUPP_CHECK_CAP_PERFMON, "to open CPU-clock perf events and tracing programs" },
		{ NUPP_CHECK_CAP_SYS_PTRACE, "to read another process's memory" },
		{ NUPP_CHECK_CAP_SYS_ADMIN, "to create uprobes, which kernels like this one want it for" },
	};
	const struct nupp_check *sa = &d->c[NUPP_CHECK_CAP_SYS_ADMIN];
	char list[1024] = "", found[sizeof(sa->detail)], *paren;
	size_t i;

	for (i = 0; i < NUPP_ARRAY_SIZE(caps); i++) {
		const struct nupp_check *c = &d->c[caps[i].id];
		const char *what = caps[i].what;

		if (c->status != NUPP_CHECK_FAIL &&
		    !(c == sa && c->status == NUPP_CHECK_SKIP && !strncmp(c->detail, "missing", 7)))
			continue;
		/* "missing, and this kernel wants it for uprobes (creating ... fails: ...)" reads
		 * "this kernel wants it for uprobes: creating ... fails: ..." in the list. */
		if (c == sa && c->status == NUPP_CHECK_FAIL && !strncmp(c->detail, "missing, and ", 13)) {
			snprintf(found, sizeof(found), "%s", c->detail + 13);
			paren = strstr(found, " (");
			if (paren && found[strlen(found) - 1] == ')') {
				found[strlen(found) - 1] = 0;
				paren[0] = ':';
				paren[1] = ' ';
			}
			what = found;
		}
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s (%s)", list[0] ? ", " : "", c->name,
			 what);
	}
	nupp_fail(-EPERM,
		  "missing %s: run as root (sudo), or grant CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE and CAP_SYS_ADMIN to "
		  "the program (sudo setcap cap_bpf,cap_perfmon,cap_sys_ptrace,cap_sys_admin+ep PROGRAM, or "
		  "AmbientCapabilities= in its systemd unit)",
		  list);
	if (size)
		snprintf(why, size, "%s", nupp_errmsg());
	return -EPERM;
}

/* Whether BPF sessions can run here, for process pid. */
int nupp_doctor_verdict(int pid, char *why, size_t size)
{
	pid_t self = getpid(), target = pid == 0 ? self : pid;
	const struct nupp_check *b;
	struct doctor *d;
	int n = pid < 0 ? NUPP_CHECK_PROCESS : NUPP_CHECK__MAX, err;

	if (size)
		why[0] = 0;
	d = calloc(1, sizeof(*d));
	if (!d)
		return nupp_fail(-ENOMEM, "out of memory");
	pthread_mutex_lock(&doctor_cache.lock);
	doctor_machine_cached(d);
	/* Our own memory is ours to read: CAP_SYS_PTRACE is for other processes. */
	if (target == self && d->c[NUPP_CHECK_CAP_SYS_PTRACE].status == NUPP_CHECK_FAIL)
		doctor_set(d, NUPP_CHECK_CAP_SYS_PTRACE, NUPP_CHECK_NOTE, 0,
			   "missing, and not needed to profile this process itself");
	/* The first blocker is the answer: the process is looked at only if none is found. */
	if (pid < 0 || nupp_doctor_blocker(d->c, NUPP_CHECK_PROCESS) || (doctor_cache.self_ok == self && target == self))
		n = NUPP_CHECK_PROCESS;
	else
		doctor_target(d, target);
	b = nupp_doctor_blocker(d->c, n);
	if (!b && pid >= 0 && target == self)
		doctor_cache.self_ok = self;
	pthread_mutex_unlock(&doctor_cache.lock);
	if (!b) {
		free(d);
		return 0;
	}
	switch (b->id) {
	case NUPP_CHECK_CAP_BPF:
	case NUPP_CHECK_CAP_PERFMON:
	case NUPP_CHECK_CAP_SYS_PTRACE:
	case NUPP_CHECK_CAP_SYS_ADMIN:
		err = doctor_missing_caps(d, why, size);
		free(d);
		return err;
	case NUPP_CHECK_PROCESS:
		err = b->err == -ESRCH ? -ESRCH : -EPERM;
		break;
	case NUPP_CHECK_LUAJIT:
	case NUPP_CHECK_VMS:
		err = -ENOENT;
		break;
	default:
		err = b->err == -EPERM || b->err == -EACCES ? -EPERM : -ENOTSUP;
		break;
	}
	nupp_fail(err, "%s: %s%s%s%s", b->name, b->detail, b->remedy[0] ? " (" : "", b->remedy, b->remedy[0] ? ")" : "");
	if (size)
		snprintf(why, size, "%s", nupp_errmsg());
	free(d);
	return err;
}

/* Whether the BPF channels can run here: the doctor's verdict (include/nupp/nupp.h). */
int nupp_available(int pid, char *why, size_t size)
{
	return nupp_doctor_verdict(pid, why, size);
}
