/* Internals of the sampler channel shared by user/core/sampler.c, user/core/symbolize.c,
 * user/core/snapshot*.c and their unit tests: memory readers, the symbolizer, the trace cache. */
#ifndef NUPP_SAMPLER_INTERNAL_H
#define NUPP_SAMPLER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>

#include "nupp/profile.h"
#include "nupp/sampler_abi.h"

/* Reads len bytes of the target at addr: 0 or -errno (nupp_vm_read, or fake memory). */
typedef int (*nupp_read_fn)(void *ctx, __u64 addr, void *buf, size_t len);

/* One range of a vectored read of the target. */
struct nupp_read_seg {
	__u64 addr;
	void *buf;
	size_t len;
};

/* Reads n ranges of the target in one go: how many leading ranges were read whole (0..n;
 * the read stops at the first range that is not mapped), or -errno (nupp_vm_readv, or
 * fake memory). */
typedef int (*nupp_readv_fn)(void *ctx, const struct nupp_read_seg *seg, int n);

/* process_vm_readv of n ranges of pid, IOV_MAX at a time (each call counted by
 * nupp_vm_read_calls): see nupp_readv_fn. */
int nupp_vm_readv(pid_t pid, const struct nupp_read_seg *seg, int n);

/* -- Symbolizer (user/core/symbolize.c) ---------------------------------------------- */

struct nupp_sym;

/* A symbolizer for one process; lines: name Lua frames module:line. */
struct nupp_sym *nupp_sym_new(pid_t pid, const struct nupp_lj_layout *lo, bool lines, nupp_read_fn read,
			      void *read_ctx);
/* Frees it and its caches. */
void nupp_sym_free(struct nupp_sym *s);
/* Gives it a vectored reader (one system call for many ranges); without one, the ranges
 * of a vectored read are read one by one. */
void nupp_sym_set_readv(struct nupp_sym *s, nupp_readv_fn readv);
/* Reads up to max of the prototypes met since the last call (their allocations and
 * string constants, in three vectored reads) while they live; the others are read when a
 * sample needs them. Returns how many were read. */
int nupp_sym_prefetch(struct nupp_sym *s, int max);
/* Names frames (innermost first) sampled at prototype generation pgen (struct
 * nupp_smp_stack) as "outer;...;inner" in a malloc'ed string; 0 or -errno (-ESTALE: a
 * prototype of the sample was freed before it could be named, or its fingerprint no
 * longer matches its memory). */
int nupp_sym_stack(struct nupp_sym *s, const struct nupp_smp_frame *f, int n, __u64 pgen, char **out);
/* Records, for each Lua frame named from now on, where its function is defined (name,
 * chunk, first and last line) in t (NULL: stop). Returns -ENOMEM if a record failed
 * since the last call, else 0. */
int nupp_sym_set_frames(struct nupp_sym *s, struct nupp_frame_table *t);
/* Names one frame given its caller (NULL if none) into buf; 0 or -errno. */
int nupp_sym_frame(struct nupp_sym *s, const struct nupp_smp_frame *f, const struct nupp_smp_frame *caller,
		   __u64 pgen, char *buf, size_t size);
/* Prototype lifetimes (the sampler's events, in the order sent), so a frame is named from
 * the incarnation of its address that its sample saw: pt, alive, was met by a sample (or
 * a trace copy) of generation pgen for the first time since it was made, with chunk name
 * name[len] (cut if len < full); every sample of it is of generation pgen or later. */
int nupp_sym_born(struct nupp_sym *s, __u64 pt, __u64 pgen, __u64 chunk, __s32 firstline, __u32 sizebc,
		  const char *name, __u32 len, __u32 full);
/* The allocation of pt, met at generation pgen, as the sample that met it found it
 * (mem[size], cut if size < sizept): named without reading it. */
int nupp_sym_copied(struct nupp_sym *s, __u64 pt, __u64 pgen, __u64 chunk, __s32 firstline, __u32 sizebc,
		    const void *mem, __u32 size, __u32 sizept);
/* pt, met before, died, ending generation pgen (generations count the frees of
 * prototypes met); mem[size] is its allocation (sizept bytes) as it was, cut if
 * size < sizept. */
int nupp_sym_freed(struct nupp_sym *s, __u64 pt, __u64 pgen, __u64 chunk, __s32 firstline, __u32 sizebc,
		   const void *mem, __u32 size, __u32 sizept);
/* The string constants of pt as it died at generation pgen (struct nupp_smp_kstr
 * entries, size bytes): a closing VM's, copied before its strings were freed. */
int nupp_sym_kstrs(struct nupp_sym *s, __u64 pt, __u64 pgen, const void *data, __u32 size);
/* Free events were lost, all at generations <= pgen (the process's generation now):
 * forgets every record, refuses stacks up to pgen, names later ones afresh. */
void nupp_sym_reset(struct nupp_sym *s, __u64 pgen);
/* Free events were lost, all at generations <= pgen: refuses only the stacks of the
 * generations from the first free not read to pgen, ends the incarnations thought alive
 * there, drops copies that may postdate a lost free; returns that first generation. */
__u64 nupp_sym_lost(struct nupp_sym *s, __u64 pgen);
/* The sampler read the process's generation gen, before naming a drain's stacks. */
void nupp_sym_gen_seen(struct nupp_sym *s, __u64 gen);
/* Starts a drain; nupp_sym_suspect: a prototype copied from the target in this drain was
 * freed since, so the stacks named in it must be named again. */
void nupp_sym_begin(struct nupp_sym *s);
bool nupp_sym_suspect(const struct nupp_sym *s);
/* Drops the incarnations that died at or before generation pgen: every sample left to
 * name is of pgen or later. */
void nupp_sym_purge(struct nupp_sym *s, __u64 pgen);
/* The process's VMs (global_State addresses): a string is read from the target only
 * while none of them is sweeping (-EAGAIN: try later). */
void nupp_sym_set_vms(struct nupp_sym *s, const __u64 *g, int n);
/* Names modules by the chunk's full path ("@/a/b/c.lua" -> "/a/b/c.lua") instead. */
void nupp_sym_set_full_filenames(struct nupp_sym *s, bool on);
/* The allocation (*mem, *size bytes: a freed prototype's copy may be cut) of the
 * incarnation of f->ptr that generation pgen saw, copied from the target while it lives
 * or from its free event; 0 or -errno. */
int nupp_sym_proto_mem(struct nupp_sym *s, const struct nupp_smp_frame *f, __u64 pgen, const unsigned char **mem,
		       __u32 *size);
struct nupp_addrmap;
/* Names C functions with this address map of the process (borrowed; by default the
 * symbolizer reads the process's mappings itself). */
void nupp_sym_set_addrmap(struct nupp_sym *s, struct nupp_addrmap *a);
/* Module of a chunk name as jit.p prints it: "@a/b/c.lua" -> "c.lua", "=x" -> "x",
 * anything else -> "[string]". */
void nupp_sym_module(const char *chunk, char *buf, size_t size);

/* -- Traces (user/core/snapshot*.c) ---------------------------------------------------- */

/* Index of the snapshot whose code holds mcode offset ofs: the rightmost snapshot with
 * mcofs <= ofs (lj_trace.c:1040-1045); -1 if ofs is before the first. */
int nupp_snap_search(const __u16 *mcofs, __u32 nsnap, __u32 ofs);

struct nupp_traces;

/* A cache of decoded traces of one process. */
struct nupp_traces *nupp_traces_new(const struct nupp_lj_layout *lo, nupp_read_fn read, void *read_ctx);
void nupp_traces_free(struct nupp_traces *t);
/* Where a trace's decoder finds its prototypes' bytecode: the symbolizer of the process
 * (nupp_sym_proto_mem), which holds a prototype's copy after it died; NULL: read each
 * from the target (it must be alive). */
void nupp_traces_set_sym(struct nupp_traces *t, struct nupp_sym *sym);
/* Decodes (and caches) incarnation serial of trace T, number traceno of VM g, now from
 * the target: kept only if that incarnation still lived after the last read. born: the
 * prototype generation of a sample of it (nupp_smp_stack.pgen). 0 or -errno (-ESTALE:
 * that incarnation is gone). */
int nupp_traces_add(struct nupp_traces *t, __u64 g, __u64 T, __u32 traceno, __u32 serial, __u64 born);
/* A TRACE_COPY event (struct nupp_smp_trace_event, size bytes): the trace as BPF copied
 * it at its first sample, kept and decoded when a sample first needs it. A copy of a
 * trace already known changes nothing. 0 or -errno. */
int nupp_traces_add_copy(struct nupp_traces *t, const void *ev, size_t size);
/* Sets the drain clock (microseconds) and drops the entries no sample named for a while
 * (a later sample of one reads it from the target if it lives). */
void nupp_traces_purge(struct nupp_traces *t, __u64 now_us);
/* Rewrites a trace sample's frames: the leaf position from the snapshot and the inlined
 * frames above the start frame. in has n frames; out has room for max; returns the new
 * count, or -errno (-ENOENT: the trace is unknown and cannot be read any more). */
int nupp_traces_expand(struct nupp_traces *t, const struct nupp_smp_stack *st, struct nupp_smp_frame *out,
		       int max);
/* Why the last nupp_traces_expand that failed did (a static text naming the cause), or
 * NULL if none failed. */
const char *nupp_traces_why(const struct nupp_traces *t);

/* -- Helper samples (user/core/sampler.c) -------------------------------------------- */

/* What the interpreter stored before calling the C helper named callee (with cpcall: by
 * the time of a protected call the helper made, NUPP_SMP_F_CPCALL): NUPP_SMP_SYNC_BOTH
 * (BASE in L->base and PC in SAVE_PC), NUPP_SMP_SYNC_BASE (L->base only) or
 * NUPP_SMP_SYNC_NONE. */
enum { NUPP_SMP_SYNC_NONE = 0, NUPP_SMP_SYNC_BASE = 1, NUPP_SMP_SYNC_BOTH = 2 };
int nupp_smp_sync_of(const char *callee, bool cpcall);
/* Is a helper's sample (NUPP_SMP_F_HELPER) a stack, given what its call site stored
 * (NUPP_SMP_SYNC_*)? Takes the PC (pos -1) from its leaf Lua frame when only L->base was
 * stored. */
bool nupp_smp_helper_keep(struct nupp_smp_stack *st, int sync);

#endif /* NUPP_SAMPLER_INTERNAL_H */
