/* A session's cadence: a drain of both channels into the rows (zone paths named, the
 * threads of the rows named once), and the step that polls, drains when due and looks
 * for new VMs. It attaches nothing: session_targets.c does. */
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

/* -- Draining ------------------------------------------------------------------ */

/* Slot of thash where (pid, tid) is, or the free slot where it would go. */
static size_t ses_thread_slot(const struct nupp_session *s, pid_t pid, pid_t tid)
{
	__u64 h = ((__u64)(__u32)pid * 0x9e3779b97f4a7c15ull ^ (__u32)tid) * 0xff51afd7ed558ccdull;
	size_t m = s->thash_cap - 1, i;

	for (i = (size_t)(h >> 32) & m; s->thash[i]; i = (i + 1) & m) {
		const struct nupp_thread_name *t = &s->threads[s->thash[i] - 1];

		if (t->pid == pid && t->tid == tid)
			break;
	}
	return i;
}

/* Whether thread tid of pid is named already: one hash lookup. */
static bool ses_thread_known(const struct nupp_session *s, pid_t pid, pid_t tid)
{
	return s->thash_cap && s->thash[ses_thread_slot(s, pid, tid)];
}

/* Grows thash to hold one more thread (rebuilt from threads[]); 0 or -ENOMEM. */
static int ses_thread_index_grow(struct nupp_session *s)
{
	size_t cap = s->thash_cap ? s->thash_cap : 64, i;
	size_t *h;

	if (2 * (s->nthreads + 1) <= s->thash_cap)
		return 0;
	while (2 * (s->nthreads + 1) > cap)
		cap *= 2;
	h = calloc(cap, sizeof(*h));
	if (!h)
		return -ENOMEM;
	free(s->thash);
	s->thash = h;
	s->thash_cap = cap;
	for (i = 0; i < s->nthreads; i++)
		s->thash[ses_thread_slot(s, s->threads[i].pid, s->threads[i].tid)] = i + 1;
	return 0;
}

/* Adds thread tid of pid named name (a copy) to the session's threads, unless it is
 * there already; 0 or -ENOMEM. */
int ses_thread_add(struct nupp_session *s, pid_t pid, pid_t tid, const char *name)
{
	struct nupp_thread_name *t;
	char *n;

	if (ses_thread_known(s, pid, tid))
		return 0;
	if (s->nthreads == s->threads_cap) {
		size_t cap = s->threads_cap ? s->threads_cap * 2 : 16;

		t = realloc(s->threads, cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		s->threads = t;
		s->threads_cap = cap;
	}
	if (ses_thread_index_grow(s))
		return -ENOMEM;
	n = strdup(name);
	if (!n)
		return -ENOMEM;
	s->thash[ses_thread_slot(s, pid, tid)] = s->nthreads + 1;
	s->threads[s->nthreads++] = (struct nupp_thread_name){ .pid = pid, .tid = tid, .name = n };
	return 0;
}

/* Names the thread of a row the first time it is seen (its comm, read once; "" when
 * it is already gone); a thread seen before costs one hash lookup. 0 or -ENOMEM. */
static int ses_thread_name(struct nupp_session *s, pid_t pid, pid_t tid)
{
	char path[64], name[64] = "";
	size_t n;
	FILE *f;

	if (!tid || ses_thread_known(s, pid, tid))
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	f = fopen(path, "re");
	if (f) {
		n = fread(name, 1, sizeof(name) - 1, f);
		fclose(f);
		name[n] = 0;
		name[strcspn(name, "\n")] = 0;
	}
	return ses_thread_add(s, pid, tid, name);
}

/* Frees the session's thread names. */
void ses_threads_free(struct nupp_session *s)
{
	size_t i;

	for (i = 0; i < s->nthreads; i++)
		free((char *)s->threads[i].name);
	free(s->threads);
	free(s->thash);
	s->threads = NULL;
	s->thash = NULL;
	s->nthreads = s->threads_cap = s->thash_cap = 0;
}

/* Moves the drained rows into the session's aggregate, with their zone ids named: each
 * row's strings and hash move, nothing is copied or hashed again. */
static int ses_merge(struct nupp_session *s, struct nupp_sample_set *raw)
{
	size_t i;
	int e = 0, j;

	for (i = 0; i < raw->n && !e; i++) {
		struct nupp_sample_row *r = &raw->rows[i];
		const char *zone = r->zone_path;
		char *end;
		unsigned long id;

		if (zone[0] == '#') {
			id = strtoul(zone + 1, &end, 10);
			if (!*end) {
				const char *p = nupp_zones_path(s->zones, r->pid, (__u32)id);

				if (p)
					zone = p;
			}
		}
		if (strncmp(r->stack, "[host];", 7) == 0) {
			struct ses_target *t = ses_target(s, r->pid, false);

			/* A process that has not run our LuaJIT (a wrapper, a command that is not
			 * LuaJIT) is not profiled, not even its host code. */
			if (!t || !t->counted) {
				raw->host_samples -= r->count < raw->host_samples ? r->count : raw->host_samples;
				continue;
			}
			if (s->o.lua_only)
				continue;
		}
		e = nupp_sample_set_take(&s->acc, raw, i, zone); /* r's strings move (or go) */
		if (!e)
			e = ses_thread_name(s, r->pid, r->tid);
	}
	if (!e)
		e = nupp_frame_table_merge(&s->acc.frames, &raw->frames);
	for (j = 0; j < NUPP_LOST__MAX; j++)
		s->acc.lost[j] += raw->lost[j];
	s->acc.host_samples += raw->host_samples;
	s->acc.cut_samples += raw->cut_samples;
	return e;
}

/* Reads every channel's counts now. */
int ses_drain(struct nupp_session *s)
{
	struct nupp_sample_set raw = { 0 };
	double start = ses_now();
	int e = 0, i;

	for (i = 0; i < s->nt; i++)
		if (s->t[i].vmlist)
			nupp_zones_refresh(s->zones, s->t[i].pid);
	if (s->smp) {
		/* The drain records its frames straight into the session's table: a frame
		 * known from an earlier drain is looked up there, not copied and merged. */
		raw.frames = s->acc.frames;
		memset(&s->acc.frames, 0, sizeof(s->acc.frames));
		e = nupp_sampler_drain(s->smp, &raw);
		s->acc.frames = raw.frames;
		memset(&raw.frames, 0, sizeof(raw.frames));
		if (!e)
			e = ses_merge(s, &raw);
		nupp_sample_set_free(&raw);
	}
	if (!e && s->tr)
		e = nupp_trace_drain(s->tr, &s->ab);
	/* Set once it is done: the follower's events, read during a drain, may reclaim only
	 * the processes whose rows a finished drain took. */
	if (!e)
		s->drained = start;
	return e;
}

/* Looks for new VMs of the targets (and their zone ids). */
static void ses_scan(struct nupp_session *s, double now)
{
	int i;

	for (i = 0; i < s->nt; i++)
		if (s->t[i].attached)
			ses_arm_zones(s, &s->t[i]);
	s->next_scan = now + SES_FAST_MS / 1000.0;
}

/* One foreground step: events, new VMs, the drain at its cadence. */
int ses_step(struct nupp_session *s, int timeout_ms)
{
	double now;
	bool fast = false;
	int e = 0, i;

	now = ses_now();
	for (i = 0; i < s->nt; i++)
		fast |= s->t[i].fast_until > now && !s->t[i].settled;
	/* Following processes without a sampler: their execs are read at least this often. */
	if ((fast || s->frb) && timeout_ms > SES_FAST_MS)
		timeout_ms = SES_FAST_MS;
	/* Not past the next drain. */
	if (timeout_ms > 0 && (s->next_drain - now) * 1000 < timeout_ms)
		timeout_ms = s->next_drain > now ? (int)((s->next_drain - now) * 1000) + 1 : 0;
	if (s->wake_fd >= 0 && timeout_ms > 0) {
		/* The caller's fd ends the wait too; the sampler's rings are read after. */
		struct pollfd p[2] = { { .fd = s->wake_fd, .events = POLLIN } };
		int n = 1;

		if (s->smp)
			p[n++] = (struct pollfd){ .fd = nupp_smp_epoll_fd(s->smp), .events = POLLIN };
		if (poll(p, n, timeout_ms) < 0 && errno != EINTR)
			return nupp_fail(-errno, "cannot wait for events: %s", strerror(errno));
		timeout_ms = 0;
	}
	if (s->smp)
		e = nupp_sampler_poll(s->smp, timeout_ms);
	else if (timeout_ms > 0)
		usleep((useconds_t)timeout_ms * 1000);
	if (e < 0 && e != -EINTR)
		return e;
	ses_follow_poll(s);
	now = ses_now();
	if (fast || now >= s->next_drain)
		ses_scan(s, now);
	if (now >= s->next_drain) {
		/* Names are read from the live target: keep them resolved as it runs. */
		e = ses_drain(s);
		s->next_drain = ses_now() + s->o.drain_ms / 1000.0;
	}
	return e;
}
