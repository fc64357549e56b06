/* Internals of the record subcommand shared by its files: user/cli/cmd_record.c (options
 * and the top-level flow), record_signal.c (stop signals and the wait), record_output.c
 * (the outputs and the lines printed about them), record_verbose.c (the -v statistics).
 * Nothing outside record's files includes it. */
#ifndef NUPP_CLI_RECORD_H
#define NUPP_CLI_RECORD_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "nupp/sampler.h"
#include "nupp/trace.h"

#define RECORD_MAX_OUTPUTS 8

struct record_opts {
	int freq;
	int depth;
	double duration;
	const char *outputs[RECORD_MAX_OUTPUTS]; /* -o, repeatable: one file per format */
	int noutputs;
	enum nupp_format format; /* -f: the format of every -o (NONE: by extension) */
	int top;                 /* --top N: print the table after recording */
	bool full_filenames;
	const char *aborts_csv;
	const char *zone;
	const char *root;
	bool lines, quiet, aborts, include_benign, subprocesses, lua_only;
	bool why; /* --why: explain hot interpreted code at the end */
	__u32 max_stacks;
	pid_t pid;
	char **cmd;
};

/* -- Stop signals and the wait (record_signal.c) -- */

extern volatile sig_atomic_t record_stop_sig;   /* the stop signal received, 0 before one */
extern volatile sig_atomic_t record_written;    /* the outputs are written: a second Ctrl-C exits 0 */
extern volatile pid_t record_child;             /* the command started, interrupted with us */
extern volatile sig_atomic_t record_sigpipe;    /* written by a stop signal: ends the wait */
extern int record_sigpipe_in;                   /* its read end */

/* The fd record waits on besides the session's events: the stop signals' pipe and pidfd
 * (-1: none) in an epoll set; -1 when it cannot be made (then it waits in short steps). */
int record_wake_fd(int pidfd);
/* Installs the stop handlers (no SA_RESTART, so poll returns at once). */
void record_signals(void);

/* -- Outputs and what is printed about them (record_output.c) -- */

/* The format of output path: forced by -f, else by its extension (NONE: unknown). */
enum nupp_format record_format(const struct record_opts *o, const char *path);
/* Checks that an output can be written; 0, or 1 after the error. */
int record_check_output(const char *path);
/* Writes every output and the abort CSV, each on its own; failed[i] says which failed
 * (index noutputs: the CSV). Returns how many failed, after printing each error. */
int record_write(const struct record_opts *o, const struct nupp_profile *prof, bool *failed);
/* The status line on stderr while recording on a terminal (cleared with done). */
void record_status(struct nupp_session *ses, double secs, bool done);
/* Prints the final summary line(s) on stderr: what was written, and what failed. */
void record_summary(const struct record_opts *o, const struct nupp_sample_set *set,
		    const struct nupp_abort_set *ab, double secs, const bool *failed);
/* Prints the warnings of a finished session: children not followed. */
void record_warnings(const struct record_opts *o, struct nupp_session *ses);

/* -- The -v statistics (record_verbose.c) -- */

/* Prints why samples were lost as 'symbolize', cause by cause. */
void record_symbolize_causes(struct nupp_sampler *smp);
/* Prints what became of the traces sampled, and the prototypes watched. */
void record_trace_copies(struct nupp_sampler *smp);
/* Prints what the samples' walks did: frames from the frame cache, reads, new stacks. */
void record_walk_stats(struct nupp_sampler *smp);
/* Prints the kernel cost of the BPF programs (needs kernel.bpf_stats_enabled=1). */
void record_stats(struct nupp_sampler *smp, struct nupp_trace *tr);
/* CPU seconds this process used so far, user and system; 0 when unknown. */
double record_cpu(double *user, double *sys);
/* Prints the CPU time this process used, start to now, and the part before recording. */
void record_own_cpu(double start_cpu);

#endif /* NUPP_CLI_RECORD_H */
