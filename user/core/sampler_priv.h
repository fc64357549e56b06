/* What the parts of the sampler channel share, and nothing outside them includes
 * (user/core/sampler*.c): the sampler object, its targets and probe attachments, the stacks
 * it holds and a drain's rows, and the functions one part calls in another. The API is
 * include/nupp/sampler.h; what the symbolizer and the trace cache share with the sampler
 * is sampler_internal.h. Declares no BPF object: the parts include sampler.skel.h. */
#ifndef NUPP_SAMPLER_PRIV_H
#define NUPP_SAMPLER_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>
#include <sys/types.h>
#include <linux/types.h>

#include "nupp/profile.h"
#include "nupp/sampler.h"
#include "nupp/sampler_abi.h"

struct bpf_link;
struct ring_buffer;
struct sampler_bpf;
struct nupp_addrmap;
struct nupp_sym;
struct nupp_traces;

/* -- The sampler, its targets and the stacks it holds -------------------------------- */

#define SMP_MAX_CPUS 1024
#define SMP_MAX_ATTACH 32
#define SMP_PROBES 3
/* The process follower's programs (bpf/follow.h): fork, exec, exit. */
#define SMP_FOL_PROGS 3

/* One target process and its per-process name caches. */
struct smp_target {
	pid_t pid;
	struct nupp_lj_layout lo;
	int have_layout;
	struct nupp_sym *sym;
	struct nupp_traces *traces;
	__u64 pgen;  /* prototype generation when the current drain began */
	__u64 nlost; /* prototype free events lost, as last seen */
	int reset;   /* an event could not be recorded: forget the records at the drain */
	struct nupp_addrmap *amap; /* mappings and symbols: host code, C functions, call sites */
	bool amap_read;            /* mappings read in this drain */
	/* Interpreter call sites (return addresses) checked for helper samples. */
	struct smp_site {
		__u64 ra;
		int cpcall; /* ... for a sample under a protected call it made (NUPP_SMP_F_CPCALL) */
		int ok;     /* what it stored: NUPP_SMP_SYNC_* */
	} sites[64];
	int nsites;
	/* Prototypes met that may be read at once (nupp_sym_prefetch), refilled with time. */
	double pf_tokens;
	__u64 pf_us;
};

/* USDT probes attached for one (binary, pid). */
struct smp_attach {
	char binary[512];
	pid_t pid;
	__u64 cookie; /* vm_open's: &luajit_bpf_vmlist - &luajit_bpf_layout, 0 unknown */
	struct bpf_link *links[SMP_PROBES];
};

/* The sampler: its BPF object, perf events, rings, targets, attachments, stacks held. */
#define SMP_SYM_CAUSES 24 /* causes of 'symbolize' losses told apart */

struct nupp_sampler {
	struct nupp_sampler_opts opts;
	struct sampler_bpf *skel;
	int ncpu;
	int pfd[SMP_MAX_CPUS];
	struct bpf_link *plink[SMP_MAX_CPUS];
	struct ring_buffer *rb;
	struct ring_buffer *stk_rb; /* the stacks sent (stk_ring), emptied at each drain */
	__u64 stk_lost;             /* stack records refused (malformed; out of memory) */
	/* Samples lost as 'symbolize' so far, by cause (static texts; the last slot takes
	 * any cause past the others). */
	struct smp_sym_lost {
		const char *why;
		__u64 n;
	} sym_lost[SMP_SYM_CAUSES];
	struct bpf_link *flink[SMP_FOL_PROGS]; /* the process follower's programs, once attached */
	bool fol_ring;             /* its ring buffer is read with the sampler's */
	struct smp_target targets[NUPP_SMP_MAX_TARGETS];
	int ntargets;
	struct smp_attach attach[SMP_MAX_ATTACH];
	int nattach;
	long ev_left;     /* events the current poll may still handle */
	__u64 ev_handled; /* events handled (for -v) */
	/* Walks failed since lost_where was last read (done at most every SMP_WHERE_US, and
	 * at close), and when it may be read next. */
	bool where_due;
	__u64 where_next;
	/* Stacks of the stacks map held here too (struct smp_stk), by key, and per buffer
	 * from the least recently counted to the most (old[b] .. new[b]); drains so far. */
	struct smp_stk **stk;
	size_t stk_nb, stk_n[NUPP_SMP_NBUF];
	struct smp_stk *stk_old[NUPP_SMP_NBUF], *stk_new[NUPP_SMP_NBUF];
	__u64 drains;
	/* The stacks map, mapped: the marks of the stacks sent, stk_slots a buffer. */
	__u64 *marks;
	size_t marks_len;
	__u32 stk_slots;
};

/* A stack BPF sent for a buffer (the stack ring), held by userspace while the stacks map
 * keeps its mark for the samples of that buffer that count it again: a drain deletes
 * marks (and lets go of the stacks) only of stacks its buffer has not counted for
 * SMP_STK_IDLE drains of it, and, when the buffer holds more than half its room, of the
 * least recently counted down to three eighths. A mark is cleared only while its buffer
 * is being drained, when no count of that buffer refers to it: a sample that needs the
 * stack again sends it again before counting it. */
struct smp_stk {
	struct smp_stk *next;         /* in its hash bucket */
	struct smp_stk *older, *newer; /* in its buffer's list, by the drain that last counted it */
	__u64 key;  /* the stack key, with its buffer's bit */
	__u64 used; /* the drain that last counted it */
	size_t size;
	struct nupp_smp_stack *rec; /* the frames used only (size bytes) */
	/* The name a drain gave it for process name_tgid (a record names the same frames
	 * in every drain: its prototype generation and trace serial say which), with the
	 * frame table its frames were recorded in (nupp_frame_table.id); NULL: none yet. */
	char *name;
	__u32 name_tgid;
	bool name_cut;
	unsigned long long name_table;
};

/* -- The drain's rows and pace ------------------------------------------------------- */

/* Events handled per nupp_sampler_poll: a target that loads and frees code without
 * pause must not keep the caller from draining. */
#define SMP_POLL_EVENTS 4096
/* Events a drain handles before it names (and between naming rounds): all of them,
 * unless the target sends faster than they are read. */
#define SMP_DRAIN_EVENTS 65536

/* A counted stack of a drain, named (stack) or lost (lost_reason). */
struct smp_row {
	struct nupp_smp_count_key key;
	struct nupp_smp_count c;
	const struct nupp_smp_stack *st; /* the frames used only (held in held) */
	size_t size;                      /* of st */
	struct smp_stk *held;
	bool named_before; /* its name is held's, made in an earlier drain */
	bool borrowed;     /* stack is held's name, not a copy: never freed by the row */
	char *stack;
	int lost_reason;
	const char *sym_why; /* lost as 'symbolize': why (static text) */
	bool cut; /* named with a [truncated] root */
};

/* Monotonic microseconds. */
static inline __u64 smp_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000 + (__u64)ts.tv_nsec / 1000;
}

/* -- The lifecycle (sampler.c) ------------------------------------------------------- */

/* Frames BPF walks: the depth, and one more (its caller names the outermost kept). */
__u32 smp_walk_depth(const struct nupp_sampler *s);

/* -- The event ring (sampler_events.c) ----------------------------------------------- */

/* The target entry of pid, or NULL. */
struct smp_target *smp_target(struct nupp_sampler *s, pid_t pid);
/* Makes sure a target has its symbolizer and trace cache: 0, -ENOENT (no layout yet)
 * or -ENOMEM. */
int smp_target_ready(struct nupp_sampler *s, struct smp_target *t);
/* The event ring's callback: handles one event within the poll's budget. */
int smp_on_event(void *ctx, void *data, size_t size);
/* Handles the events sent so far, up to max: 0 when none is left, 1 when the budget ran
 * out first (the target sends faster than we read). */
int smp_consume(struct nupp_sampler *s, long max);

/* -- The stacks held (sampler_stacks.c) ---------------------------------------------- */

/* The stack ring's callback: holds a stack the sampler sent. */
int smp_on_stack(void *ctx, void *data, size_t size);
/* The stack held for key k, or NULL. */
struct smp_stk *smp_stk_get(struct nupp_sampler *s, __u64 k);
/* Marks c counted in this drain. */
void smp_stk_used(struct nupp_sampler *s, struct smp_stk *c);
/* Holds a copy of rec (size bytes) for key k; NULL when out of memory. */
struct smp_stk *smp_stk_add(struct nupp_sampler *s, __u64 k, const struct nupp_smp_stack *rec, size_t size);
/* Gives name (taken, not copied) to c, for process tgid and frame table table. */
void smp_stk_give_name(struct smp_stk *c, char *name, __u32 tgid, bool cut, unsigned long long table);
/* Keeps a copy of name as c's (a failed copy only costs the name). */
void smp_stk_name(struct smp_stk *c, const char *name, __u32 tgid, bool cut, unsigned long long table);
/* Lets go of buffer buf's idle (all: every one) stacks, clearing their marks (unmark). */
void smp_stk_evict(struct nupp_sampler *s, int buf, bool all, bool unmark);
/* Clears the mark of stack key k (unless another stack's holds its slot). */
void smp_stk_unmark(struct nupp_sampler *s, __u64 k);
/* Clears every mark of buffer buf, which nothing writes now. */
void smp_stk_unmark_all(struct nupp_sampler *s, int buf);

/* -- The drain (sampler_drain.c) ----------------------------------------------------- */

/* Deletes n keys of ksz bytes from map fd in batches. */
void smp_delete_keys(int fd, const char *keys, size_t n, size_t ksz);

/* -- Naming the rows (sampler_name.c) ------------------------------------------------ */

/* Lets go of r's name (freed when it is the row's own). */
void smp_row_unname(struct smp_row *r);
/* Samples of a count. */
__u64 smp_total(const struct nupp_smp_count *c);
/* Names the rows of one drain (a row whose record an earlier drain named for frame
 * table ft takes that name). */
void smp_name_rows(struct nupp_sampler *s, struct smp_row *rows, size_t n, const struct nupp_frame_table *ft);
/* Adds a named row to out, or counts its samples lost. */
int smp_add_row(struct nupp_sampler *s, struct smp_row *r, struct nupp_sample_set *out);
/* Counts n samples lost as 'symbolize' for cause why (sampler_stats.c). */
void smp_sym_lost(struct nupp_sampler *s, const char *why, __u64 n);
/* Keeps the names this drain gave with their records, for later drains. */
void smp_hold_names(struct smp_row *rows, size_t n, unsigned long long table);
/* Names the host samples of a drain ("[host];<symbol>") and adds them to out. */
int smp_host_rows(struct nupp_sampler *s, const struct nupp_smp_host_key *keys, const __u64 *vals, long n,
		  struct nupp_sample_set *out);

/* -- Its own counters (sampler_stats.c) ---------------------------------------------- */

/* Reports where walks failed and empties the lost_where map. */
void smp_lost_where(struct nupp_sampler *s);

#endif /* NUPP_SAMPLER_PRIV_H */
