/* The trace channel: JIT trace aborts counted in the kernel from luajit:trace_* USDT probes. */
#ifndef NUPP_TRACE_H
#define NUPP_TRACE_H

#include <stdbool.h>
#include <sys/types.h>

#include "nupp/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

struct nupp_trace;

struct nupp_trace_opts {
	size_t sz;           /* sizeof(struct nupp_trace_opts) */
	bool include_benign; /* count the info (trace formation) rows too */
	__u32 max_sites;     /* size of the abort map (default 4096) */
};

/* Loads the trace BPF programs. NULL and *err = -errno on failure (nupp_errmsg()). */
struct nupp_trace *nupp_trace_open(const struct nupp_trace_opts *opts, int *err);

/* Attaches the luajit:trace_* probes of an ELF object with our probes (luajit or
 * libluajit.so) for pid (-1: every process running it). */
int nupp_trace_attach(struct nupp_trace *t, const char *binary, pid_t pid);

/* Pauses (true) or resumes (false) counting; probes stay attached. */
int nupp_trace_pause(struct nupp_trace *t, bool paused);

/* Reads the abort counts and adds the rows to out (reason and location text, zone
 * path, severity, totals). Can be called more than once; each call drains. */
int nupp_trace_drain(struct nupp_trace *t, struct nupp_abort_set *out);

/* Kernel cost so far of the abort program: total run time and runs (0 without
 * kernel.bpf_stats_enabled). */
int nupp_trace_stats(struct nupp_trace *t, __u64 *run_time_ns, __u64 *run_cnt);

/* Detaches and frees. */
void nupp_trace_close(struct nupp_trace *t);

#ifdef __cplusplus
}
#endif
#endif /* NUPP_TRACE_H */
