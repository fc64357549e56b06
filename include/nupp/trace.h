/* The trace channel: JIT trace aborts counted in the kernel from luajit:trace_* USDT probes. */
#ifndef NUPP_TRACE_H
#define NUPP_TRACE_H

#include <stdbool.h>
#include <sys/types.h>

#include "nupp/profile.h"
#include "nupp/trace_abi.h"

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
 * libluajit.so) for pid (-1: every process running it). Once a binary is attached for
 * every process, attaching it again, for any pid, does nothing (a second probe would
 * count each abort twice); attach for every process before attaching per process. */
int nupp_trace_attach(struct nupp_trace *t, const char *binary, pid_t pid);

/* Pauses (true) or resumes (false) counting; probes stay attached. */
int nupp_trace_pause(struct nupp_trace *t, bool paused);

/* Reads the abort counts and adds the rows to out (reason and location text, zone
 * path, severity, totals). Can be called more than once; each call drains. */
int nupp_trace_drain(struct nupp_trace *t, struct nupp_abort_set *out);

/* Kernel cost so far: run time of both trace programs and runs of the abort program,
 * so run_time_ns / run_cnt is the cost per abort event (0 without
 * kernel.bpf_stats_enabled). */
int nupp_trace_stats(struct nupp_trace *t, __u64 *run_time_ns, __u64 *run_cnt);

/* Tells the BPF program where pid's luajit_bpf_vmlist is (the address of the exported
 * symbol in its memory): each abort then carries the zone id that nupp.zone keeps for
 * the aborting VM there; 0 forgets it (rows then have zone 0, ""). A session names the
 * ids from the process's zone tables; without one, a row reads "#<id>". */
int nupp_trace_set_vmlist(struct nupp_trace *t, pid_t pid, __u64 addr);

/* Every counter since open (drained and not yet drained): totals, blacklist events,
 * what was left out and why (benign, paused, traceno 0, map full, read faults). */
int nupp_trace_counters(struct nupp_trace *t, struct nupp_trace_counters *out);

/* Renders a row's reason like jit/v.lua fmterr, with an unrecordable bytecode and an IR
 * op by name ("NYI: bytecode FNEW") and a fast function by its name on the branch of the
 * VM the row came from (NUPP_LJ_BRANCH_*; another value: "(?)"). Returns the length (as
 * snprintf). */
int nupp_trace_format_reason(const struct nupp_trace_key *k, unsigned branch, char *buf, size_t size);

/* Renders a location exactly like lj_debug_pushloc ("file.lua:12", "name:3",
 * "\"chunk\":1", "0x7f..:5" for a long chunk name, "builtin:name"); "" if none. */
int nupp_trace_format_loc(const struct nupp_trace_loc *l, char *buf, size_t size);

/* Detaches and frees. */
void nupp_trace_close(struct nupp_trace *t);

#ifdef __cplusplus
}
#endif
#endif /* NUPP_TRACE_H */
