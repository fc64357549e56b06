/* A profiling session: the sampler and the trace-abort channel on one or more processes,
 * attached in order, drained at a steady cadence, zone ids named from the processes' own
 * nupp.zone tables, processes followed through exec and fork, and a stop that applies
 * the zone filter and the root cut and fills the profile's meta. This file opens,
 * starts, pauses, snapshots, stops and closes it; its parts are session_targets.c (the
 * processes), session_drain.c (the cadence), session_helper.c and session_wire.c (the
 * in-app helper process), session_profile.c (reading the stopped profile). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "session_priv.h"
#include "zones_internal.h"
#include "follow.skel.h"

/* -- Opening ------------------------------------------------------------------- */

/* The channels of a session being opened side by side, and how each fared. */
struct ses_opening {
	struct nupp_session *s;
	int err[2];
	char msg[2][1024];
};

/* Opens channel i of a session (0: the sampler, 1: the trace channel) if asked for. */
static void ses_open_one(void *arg, size_t i)
{
	struct ses_opening *op = arg;
	struct nupp_session *s = op->s;
	int e = 0;

	if (i == 0 && s->o.samples) {
		struct nupp_sampler_opts so = { .sz = sizeof(so), .freq_hz = s->o.freq_hz, .depth = s->o.depth,
						.lines = s->o.lines, .max_stacks = s->o.max_stacks,
						.full_filenames = s->o.full_filenames };

		s->smp = nupp_smp_open(&so, s->fol_fd, &e);
	} else if (i == 1 && s->o.aborts) {
		struct nupp_trace_opts to = { .sz = sizeof(to), .include_benign = s->o.include_benign,
					      .max_sites = s->o.max_sites };

		s->tr = nupp_trace_open_shared(&to, s->fol_fd, &e);
	}
	op->err[i] = e;
	/* The message is this thread's: handed to the opener's. */
	if (e)
		snprintf(op->msg[i], sizeof(op->msg[i]), "%s", nupp_errmsg());
}

/* Loads the channels' BPF programs. */
struct nupp_session *nupp_session_open(const struct nupp_session_opts *opts, int *err)
{
	struct nupp_session *s;
	int e = 0, i;

	if (!opts || opts->sz < offsetof(struct nupp_session_opts, target) + sizeof(opts->target)) {
		*err = nupp_fail(-EINVAL, "nupp_session_open: opts->sz is %zu, expected at least %zu (rebuild "
				 "against this libnupp's nupp.h)", opts ? opts->sz : 0,
				 offsetof(struct nupp_session_opts, target) + sizeof(opts->target));
		return NULL;
	}
	if (!opts->samples && !opts->aborts) {
		*err = nupp_fail(-EINVAL, "nupp_session_open: neither samples nor aborts asked for");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		*err = nupp_fail(-ENOMEM, "out of memory");
		return NULL;
	}
	s->sock = -1;
	s->owner_fd = -1;
	s->fol_fd = -1;
	s->wake_fd = -1;
	s->o = *opts;
	s->o.sz = sizeof(s->o);
	/* Fields after target only when the caller's struct has them (older callers). */
	if (opts->sz < offsetof(struct nupp_session_opts, full_filenames) + sizeof(opts->full_filenames))
		s->o.full_filenames = false;
	if (opts->sz < offsetof(struct nupp_session_opts, lua_only) + sizeof(opts->lua_only))
		s->o.lua_only = false;
	if (!s->o.freq_hz)
		s->o.freq_hz = SES_DEFAULT_FREQ;
	if (!s->o.depth)
		s->o.depth = NUPP_SMP_DEFAULT_DEPTH;
	if (s->o.drain_ms <= 0)
		s->o.drain_ms = SES_DEFAULT_DRAIN_MS;
	s->zone_filter = ses_strdup(opts->zone_filter);
	s->root = ses_strdup(opts->root);
	s->command = ses_strdup(opts->command);
	s->target = ses_strdup(opts->target);
	s->o.zone_filter = s->zone_filter;
	s->o.root = s->root;
	s->o.command = s->command;
	s->o.target = s->target;
	s->zones = nupp_zones_new();
	if (!s->zones) {
		e = nupp_fail(-ENOMEM, "out of memory");
		goto fail;
	}
	if (s->o.samples && s->o.aborts) {
		/* The processes followed (if any are) are the trace channel's tgid filter: one
		 * map, made first, so that both channels can load side by side. */
		s->fol_fd = bpf_map_create(BPF_MAP_TYPE_HASH, "fol_followed", sizeof(__u32), sizeof(__u32),
					   NUPP_FOLLOW_MAX_PROCS, NULL);
		if (s->fol_fd < 0) {
			e = nupp_fail(-errno, "cannot create the map of followed processes: %s (CAP_BPF is required)",
				      strerror(errno));
			goto fail;
		}
	}
	{
		struct ses_opening op = { .s = s };

		/* Both channels at once: loading verifies their BPF programs, which takes time. */
		nupp_parallel(ses_open_one, &op, 2);
		for (i = 0; i < 2; i++)
			if (op.err[i]) {
				e = nupp_fail(op.err[i], "%s", op.msg[i]);
				goto fail;
			}
	}
	if (s->tr)
		nupp_trace_set_zones(s->tr, s->zones);
	return s;
fail:
	nupp_session_close(s);
	*err = e ? e : -EINVAL;
	return NULL;
}

/* -- The session's life -------------------------------------------------------- */

/* Starts the clock (and the helper of a background session). */
int nupp_session_start(struct nupp_session *s)
{
	if (s->started)
		return 0;
	s->t0 = ses_now();
	s->t0_wall = ses_wall();
	s->next_drain = s->t0 + s->o.drain_ms / 1000.0;
	s->started = true;
	if (s->o.background)
		return ses_start_helper(s);
	return 0;
}

/* Reads events and drains at the cadence, for at most timeout_ms. */
int nupp_session_poll(struct nupp_session *s, int timeout_ms)
{
	if (s->o.background)
		return nupp_fail(-EINVAL, "nupp_session_poll: a background session polls in its helper");
	if (!s->started)
		nupp_session_start(s);
	return ses_step(s, timeout_ms);
}

int nupp_session_wake_fd(struct nupp_session *s, int fd)
{
	if (s->o.background)
		return nupp_fail(-EINVAL, "nupp_session_wake_fd: a background session polls in its helper");
	s->wake_fd = fd;
	return 0;
}

/* Pauses or resumes recording (the BPF programs' flags: shared with a helper). */
int nupp_session_pause(struct nupp_session *s, bool paused)
{
	int e = 0;

	s->paused = paused;
	if (s->smp)
		e = nupp_sampler_pause(s->smp, paused);
	if (!e && s->tr)
		e = nupp_trace_pause(s->tr, paused);
	return e;
}

static bool ses_zones_seen_any(struct nupp_session *s)
{
	int i;

	for (i = 0; i < s->nt; i++)
		if (nupp_zones_seen(s->zones, s->t[i].pid))
			return true;
	return false;
}

/* A profile holding copies of the session's rows, and its meta. */
static struct nupp_profile *ses_profile(struct nupp_session *s, bool filter, int *err)
{
	struct nupp_profile *p = calloc(1, sizeof(*p));
	struct nupp_sample_set in = s->acc;
	int e = 0, j;

	if (!p) {
		*err = nupp_fail(-ENOMEM, "out of memory");
		return NULL;
	}
	for (j = 0; j < NUPP_LOST__MAX; j++)
		in.lost[j] += s->o.background ? 0 : s->lost_before[j];
	e = nupp_sample_set_filter(&in, filter ? s->zone_filter : NULL, filter ? s->root : NULL, &p->samples);
	for (j = 0; !e && j < (int)s->ab.n; j++) {
		const struct nupp_abort_row *r = &s->ab.rows[j];

		e = nupp_abort_set_add(&p->aborts, r->severity, r->reason, r->location, r->zone_path, r->count);
	}
	if (e) {
		nupp_session_profile_free(p);
		*err = nupp_fail(e, "out of memory");
		return NULL;
	}
	p->aborts.total_aborts = s->ab.total_aborts;
	p->aborts.blacklisted = s->ab.blacklisted;
	nupp_abort_set_sort(&p->aborts);
	p->meta.command = s->command;
	p->meta.target = s->target;
	p->meta.pids = s->pids;
	p->meta.npids = s->npids;
	p->meta.frequency_hz = s->o.freq_hz;
	p->meta.duration_sec = s->started ? ses_now() - s->t0 : 0;
	p->meta.start_time = s->started ? s->t0_wall : 0;
	p->meta.backend = "bpf";
	p->meta.luajit = nupp_luajit_build();
	p->meta.depth = s->o.depth;
	p->meta.aborts = s->tr != NULL;
	p->meta.include_benign = s->o.include_benign;
	p->meta.zone_filter = s->zone_filter;
	p->meta.root = s->root;
	p->meta.lines = s->o.lines;
	p->meta.full_filenames = s->o.full_filenames;
	p->meta.threads = s->threads;
	p->meta.nthreads = (int)s->nthreads;
	return p;
}

/* The aggregate so far. */
struct nupp_profile *nupp_session_snapshot(struct nupp_session *s, int *err)
{
	int e;

	if (s->stopped)
		return ses_profile(s, true, err);
	if (s->o.background && s->helper)
		e = ses_ask(s, SES_REQ_SNAPSHOT, &s->helper_zones);
	else
		e = ses_drain(s);
	if (e) {
		*err = e;
		return NULL;
	}
	return ses_profile(s, false, err);
}

/* Ends the session into its profile. */
struct nupp_profile *nupp_session_stop(struct nupp_session *s, int *err)
{
	int e = 0;

	if (!s->stopped) {
		if (s->o.background && s->helper) {
			e = ses_ask(s, SES_REQ_STOP, &s->helper_zones);
			close(s->sock);
			s->sock = -1;
			s->helper = 0;
		} else {
			ses_follow_poll(s);
			e = ses_drain(s);
		}
		s->stopped = true;
		if (e) {
			*err = e;
			return NULL;
		}
	}
	return ses_profile(s, true, err);
}

/* Whether a profiled process has loaded nupp.zone so far. */
bool nupp_session_zones_seen(struct nupp_session *s)
{
	return ses_zones_seen_any(s) || s->helper_zones;
}

/* Children that ran our LuaJIT and were not followed. */
void nupp_session_not_profiled(struct nupp_session *s, unsigned long long *forks, unsigned long long *too_many)
{
	*forks = s->forks_unfollowed;
	*too_many = s->unattached;
}

const char *nupp_session_unfollowed(struct nupp_session *s, int i)
{
	return i >= 0 && i < s->nunfollowed ? s->unfollowed[i] : NULL;
}

struct nupp_sampler *nupp_session_sampler(struct nupp_session *s)
{
	return s->smp;
}

struct nupp_trace *nupp_session_trace(struct nupp_session *s)
{
	return s->tr;
}

/* Frees a profile returned by a session. */
void nupp_session_profile_free(struct nupp_profile *p)
{
	if (!p)
		return;
	nupp_sample_set_free(&p->samples);
	nupp_abort_set_free(&p->aborts);
	free(p);
}

/* Closes one channel of a session (i: 0 the sampler, 1 the trace channel, 2 the
 * follower). */
static void ses_close_one(void *arg, size_t i)
{
	struct nupp_session *s = arg;

	if (i == 0) {
		nupp_sampler_close(s->smp);
	} else if (i == 1) {
		nupp_trace_close(s->tr);
	} else {
		ring_buffer__free(s->frb);
		follow_bpf__destroy(s->follow);
		if (s->fol_fd >= 0)
			close(s->fol_fd);
	}
}

/* Detaches and frees. */
void nupp_session_close(struct nupp_session *s)
{
	int i;

	if (!s)
		return;
	if (s->sock >= 0)
		close(s->sock); /* the helper sees the end of file and exits */
	/* The channels at once: each uprobe's detach waits for kernel grace periods, which
	 * detaches made side by side share (they are separate BPF objects). */
	nupp_parallel(ses_close_one, s, 3);
	nupp_zones_free(s->zones);
	nupp_sample_set_free(&s->acc);
	nupp_abort_set_free(&s->ab);
	ses_threads_free(s);
	for (i = 0; i < s->nunfollowed; i++)
		free(s->unfollowed[i]);
	free(s->zone_filter);
	free(s->root);
	free(s->command);
	free(s->target);
	free(s);
}
