/* libnupp: the public C API of nupp-bpf (sessions, target VMs, reports).
 *
 * libbpf-shaped: opaque objects, option structs whose first field is their size,
 * negative errno on failure, no printing inside the library (set a print callback).
 * After a failure, nupp_errmsg() holds one line with the cause and the remedy.
 *
 * What lies between the ffi:begin and ffi:end markers uses only C types LuaJIT's
 * ffi.cdef reads as they are (int, unsigned int, size_t, bool, char, unsigned long long,
 * pointers, va_list): scripts/gen-cdef.lua copies it into nupp/cdef.lua at build time,
 * and that is what the Lua binding (lua/nupp/profile.lua) declares.
 */
#ifndef NUPP_NUPP_H
#define NUPP_NUPP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>

#include "nupp/lj_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* -- Library ----------------------------------------------------------------- */

/* ffi:begin */
enum nupp_log_level { NUPP_WARN, NUPP_INFO, NUPP_DEBUG };
typedef int (*nupp_print_fn)(enum nupp_log_level level, const char *fmt, va_list ap);

/* Installs the print callback (NULL: silence); returns the previous one. */
nupp_print_fn nupp_set_print(nupp_print_fn fn);
/* The message of the last failure in this thread: cause and remedy, one line. */
const char *nupp_errmsg(void);
/* libnupp's version string. */
const char *nupp_version(void);
/* The LuaJIT build libnupp was made for (Debian version, patch, layout version). */
const char *nupp_luajit_build(void);
/* ffi:end */

/* -- Target VMs (user/core/vm.c) --------------------------------------------------- */

/* One LuaJIT VM (global_State) in a process, with the layout its binary exports. */
struct nupp_vm {
	pid_t pid;
	__u64 g;           /* global_State * in the target */
	__u64 L;           /* main lua_State * (GG->L) */
	__u64 layout_addr; /* address of luajit_bpf_layout in the target */
	char path[512];    /* the ELF object that holds the VM (exe or libluajit .so) */
	struct nupp_lj_layout layout;
};

/* Finds the LuaJIT VMs open in a running process without any probe having fired:
 * reads the exported layout and VM list from the ELF object mapped in /proc/PID/maps
 * and validates each g by the GG_State pointer identities. Returns how many were
 * stored in out (up to max, 0 if the process has not opened a VM yet), or:
 * -ESRCH no such process, -EPERM not allowed to read it, -ENOENT not running LuaJIT,
 * -ENOTSUP LuaJIT without nupp-bpf's probes and layout (nupp_errmsg names the binary). */
int nupp_vm_find(pid_t pid, struct nupp_vm *out, int max);

/* The name of a layout's branch (NUPP_LJ_BRANCH_*): "luajit" (LuaJIT 2.1), "luajit2"
 * (OpenResty's), or "unknown". */
const char *nupp_lj_branch_name(unsigned branch);

/* Checks that g is a live global_State of pid: mainthref -> GG.L and L->glref -> g. */
int nupp_vm_validate(pid_t pid, __u64 g, const struct nupp_lj_layout *lo);

/* Reads len bytes at addr of pid (process_vm_readv); 0 or -errno. */
int nupp_vm_read(pid_t pid, __u64 addr, void *buf, size_t len);
/* process_vm_readv calls made by nupp_vm_read since the program started (each one takes
 * the target's mmap lock: the profiler's cost to its target). */
__u64 nupp_vm_read_calls(void);

/* Finds the ELF object (path) that holds a LuaJIT VM for an executable about to be
 * run: the executable itself, the libluajit it links, or the interpreter of a "#!"
 * script. 0, or -ENOENT command not found, -ENOEXEC no LuaJIT in it, -ENOTSUP a
 * LuaJIT without nupp-bpf's probes and layout (nupp_errmsg names it). */
int nupp_vm_binary_for_exe(const char *exe, char *path, size_t size);

/* -- vm_open watcher (user/core/vmwatch.c, bpf/vmwatch.bpf.c) ---------------------- */

struct nupp_vmwatch;

struct nupp_vmwatch_opts {
	size_t sz;          /* sizeof(struct nupp_vmwatch_opts) */
	const char *binary; /* ELF object with the probes (our luajit or libluajit.so) */
	pid_t pid;          /* only this process; 0 or -1: every process of binary */
};

/* Attaches to luajit:vm_open / vm_close of binary; NULL and *err = -errno on failure. */
struct nupp_vmwatch *nupp_vmwatch_open(const struct nupp_vmwatch_opts *opts, int *err);
/* Waits up to timeout_ms for the next VM opened (1, *out filled), 0 on timeout, -errno. */
int nupp_vmwatch_next(struct nupp_vmwatch *w, int timeout_ms, struct nupp_vm *out);
/* Detaches and frees. */
void nupp_vmwatch_close(struct nupp_vmwatch *w);

/* -- Probe check (user/core/probecheck.c, bpf/probecheck.bpf.c) -------------------- */

struct nupp_probecheck;

/* The names of the luajit:* probes, indexed by enum nupp_probe (include/nupp/abi.h). */
extern const char *const nupp_probe_names[];
/* Number of luajit:* probes our LuaJIT build has. */
#define NUPP_PROBES 11

/* Attaches a counter to every luajit:* probe of binary for pid (-1: all processes).
 * attach_err[i] receives 0 or the -errno of each probe's attach; the call fails
 * (NULL, *err) only if the BPF object cannot be loaded. */
struct nupp_probecheck *nupp_probecheck_open(const char *binary, pid_t pid, int attach_err[NUPP_PROBES],
					     int *err);
/* Hits and the argument count libbpf decoded (-1: never hit) of probe i so far. */
int nupp_probecheck_read(struct nupp_probecheck *pc, int i, __u64 *hits, int *nargs);
/* Detaches and frees. */
void nupp_probecheck_close(struct nupp_probecheck *pc);

/* -- Sessions (user/core/session.c) --------------------------------------------------
 * A session runs the sampler and/or the trace-abort channel on one or more processes:
 * it attaches in the right order, reads the kernel's events and counts at a steady
 * cadence, names zone ids from the processes' own nupp.zone tables, pauses and resumes,
 * gives the aggregate so far at any time, and stops into a struct nupp_profile with the
 * zone filter and root cut applied and its meta filled. `nupp-bpf record` and the Lua
 * binding nupp.profile both run on it (through nupp/cdef.lua: see the top). */

/* ffi:begin */
struct nupp_session;
struct nupp_profile;

struct nupp_session_opts {
	size_t sz;             /* sizeof(struct nupp_session_opts) */
	bool samples;          /* run the sampler channel */
	bool aborts;           /* run the trace-abort channel */
	int freq_hz;           /* samples per second per thread (0: 99) */
	int depth;             /* frames per stack (0: 64, the most) */
	bool lines;            /* name Lua frames module:line */
	bool include_benign;   /* count the aborts that are ordinary trace formation */
	unsigned int max_stacks; /* distinct stacks kept in the kernel (0: 16384) */
	unsigned int max_sites;  /* distinct abort rows kept in the kernel (0: 4096) */
	const char *zone_filter; /* at stop: keep samples whose zone path starts with this */
	const char *root;        /* at stop: cut stacks below the outermost frame of this module */
	int drain_ms;          /* how often the counts are read and named (0: 200) */
	bool background;       /* read and name in a helper process: for profiling oneself */
	bool subprocesses;     /* follow every descendant that runs our LuaJIT */
	const char *command;   /* meta: the command line that made the profile */
	const char *target;    /* meta: the profiled command line (NULL for a running PID) */
	bool full_filenames;   /* Lua frames name the chunk's full path, not jit.p's basename */
	bool lua_only;         /* no "[host];..." rows (host samples are still counted) */
};

/* Loads the channels' BPF programs. NULL and *err = -errno on failure; nupp_errmsg()
 * names the cause and the remedy (a missing capability, no BTF, ...). */
struct nupp_session *nupp_session_open(const struct nupp_session_opts *opts, int *err);
/* Attaches to a running process (every thread; VMs found from its memory). 0, -ESRCH no
 * such process, -EPERM, -ENOENT not running LuaJIT or no VM open yet, -ENOTSUP a LuaJIT
 * without our probes. */
int nupp_session_attach(struct nupp_session *s, int pid);
/* Attaches to a child forked to run exe and still held before its exec: its VMs are
 * sampled from their first instruction, and the session follows its execs (a wrapper
 * script or `env` that execs our LuaJIT later). 0 or -errno. */
int nupp_session_attach_spawned(struct nupp_session *s, int pid, const char *exe);
/* Starts the clock (and the helper process of a background session). */
int nupp_session_start(struct nupp_session *s);
/* Reads events and, at the drain cadence, counts (foreground sessions), for at most
 * timeout_ms. 0 or -errno. */
int nupp_session_poll(struct nupp_session *s, int timeout_ms);
/* Makes nupp_session_poll also return as soon as fd is readable (a pidfd of the target,
 * a pipe a signal handler writes, or an epoll set of such): a caller that waits for those
 * can then pass a long timeout, and the session wakes only for its events and drains.
 * -1: none (the default). 0 or -errno. */
int nupp_session_wake_fd(struct nupp_session *s, int fd);
/* Pauses (true) or resumes (false) recording; the timer keeps firing, one test per
 * sample, and the probes stay attached. */
int nupp_session_pause(struct nupp_session *s, bool paused);
/* The aggregate so far: every sample row and abort row, no filter, with its meta. The
 * caller frees it with nupp_session_profile_free. NULL and *err on failure. */
struct nupp_profile *nupp_session_snapshot(struct nupp_session *s, int *err);
/* Ends the session: the last counts, the zone filter and root cut, sorted rows, meta.
 * The channels stay loaded until nupp_session_close. NULL and *err on failure. */
struct nupp_profile *nupp_session_stop(struct nupp_session *s, int *err);
/* Frees a profile returned by a session. */
void nupp_session_profile_free(struct nupp_profile *p);
/* Whether a profiled process has loaded nupp.zone (published a zone table) so far. */
bool nupp_session_zones_seen(struct nupp_session *s);
/* Child processes that ran our LuaJIT and were not followed (without subprocesses):
 * the i-th as "PID (command line)", or NULL past the last. */
const char *nupp_session_unfollowed(struct nupp_session *s, int i);
/* Processes not profiled, as counts: forked children that ran their parent's LuaJIT VM
 * to their exit and were not followed (without subprocesses), and processes that could
 * not be attached because too many were profiled at once. */
void nupp_session_not_profiled(struct nupp_session *s, unsigned long long *forks,
			       unsigned long long *too_many);
/* The channels, for their statistics (NULL when not running). */
struct nupp_sampler *nupp_session_sampler(struct nupp_session *s);
struct nupp_trace *nupp_session_trace(struct nupp_session *s);
/* Detaches and frees. */
void nupp_session_close(struct nupp_session *s);

/* Reading a profile row by row (for FFI users; C users read struct nupp_profile). */
size_t nupp_profile_nsamples(const struct nupp_profile *p);
/* Sample row i: returns its stack; *zone_path, *pid, and counts[6] = count, compiled,
 * interpreted, cCode, collecting, compiling. NULL past the end. */
const char *nupp_profile_sample(const struct nupp_profile *p, size_t i, const char **zone_path, int *pid,
				unsigned long long counts[6]);
size_t nupp_profile_naborts(const struct nupp_profile *p);
/* Abort row i: returns its reason; *severity ("blacklist", "warn", "info"), *count,
 * *location, *zone_path. NULL past the end. */
const char *nupp_profile_abort(const struct nupp_profile *p, size_t i, const char **severity,
			       unsigned long long *count, const char **location, const char **zone_path);
/* Totals: [0] samples, [1] total aborts, [2] blacklisted, [3..8] samples lost by reason
 * (nupp_lost order: noVm, readFault, badFrame, truncated, mapFull, symbolize). */
void nupp_profile_totals(const struct nupp_profile *p, unsigned long long totals[9]);
/* Writes the nupp profile JSON document of p to path ("-": stdout). 0 or -errno. */
int nupp_profile_write_json(const struct nupp_profile *p, const char *path);
/* Writes len bytes of text to path ("-": stdout) as every nupp-bpf output is written: a
 * temporary file in the path's own folder renamed onto it, never through a symbolic link
 * another user owns, owned by the sudo user under sudo. 0 or -errno (nupp_errmsg()). */
int nupp_write_text_file(const char *path, const char *text, size_t len);

/* -- Availability ----------------------------------------------------------------- */

/* Whether the BPF channels can run here, for process pid (0: this process, -1: the
 * machine and our privileges only), found by trying what a session does: load a BPF
 * program, open CPU-clock events, create a uprobe (this is nupp_doctor_verdict,
 * include/nupp/doctor.h). 0, or -EPERM (a privilege: uprobes need CAP_SYS_ADMIN on
 * kernels like this one, not only CAP_BPF and CAP_PERFMON), -ENOTSUP (a kernel feature,
 * or a process without our LuaJIT build), -ENOENT (not LuaJIT, or no VM open), -ESRCH;
 * why (and nupp_errmsg()) names the check, what was found and the remedy. The first call
 * in a process takes some 20-40 ms; later ones reuse what was tried (about 0.1 ms for
 * this process) until the effective user or capabilities change. */
int nupp_available(int pid, char *why, size_t size);
/* ffi:end */

#ifdef __cplusplus
}
#endif
#endif /* NUPP_NUPP_H */
