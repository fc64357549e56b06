/* Doctor: what this machine, this process's privileges and a target process lack for
 * BPF profiling, found by trying each piece the way `record` uses it (load a program,
 * open a CPU-clock event, attach a uprobe), not by reading kernel versions.
 * `nupp-bpf doctor` prints the checks; nupp_doctor_verdict() is the one-call verdict,
 * which nupp_available() returns, for in-process sessions (`profile.available()`). */
#ifndef NUPP_DOCTOR_H
#define NUPP_DOCTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How a check came out. */
enum nupp_check_status {
	NUPP_CHECK_OK,   /* works */
	NUPP_CHECK_NOTE, /* a fact worth knowing; nothing needs doing */
	NUPP_CHECK_WARN, /* record works, but something is off (the remedy says what) */
	NUPP_CHECK_FAIL, /* record would fail because of it */
	NUPP_CHECK_SKIP, /* not tried: a check it depends on failed */
};

/* The checks, in the order they are reported. */
enum nupp_check_id {
	NUPP_CHECK_USER,           /* who we run as */
	NUPP_CHECK_CAP_BPF,        /* loading BPF programs */
	NUPP_CHECK_CAP_PERFMON,    /* perf events, tracing programs */
	NUPP_CHECK_CAP_SYS_PTRACE, /* reading the target's memory */
	NUPP_CHECK_CAP_SYS_ADMIN,  /* uprobes, on kernels that ask for it (found by trying) */
	NUPP_CHECK_BTF,            /* /sys/kernel/btf/vmlinux */
	NUPP_CHECK_BPF,            /* a program loads; the helpers the sampler needs exist */
	NUPP_CHECK_PERF,           /* a CPU-clock event opens on every CPU and ticks */
	NUPP_CHECK_UPROBES,        /* a uprobe on our own code attaches and fires */
	NUPP_CHECK_BPFFS,          /* /sys/fs/bpf (not needed by record) */
	NUPP_CHECK_TRACEFS,        /* needed only without the uprobe PMU */
	NUPP_CHECK_MEMLOCK,        /* RLIMIT_MEMLOCK, and whether BPF memory counts against it */
	NUPP_CHECK_CHANNELS,       /* record's own sampler and abort programs load and attach */
	NUPP_CHECK_PROCESS,        /* -p PID: exists, can be inspected */
	NUPP_CHECK_LUAJIT,         /* runs LuaJIT at all */
	NUPP_CHECK_BUILD,          /* our build: the exported layout, a version we read */
	NUPP_CHECK_PROBES,         /* the luajit:* USDT probes in its binary */
	NUPP_CHECK_GC64,           /* GC64 and two-slot frames (the only mode we walk) */
	NUPP_CHECK_VMS,            /* Lua VMs open */
	NUPP_CHECK_BINARY,         /* its binary was not replaced or changed since it started */
	NUPP_CHECK__MAX
};

/* One check's result. */
struct nupp_check {
	enum nupp_check_id id;
	const char *name;   /* short name as printed: "CAP_BPF", "kernel BTF", "uprobes", ... */
	enum nupp_check_status status;
	int err;            /* -errno of the step that failed, else 0 */
	char detail[384];   /* what was found, one line */
	char remedy[384];   /* what to do; "" when nothing needs doing */
};

struct nupp_doctor_opts {
	size_t sz;   /* sizeof(struct nupp_doctor_opts) */
	pid_t pid;   /* also check this process (0: the machine and our privileges only) */
	bool quick;  /* do not load record's own channels (NUPP_CHECK_CHANNELS is skipped) */
};

/* Runs every check (those of a target only with opts->pid) into out[], in the order
 * of enum nupp_check_id; returns how many were filled, or -errno (-EINVAL bad opts).
 * Trying a uprobe takes about 0.1 s (its detach waits for the kernel). */
int nupp_doctor_run(const struct nupp_doctor_opts *opts, struct nupp_check *out, int max);

/* The first check of out[0..n) that makes record fail, or NULL. */
const struct nupp_check *nupp_doctor_blocker(const struct nupp_check *out, int n);

/* "ok", "note", "warn", "FAIL" or "skip". */
const char *nupp_check_status_name(enum nupp_check_status s);

/* Whether BPF sessions can run here, for process pid (0: this process, -1: the machine
 * and our privileges only), found by the quick checks, trying (a BPF program loads, a
 * CPU-clock event delivers a sample, a uprobe can be created) without waiting for the
 * uprobe's release. The machine's checks are tried once per effective user and
 * capability set and then reused; a process's own checks pass once and stay passed
 * (CAP_SYS_PTRACE is not asked for a process's own memory). 0, or -EPERM (a privilege),
 * -ENOTSUP (a kernel feature, or a LuaJIT without our probes and layout), -ENOENT (not
 * LuaJIT, or no VM open), -ESRCH (no such process); why (and nupp_errmsg()) then names
 * the check, what was found and the remedy. nupp_available() (include/nupp/nupp.h) is
 * this function. Thread-safe. */
int nupp_doctor_verdict(int pid, char *why, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* NUPP_DOCTOR_H */
