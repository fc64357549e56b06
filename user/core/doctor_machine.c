/* The doctor's checks of the machine: our privileges (user, capabilities), the kernel's
 * BTF, BPF programs and helpers, CPU-clock perf events, uprobes, bpffs and tracefs, the
 * locked-memory limit, and record's own programs, each tried the way record uses it.
 * Owns the doctor's BPF object (doctor.skel.h) while they run; may not look at a target
 * process (doctor_target.c). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "nupp/sampler.h"
#include "nupp/trace.h"
#include "nupp_internal.h"
#include "doctor_priv.h"
#include "doctor.skel.h"

#define DOCTOR_BPF_FS_MAGIC 0xcafe4a11
#define DOCTOR_TRACEFS_MAGIC 0x74726163
#define DOCTOR_DEBUGFS_MAGIC 0x64626720
#define DOCTOR_MAX_CPUS 1024
#define DOCTOR_ENOUGH_MEMLOCK (128ull << 20) /* more than record's maps take at their defaults */

/* -- Privileges ----------------------------------------------------------------- */

/* The effective capability set of this thread. */
unsigned long long doctor_capeff(void)
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


/* -- All of them ---------------------------------------------------------------- */

/* The checks of the machine and our privileges (NUPP_CHECK_USER .. NUPP_CHECK_CHANNELS). */
void doctor_machine(struct doctor *d, bool quick)
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
