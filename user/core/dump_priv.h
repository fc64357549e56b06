/* Internals of nupp_dump_read shared by user/core/dump.c (threads, walks, names) and
 * dump_locals.c (a Lua frame's local variables). */
#ifndef NUPP_DUMP_PRIV_H
#define NUPP_DUMP_PRIV_H

#include <stdbool.h>
#include <sys/types.h>
#include <linux/types.h>

#include "nupp/dump.h"
#include "nupp/nupp.h"
#include "nupp/sampler_abi.h"

#define DUMP_PAGE 4096
#define DUMP_PAGES 512  /* pages kept: 2 MiB, more than a dump of deep stacks reads */
#define DUMP_MAX_VMS 16 /* VMs of one process (NUPP_LJ_VMLIST_MAX) */

struct dump_page {
	__u64 addr;
	bool ok;
	unsigned char data[DUMP_PAGE];
};

/* The target's pages read so far. */
struct dump_mem {
	pid_t pid;
	struct dump_page pages[DUMP_PAGES];
	int n;
	__u64 reads;
};

/* Reads sz bytes of the target at addr through the page cache; 0 or -EFAULT (dst zeroed). */
int dump_mem_read(struct dump_mem *m, __u64 addr, void *dst, size_t sz);

struct nupp_sym;
struct nupp_zones;
struct nupp_walk;
struct nupp_traces;

/* The two symbolizers of one VM: frames named by function and by line. */
struct dump_vmsym {
	__u64 g;
	const struct nupp_vm *vm;
	struct nupp_sym *names, *lines;
	struct nupp_traces *traces; /* a walk in a trace is expanded by its snapshot */
};

struct dump_ctx {
	pid_t pid;
	struct nupp_dump_opts o;
	struct nupp_vm vms[DUMP_MAX_VMS];
	int nvms;
	struct dump_vmsym syms[DUMP_MAX_VMS];
	int nsyms;
	struct nupp_zones *zones;
	struct nupp_walk *w;
	__u64 bases[NUPP_SMP_MAX_DEPTH]; /* the base of each frame of the walk, 0 unknown */
	struct dump_mem mem;
};

/* Reads the named local variables live at frame f (its slots at base) into o. */
void dump_locals(struct dump_ctx *c, const struct nupp_vm *vm, const struct nupp_smp_frame *f, __u64 base,
		 struct nupp_dump_frame *o);

#endif /* NUPP_DUMP_PRIV_H */
