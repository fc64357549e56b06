/* libnupp: the public C API of nupp-bpf (sessions, target VMs, reports).
 *
 * libbpf-shaped: opaque objects, option structs whose first field is their size,
 * negative errno on failure, no printing inside the library (set a print callback).
 * After a failure, nupp_errmsg() holds one line with the cause and the remedy.
 */
#ifndef NUPP_NUPP_H
#define NUPP_NUPP_H

#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>

#include "nupp/lj_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* -- Library ----------------------------------------------------------------- */

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

/* -- Target VMs (user/vm.c) --------------------------------------------------- */

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

/* -- vm_open watcher (user/vmwatch.c, bpf/vmwatch.bpf.c) ---------------------- */

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

/* -- Probe check (user/probecheck.c, bpf/probecheck.bpf.c) -------------------- */

struct nupp_probecheck;

/* The names of the luajit:* probes, indexed by enum nupp_probe (include/nupp/abi.h). */
extern const char *const nupp_probe_names[];
/* Number of luajit:* probes our LuaJIT build has. */
#define NUPP_PROBES 10

/* Attaches a counter to every luajit:* probe of binary for pid (-1: all processes).
 * attach_err[i] receives 0 or the -errno of each probe's attach; the call fails
 * (NULL, *err) only if the BPF object cannot be loaded. */
struct nupp_probecheck *nupp_probecheck_open(const char *binary, pid_t pid, int attach_err[NUPP_PROBES],
					     int *err);
/* Hits and the argument count libbpf decoded (-1: never hit) of probe i so far. */
int nupp_probecheck_read(struct nupp_probecheck *pc, int i, __u64 *hits, int *nargs);
/* Detaches and frees. */
void nupp_probecheck_close(struct nupp_probecheck *pc);

#ifdef __cplusplus
}
#endif
#endif /* NUPP_NUPP_H */
