/* libnupp: the stack each thread of a LuaJIT process runs now, read from its memory
 * (user/core/dump.c): `nupp-bpf dump`.
 *
 * A thread that is not on a CPU (blocked in a system call, stopped, waiting) is dumped
 * from its saved state: its user stack pointer and PC (/proc/PID/task/TID/syscall) name
 * the VM whose C frame lies on its stack, and that VM's frames are walked in memory as
 * the sampler walks a VM that called C, with the same proofs. A thread on a CPU cannot
 * be read that way (the interpreter keeps its frame in registers): it is marked running,
 * for the caller to sample. Nothing is written to the target and it is not stopped: the
 * values read are those of a running process, each read once. */
#ifndef NUPP_DUMP_H
#define NUPP_DUMP_H

#include <stdbool.h>
#include <sys/types.h>
#include <linux/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One local variable of a Lua frame: its name and a short text of its value. */
struct nupp_dump_local {
	char *name;
	char *value;
};

/* One frame, outermost first in a thread's frames. */
struct nupp_dump_frame {
	char *name;  /* as record names it ("m.lua:fn", "pcall", a C function, "[host];f") */
	char *where; /* Lua frames: "m.lua:12", the current (or calling) line; else NULL */
	bool lua;
	struct nupp_dump_local *locals; /* with locals: the frame's named live locals */
	int nlocals;
};

enum nupp_dump_how {
	NUPP_DUMP_MEMORY,  /* walked in memory from the thread's saved state */
	NUPP_DUMP_RUNNING, /* on a CPU: to be sampled (frames empty) */
	NUPP_DUMP_HOST,    /* in no Lua VM: frames hold its C function, if named */
	NUPP_DUMP_FAILED,  /* its walk could not be proven (why says so) */
};

struct nupp_dump_thread {
	pid_t tid;
	char comm[17];
	char state;      /* /proc state: R running, S sleeping, D disk, T stopped, ... */
	long syscall;    /* the system call it is blocked in, -1 none or running */
	enum nupp_dump_how how;
	__u64 g;         /* the VM it runs (global_State in the target), 0: none */
	char *vmstate;   /* that VM's state: "interpreted", "C code", "GC", "compiled (trace 3)" ... */
	char *zone;      /* the zone path open in that VM ("" none) */
	struct nupp_dump_frame *frames;
	int nframes;
	char *why;       /* FAILED: why the stack is not shown */
};

struct nupp_dump {
	pid_t pid;
	struct nupp_dump_thread *threads;
	int nthreads;
	__u64 reads; /* process_vm_readv calls made (each reads a page or more) */
};

struct nupp_dump_opts {
	size_t sz;   /* sizeof(struct nupp_dump_opts) */
	bool locals; /* read each Lua frame's local variables */
	bool full_filenames;
};

/* Dumps every thread of pid into *out (free with nupp_dump_free). 0, or -ESRCH no such
 * process, -EPERM, -ENOENT not running our LuaJIT / no VM open, -ENOMEM (nupp_errmsg says). */
int nupp_dump_read(pid_t pid, const struct nupp_dump_opts *o, struct nupp_dump **out);
void nupp_dump_free(struct nupp_dump *d);

#ifdef __cplusplus
}
#endif
#endif /* NUPP_DUMP_H */
