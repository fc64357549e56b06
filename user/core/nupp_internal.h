/* libnupp internals shared between user/ files: logging, errors, ELF helpers. */
#ifndef NUPP_INTERNAL_H
#define NUPP_INTERNAL_H

#include <stddef.h>
#include <linux/types.h>
#include <sys/types.h>

#include "nupp/nupp.h"

#define NUPP_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Sends a message to the print callback, if any. */
void nupp_pr(enum nupp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Records the message for the failure being returned; returns err. */
int nupp_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* -- Side by side (user/core/parallel.c) ------------------------------------------ */

/* Calls fn(arg, i) for every i < n concurrently; returns when all have returned. */
void nupp_parallel(void (*fn)(void *arg, size_t i), void *arg, size_t n);

/* The USDT cookie of luajit:vm_open in binary (distance from luajit_bpf_layout to
 * luajit_bpf_vmlist), 0 when it has no zone slots (user/core/vm.c). */
__u64 nupp_vm_vmlist_cookie(const char *binary);

/* -- jit.vmdef's names (user/core/vmdef.c) ---------------------------------------- */

/* The name of fast function id on a VM of branch (NUPP_LJ_BRANCH_*), or NULL. */
const char *nupp_vmdef_ffname(unsigned branch, __u64 id);

/* -- ELF (user/core/elf.c) -------------------------------------------------------- */

/* Looks up a symbol (dynsym, then symtab) in an ELF file: 0 and value/size, or -errno. */
int nupp_elf_sym(const char *path, const char *name, __u64 *value, __u64 *size);
/* Translates a virtual address of the ELF file into a file offset (via PT_LOAD). */
int nupp_elf_vaddr_to_off(const char *path, __u64 vaddr, __u64 *off);
/* Reads len bytes of a data symbol's initial value from the file (a constant such as
 * luajit_bpf_layout, no process read): 0, -ENOENT no such symbol, -EINVAL too small. */
int nupp_elf_read_sym(const char *path, const char *name, void *buf, size_t len);

/* -- /proc/PID/maps (user/core/elf.c) --------------------------------------------- */

struct nupp_map {
	__u64 start, end, offset;
	char perms[5];
	char path[512];
};

/* Reads /proc/PID/maps into a malloc'ed array; count or -errno. */
int nupp_maps_read(pid_t pid, struct nupp_map **maps);
/* The runtime address of a file offset of path in pid's maps, or 0. */
__u64 nupp_maps_addr(const struct nupp_map *maps, int n, const char *path, __u64 off);

/* -- Address maps (user/core/elf.c): a process's mappings and its files' symbols --- */

struct nupp_addrmap;

/* A new, empty address map of pid (read by nupp_addrmap_refresh). */
struct nupp_addrmap *nupp_addrmap_new(pid_t pid);
/* Frees the map and its files. */
void nupp_addrmap_free(struct nupp_addrmap *a);
/* Reads the process's mappings again (kept as they were if it is gone); 0 or -errno. */
int nupp_addrmap_refresh(struct nupp_addrmap *a);
/* The function containing runtime address addr: 0 with its ELF symbol name and runtime
 * start, or -ENOENT when no symbol of a mapped file contains it (never the nearest one). */
int nupp_addrmap_sym(struct nupp_addrmap *a, __u64 addr, __u64 *start, char *buf, size_t size);
/* Names the code at addr: its ELF symbol (0); else "file+0xVADDR" or the mapping's name
 * ("[vdso]", "[anon]") (1); -ENOENT if no mapping holds it. */
int nupp_addrmap_name(struct nupp_addrmap *a, __u64 addr, char *buf, size_t size);
/* Reads len bytes of code at runtime address addr from its mapped file; 0 or -errno. */
int nupp_addrmap_read(struct nupp_addrmap *a, __u64 addr, void *buf, size_t len);

/* -- Sampler (user/core/sampler*.c): rings read with its own ----------------------- */

struct nupp_sampler;
struct nupp_sampler_opts;

/* Reads the ring buffer map_fd in the sampler's polls too, each record handed to fn:
 * one wait for both, woken by either. 0 or -errno. */
int nupp_smp_add_ring(struct nupp_sampler *s, int map_fd, int (*fn)(void *ctx, void *data, size_t size),
		      void *ctx);

/* nupp_sampler_open, its map of followed processes (tgid -> enum nupp_follow_value)
 * being the map followed_fd (-1: its own), as a session shares it with the trace
 * channel's tgid filter. */
struct nupp_sampler *nupp_smp_open(const struct nupp_sampler_opts *opts, int followed_fd, int *err);
/* Attaches the process follower built into the sampler's object (bpf/follow.h): forks,
 * execs and exits of the processes in its map of followed processes, each event handed
 * to fn in the sampler's polls; subprocesses: a child is profiled as its parent is, not
 * only watched. Once; 0 or -errno. */
int nupp_smp_follow(struct nupp_sampler *s, bool subprocesses, int (*fn)(void *ctx, void *data, size_t size),
		    void *ctx);
/* Whether the sampler's vm_open program, attached to binary, sets a new VM's zone slot
 * itself (the binary's symbols gave it the distance from the layout to the vmlist). */
bool nupp_smp_zone_slots(struct nupp_sampler *s, const char *binary);
/* The epoll fd of the sampler's ring buffers (readable when an event woke it). */
int nupp_smp_epoll_fd(struct nupp_sampler *s);
/* The fd of the sampler's map of followed processes. */
int nupp_smp_followed_fd(struct nupp_sampler *s);
/* Stops sampling a process that is gone and frees what the sampler kept of it (its
 * names, mappings, traces); its counts must have been drained since it exited. 0, or
 * -ENOENT when it was not sampled. */
int nupp_smp_remove_pid(struct nupp_sampler *s, pid_t pid);

#endif /* NUPP_INTERNAL_H */
