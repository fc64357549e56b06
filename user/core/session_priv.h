/* What the files of a profiling session share: its limits, its state (struct
 * nupp_session, one struct ses_target per process), the clocks, and the functions one
 * part of it calls in another. Private to session*.c: nothing here is libnupp's API. */
#ifndef NUPP_SESSION_PRIV_H
#define NUPP_SESSION_PRIV_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <limits.h>
#include <sys/types.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "nupp/sampler.h"
#include "nupp/sampler_abi.h"
#include "nupp/trace.h"
#include "nupp/follow_abi.h"
#include "nupp/zone_abi.h"
#include "nupp_internal.h"

#define SES_MAX_TARGETS 256 /* processes attached at once (those gone are reclaimed) */
#define SES_MAX_PIDS 4096  /* processes named in meta.pids */
#define SES_DEFAULT_FREQ 99
#define SES_DEFAULT_DRAIN_MS 200
/* After a process starts or execs, its VMs are looked for this often, this long: a VM
 * opened then has its zone id read by the sampler within one step. */
#define SES_FAST_MS 10
#define SES_FAST_SECS 2.0
#define SES_MAX_UNFOLLOWED 32
#define SES_MAX_FORKED 256 /* forked children not followed, watched for an exec or their exit */

/* One profiled process. */
struct ses_target {
	pid_t pid;
	char binary[PATH_MAX]; /* the ELF object with our LuaJIT ("" unknown yet) */
	bool attached;         /* probes attached and the sampler told */
	bool counted;          /* in meta.pids */
	__u64 vmlist;          /* address of its luajit_bpf_vmlist, 0 unknown */
	__u64 armed[NUPP_LJ_VMLIST_MAX]; /* g whose zone id the sampler reads, per slot */
	double fast_until;     /* look for new VMs every SES_FAST_MS until then */
	bool settled;          /* vmlist found and every VM in it armed: no fast looks */
	double exited;         /* when the follower saw it exit (ses_now), 0 alive */
};

struct nupp_session {
	struct nupp_session_opts o;
	char *zone_filter, *root, *command, *target;
	struct nupp_sampler *smp;
	struct nupp_trace *tr;
	struct nupp_zones *zones;
	struct follow_bpf *follow; /* the follower alone, for a session without the sampler */
	int fol_fd;                /* the map of followed processes both channels share, or -1 */
	int wake_fd;               /* nupp_session_wake_fd's, or -1 */
	bool following;            /* forks and execs followed (the sampler's follower or follow) */
	struct ring_buffer *frb;
	struct ses_target t[SES_MAX_TARGETS];
	int nt;
	pid_t pids[SES_MAX_PIDS];
	int npids;
	char *unfollowed[SES_MAX_UNFOLLOWED];
	int nunfollowed;
	struct nupp_sample_set acc; /* rows drained so far, zone paths named */
	struct nupp_thread_name *threads; /* the threads of the rows, named when first seen */
	size_t nthreads, threads_cap;
	size_t *thash;     /* open-addressing index of threads[] by (pid, tid): index + 1, 0 free */
	size_t thash_cap;  /* slots of thash (a power of two, at least twice nthreads), 0 none */
	struct nupp_abort_set ab;
	__u64 lost_before[NUPP_LOST__MAX]; /* samples of followed processes taken before they were known */
	double t0, next_drain, next_scan;
	double drained;   /* when the last finished drain began (ses_now) */
	__u64 unattached; /* processes that could not be attached: more than SES_MAX_TARGETS at once */
	pid_t forked[SES_MAX_FORKED]; /* children forked, not followed, not exec'ed (yet) */
	int nforked;
	__u64 forks_unfollowed; /* of those, the ones that exited running their parent's VM */
	double t0_wall; /* t0 as Unix time */
	bool started, stopped, paused;
	/* background: the helper process and the socket to it */
	pid_t helper;
	int sock;
	bool is_helper;
	/* In the helper: the process it works for (pid, start time, pidfd or -1). */
	pid_t owner;
	unsigned long long owner_start;
	int owner_fd;
	double owner_next;
	bool helper_zones; /* the helper saw a zone table */
};

/* The helper's requests: the rows so far, or the last ones. */
enum { SES_REQ_SNAPSHOT = 'S', SES_REQ_STOP = 'T' };

/* Monotonic seconds. */
static inline double ses_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Unix time in seconds. */
static inline double ses_wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* strdup of NULL is NULL. */
static inline char *ses_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* Targets (session_targets.c): a process's entry (made if create and there is room); its
 * VMs' zone slots armed; the follower's events read. */
struct ses_target *ses_target(struct nupp_session *s, pid_t pid, bool create);
void ses_arm_zones(struct nupp_session *s, struct ses_target *t);
void ses_follow_poll(struct nupp_session *s);

/* Draining (session_drain.c): one drain of both channels into the session's rows; one
 * step of the cadence (poll, drain when due); the threads named. */
int ses_drain(struct nupp_session *s);
int ses_step(struct nupp_session *s, int timeout_ms);
int ses_thread_add(struct nupp_session *s, pid_t pid, pid_t tid, const char *name);
void ses_threads_free(struct nupp_session *s);

/* The helper's socket (session_wire.c): whole reads and writes, the rows sent and read. */
int ses_write_all(int fd, const void *buf, size_t n);
int ses_read_all(int fd, void *buf, size_t n);
int ses_send_sets(struct nupp_session *s, int fd);
int ses_recv_sets(struct nupp_session *s, bool *zones_seen);

/* The helper process (session_helper.c): started at nupp_session_start, asked for rows. */
int ses_start_helper(struct nupp_session *s);
int ses_ask(struct nupp_session *s, char req, bool *zones_seen);

#endif
