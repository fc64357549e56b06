/* The in-app helper's socket: whole reads and writes, and the rows, aborts, threads and
 * frames sent by the helper and read by the profiled program. Nothing else crosses it. */
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

/* -- Background sessions: the helper process ------------------------------------ */

/* Writes all of buf; 0 or -errno. */
int ses_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EPIPE;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads all of buf; 0 or -errno (-EPIPE at end of file). */
int ses_read_all(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EPIPE;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* A growable byte buffer for one message. */
struct ses_buf {
	char *p;
	size_t n, cap;
	int err;
};

static void ses_put(struct ses_buf *b, const void *data, size_t n)
{
	if (b->err)
		return;
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *np;

		while (cap < b->n + n)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np) {
			b->err = -ENOMEM;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
}

static void ses_put_u64(struct ses_buf *b, __u64 v)
{
	ses_put(b, &v, sizeof(v));
}

static void ses_put_str(struct ses_buf *b, const char *str)
{
	__u64 len = strlen(str);

	ses_put_u64(b, len);
	ses_put(b, str, len);
}

/* Serializes the rows and totals (the helper's answer). */
int ses_send_sets(struct nupp_session *s, int fd)
{
	struct ses_buf b = { 0 };
	size_t i;
	int j, e;

	ses_put_u64(&b, s->acc.samples);
	for (j = 0; j < NUPP_LOST__MAX; j++)
		ses_put_u64(&b, s->acc.lost[j] + s->lost_before[j]);
	ses_put_u64(&b, s->acc.host_samples);
	ses_put_u64(&b, s->acc.cut_samples);
	ses_put_u64(&b, s->acc.n);
	for (i = 0; i < s->acc.n; i++) {
		const struct nupp_sample_row *r = &s->acc.rows[i];

		ses_put_u64(&b, (__u64)r->pid);
		ses_put_u64(&b, (__u64)r->tid);
		ses_put_u64(&b, r->count);
		ses_put_u64(&b, r->compiled);
		ses_put_u64(&b, r->interpreted);
		ses_put_u64(&b, r->ccode);
		ses_put_u64(&b, r->collecting);
		ses_put_u64(&b, r->compiling);
		ses_put_str(&b, r->zone_path);
		ses_put_str(&b, r->stack);
	}
	ses_put_u64(&b, s->ab.total_aborts);
	ses_put_u64(&b, s->ab.blacklisted);
	ses_put_u64(&b, s->ab.n);
	for (i = 0; i < s->ab.n; i++) {
		const struct nupp_abort_row *r = &s->ab.rows[i];

		ses_put_u64(&b, (__u64)r->severity);
		ses_put_u64(&b, r->count);
		ses_put_str(&b, r->reason);
		ses_put_str(&b, r->location);
		ses_put_str(&b, r->zone_path);
	}
	ses_put_u64(&b, nupp_zones_seen(s->zones, s->nt ? s->t[0].pid : 0));
	ses_put_u64(&b, s->nthreads);
	for (i = 0; i < s->nthreads; i++) {
		ses_put_u64(&b, (__u64)s->threads[i].pid);
		ses_put_u64(&b, (__u64)s->threads[i].tid);
		ses_put_str(&b, s->threads[i].name);
	}
	ses_put_u64(&b, s->acc.frames.n);
	for (i = 0; i < s->acc.frames.n; i++) {
		const struct nupp_frame_info *fi = &s->acc.frames.v[i];

		ses_put_str(&b, fi->name);
		ses_put_str(&b, fi->file);
		ses_put_u64(&b, (__u64)(__s64)fi->first_line);
		ses_put_u64(&b, (__u64)(__s64)fi->last_line);
	}
	if (b.err) {
		free(b.p);
		return b.err;
	}
	{
		__u64 len = b.n;

		e = ses_write_all(fd, &len, sizeof(len));
		if (!e)
			e = ses_write_all(fd, b.p, b.n);
	}
	free(b.p);
	return e;
}

/* Reads a u64 / a string of a message at *off. */
static int ses_get_u64(const char *m, size_t n, size_t *off, __u64 *v)
{
	if (*off + sizeof(*v) > n)
		return -EPROTO;
	memcpy(v, m + *off, sizeof(*v));
	*off += sizeof(*v);
	return 0;
}

static int ses_get_str(const char *m, size_t n, size_t *off, char **out)
{
	__u64 len;

	if (ses_get_u64(m, n, off, &len) || len > n - *off)
		return -EPROTO;
	*out = strndup(m + *off, len);
	*off += len;
	return *out ? 0 : -ENOMEM;
}

/* Reads the helper's answer into the session's sets (replacing them). */
int ses_recv_sets(struct nupp_session *s, bool *zones_seen)
{
	__u64 len, v, nrows;
	size_t off = 0, i;
	char *m;
	int e, j;

	e = ses_read_all(s->sock, &len, sizeof(len));
	if (e || len > (1ull << 34))
		return nupp_fail(-EPIPE, "the session's helper process is gone (it exited or was killed)");
	m = malloc(len ? len : 1);
	if (!m)
		return -ENOMEM;
	e = ses_read_all(s->sock, m, len);
	if (e) {
		free(m);
		return nupp_fail(-EPIPE, "the session's helper process is gone (it exited or was killed)");
	}
	nupp_sample_set_free(&s->acc);
	nupp_abort_set_free(&s->ab);
	e = ses_get_u64(m, len, &off, &s->acc.samples);
	for (j = 0; !e && j < NUPP_LOST__MAX; j++)
		e = ses_get_u64(m, len, &off, &s->acc.lost[j]);
	if (!e)
		e = ses_get_u64(m, len, &off, &s->acc.host_samples);
	if (!e)
		e = ses_get_u64(m, len, &off, &s->acc.cut_samples);
	if (!e)
		e = ses_get_u64(m, len, &off, &nrows);
	for (i = 0; !e && i < nrows; i++) {
		struct nupp_sample_row r = { 0 };
		__u64 c[8];
		char *zone = NULL, *stack = NULL;

		for (j = 0; !e && j < 8; j++)
			e = ses_get_u64(m, len, &off, &c[j]);
		if (!e)
			e = ses_get_str(m, len, &off, &zone);
		if (!e)
			e = ses_get_str(m, len, &off, &stack);
		if (!e) {
			__u64 samples = s->acc.samples;

			r.pid = (pid_t)c[0];
			r.tid = (pid_t)c[1];
			r.count = c[2];
			r.compiled = c[3];
			r.interpreted = c[4];
			r.ccode = c[5];
			r.collecting = c[6];
			r.compiling = c[7];
			e = nupp_sample_set_add(&s->acc, zone, stack, &r);
			s->acc.samples = samples; /* the total came first */
		}
		free(zone);
		free(stack);
	}
	if (!e)
		e = ses_get_u64(m, len, &off, &s->ab.total_aborts);
	if (!e)
		e = ses_get_u64(m, len, &off, &s->ab.blacklisted);
	if (!e)
		e = ses_get_u64(m, len, &off, &nrows);
	for (i = 0; !e && i < nrows; i++) {
		char *reason = NULL, *loc = NULL, *zone = NULL;
		__u64 sev, count;

		e = ses_get_u64(m, len, &off, &sev);
		if (!e)
			e = ses_get_u64(m, len, &off, &count);
		if (!e)
			e = ses_get_str(m, len, &off, &reason);
		if (!e)
			e = ses_get_str(m, len, &off, &loc);
		if (!e)
			e = ses_get_str(m, len, &off, &zone);
		if (!e)
			e = nupp_abort_set_add(&s->ab, (enum nupp_severity)sev, reason, loc, zone, count);
		free(reason);
		free(loc);
		free(zone);
	}
	if (!e && ses_get_u64(m, len, &off, &v) == 0)
		*zones_seen = v != 0;
	if (!e)
		ses_threads_free(s);
	if (!e)
		e = ses_get_u64(m, len, &off, &nrows);
	for (i = 0; !e && i < nrows; i++) {
		__u64 pid, tid;
		char *name = NULL;

		e = ses_get_u64(m, len, &off, &pid);
		if (!e)
			e = ses_get_u64(m, len, &off, &tid);
		if (!e)
			e = ses_get_str(m, len, &off, &name);
		if (!e)
			e = ses_thread_add(s, (pid_t)pid, (pid_t)tid, name);
		free(name);
	}
	if (!e)
		e = ses_get_u64(m, len, &off, &nrows);
	for (i = 0; !e && i < nrows; i++) {
		__u64 first, last;
		char *name = NULL, *file = NULL;

		e = ses_get_str(m, len, &off, &name);
		if (!e)
			e = ses_get_str(m, len, &off, &file);
		if (!e)
			e = ses_get_u64(m, len, &off, &first);
		if (!e)
			e = ses_get_u64(m, len, &off, &last);
		if (!e)
			e = nupp_frame_table_add(&s->acc.frames, name, file, (int)(__s64)first, (int)(__s64)last);
		free(name);
		free(file);
	}
	free(m);
	return e ? nupp_fail(e, "cannot read the session helper's answer: %s", strerror(-e)) : 0;
}
