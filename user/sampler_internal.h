/* Internals of the sampler channel shared by user/sampler.c, user/symbolize.c,
 * user/snapshot.c and their unit tests: memory readers, the symbolizer, the trace cache. */
#ifndef NUPP_SAMPLER_INTERNAL_H
#define NUPP_SAMPLER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>

#include "nupp/sampler_abi.h"

/* Reads len bytes of the target at addr: 0 or -errno (nupp_vm_read, or fake memory). */
typedef int (*nupp_read_fn)(void *ctx, __u64 addr, void *buf, size_t len);

/* -- Symbolizer (user/symbolize.c) ---------------------------------------------- */

struct nupp_sym;

/* A symbolizer for one process; lines: name Lua frames module:line. */
struct nupp_sym *nupp_sym_new(pid_t pid, const struct nupp_lj_layout *lo, bool lines, nupp_read_fn read,
			      void *read_ctx);
/* Frees it and its caches. */
void nupp_sym_free(struct nupp_sym *s);
/* Names frames (innermost first) as "outer;...;inner" in a malloc'ed string; 0 or -errno
 * (-ESTALE: a proto's fingerprint no longer matches its memory). */
int nupp_sym_stack(struct nupp_sym *s, const struct nupp_smp_frame *f, int n, char **out);
/* Names one frame given its caller (NULL if none) into buf; 0 or -errno. */
int nupp_sym_frame(struct nupp_sym *s, const struct nupp_smp_frame *f, const struct nupp_smp_frame *caller,
		   char *buf, size_t size);
/* Module of a chunk name as jit.p prints it: "@a/b/c.lua" -> "c.lua", "=x" -> "x",
 * anything else -> "[string]". */
void nupp_sym_module(const char *chunk, char *buf, size_t size);

/* -- Traces (user/snapshot.c) ---------------------------------------------------- */

/* Index of the snapshot whose code holds mcode offset ofs: the rightmost snapshot with
 * mcofs <= ofs (lj_trace.c:1040-1045); -1 if ofs is before the first. */
int nupp_snap_search(const __u16 *mcofs, __u32 nsnap, __u32 ofs);

struct nupp_traces;

/* A cache of decoded traces of one process. */
struct nupp_traces *nupp_traces_new(const struct nupp_lj_layout *lo, nupp_read_fn read, void *read_ctx);
void nupp_traces_free(struct nupp_traces *t);
/* Decodes (and caches) trace T now, while it is alive. 0 or -errno. */
int nupp_traces_add(struct nupp_traces *t, __u64 T, __u32 traceno);
/* Marks T (or every trace if T == 0) as freed: dropped by the next nupp_traces_purge. */
void nupp_traces_kill(struct nupp_traces *t, __u64 T);
/* Drops the entries marked freed. */
void nupp_traces_purge(struct nupp_traces *t);
/* Rewrites a trace sample's frames: the leaf position from the snapshot and the inlined
 * frames above the start frame. in has n frames; out has room for max; returns the new
 * count, or -errno (-ENOENT: the trace is unknown and cannot be read any more). */
int nupp_traces_expand(struct nupp_traces *t, const struct nupp_smp_stack *st, struct nupp_smp_frame *out,
		       int max);

#endif /* NUPP_SAMPLER_INTERNAL_H */
