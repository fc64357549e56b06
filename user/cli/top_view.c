/* nupp-bpf top's figures and table: each update takes the session's cumulative profile,
 * keeps every function's (or line's) self and total samples by a frame id that stays the
 * same from one update to the next, and the table shows the last interval (this update
 * minus the previous one) beside the whole run, with the VM states of the interval's
 * self samples. Drawing on the terminal is user/cli/cmd_top.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "top.h"

/* Grows the figure arrays to hold id n - 1. 0 or -ENOMEM. */
static int top_grow(struct top_view *v, size_t n)
{
	struct top_fig *a, *b;
	size_t cap = v->cap ? v->cap : 256;

	if (n <= v->cap)
		return 0;
	while (cap < n)
		cap *= 2;
	a = realloc(v->now, cap * sizeof(*a));
	if (!a)
		return -ENOMEM;
	v->now = a;
	b = realloc(v->prev, cap * sizeof(*b));
	if (!b)
		return -ENOMEM;
	v->prev = b;
	memset(a + v->cap, 0, (cap - v->cap) * sizeof(*a));
	memset(b + v->cap, 0, (cap - v->cap) * sizeof(*b));
	v->cap = cap;
	return 0;
}

int top_view_update(struct top_view *v, const struct nupp_profile *p, double secs)
{
	struct nupp_rframes frames = { 0 };
	struct nupp_rfunc *fn = NULL;
	size_t n = 0, i;
	int k, err;

	err = nupp_rfuncs(&p->samples, &frames, &fn, &n);
	if (err)
		goto out;
	if (v->cap) {
		memcpy(v->prev, v->now, v->cap * sizeof(*v->now));
		memset(v->now, 0, v->cap * sizeof(*v->now));
	}
	for (i = 0; fn && i < n; i++) {
		const char *name = frames.names[fn[i].frame];
		long id = nupp_rframes_intern(&v->names, name, strlen(name));

		err = id < 0 ? (int)id : top_grow(v, (size_t)id + 1);
		if (err)
			goto out;
		v->now[id].self = fn[i].self;
		v->now[id].total = fn[i].total;
		for (k = 0; k < NUPP_RS__MAX; k++)
			v->now[id].state[k] = fn[i].self_state[k];
	}
	v->prev_samples = v->samples;
	v->prev_lost = v->lost;
	v->prev_aborts = v->aborts;
	v->prev_secs = v->secs;
	v->samples = p->samples.samples;
	v->lost = 0;
	for (k = 0; k < NUPP_LOST__MAX; k++)
		v->lost += p->samples.lost[k];
	v->aborts = p->aborts.total_aborts;
	v->blacklisted = p->aborts.blacklisted;
	v->secs = secs;
	v->updates++;
out:
	free(fn);
	nupp_rframes_free(&frames);
	return err;
}

void top_view_free(struct top_view *v)
{
	nupp_rframes_free(&v->names);
	free(v->now);
	free(v->prev);
	memset(v, 0, sizeof(*v));
}

/* The interval's figures of id: now minus prev (a counter never goes back, but a row the
 * session dropped is not subtracted below zero). */
static struct top_fig top_delta(const struct top_view *v, size_t id)
{
	struct top_fig d;
	int k;

	d.self = v->now[id].self > v->prev[id].self ? v->now[id].self - v->prev[id].self : 0;
	d.total = v->now[id].total > v->prev[id].total ? v->now[id].total - v->prev[id].total : 0;
	for (k = 0; k < NUPP_RS__MAX; k++)
		d.state[k] = v->now[id].state[k] > v->prev[id].state[k] ? v->now[id].state[k] - v->prev[id].state[k]
									   : 0;
	return d;
}

/* qsort_r's order of ids: by the interval's self (or total), then the other, then the
 * whole run's, then name. */
static int top_cmp(const void *a, const void *b, void *arg)
{
	const struct top_head *h = ((const void **)arg)[1];
	const struct top_view *v = ((const void **)arg)[0];
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	struct top_fig dx = top_delta(v, x), dy = top_delta(v, y);
	__u64 kx[4] = { dx.self, dx.total, v->now[x].self, v->now[x].total };
	__u64 ky[4] = { dy.self, dy.total, v->now[y].self, v->now[y].total };
	int i;

	if (h->by_total) {
		kx[0] = dx.total, kx[1] = dx.self, kx[2] = v->now[x].total, kx[3] = v->now[x].self;
		ky[0] = dy.total, ky[1] = dy.self, ky[2] = v->now[y].total, ky[3] = v->now[y].self;
	}
	for (i = 0; i < 4; i++)
		if (kx[i] != ky[i])
			return kx[i] > ky[i] ? -1 : 1;
	return strcmp(v->names.names[x], v->names.names[y]);
}

/* part of all in percent, "-" for an empty whole. */
static const char *top_pct(char *buf, size_t size, __u64 part, __u64 all)
{
	if (!all)
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%.1f%%", 100.0 * (double)part / (double)all);
	return buf;
}

/* Writes s cut to width columns (0: whole), one byte a column (names are shown with
 * their non-ASCII bytes escaped). */
static void top_line(FILE *f, const char *s, int width)
{
	size_t len = strlen(s);

	if (width > 0 && len > (size_t)width)
		len = (size_t)width;
	fwrite(s, 1, len, f);
	fputc('\n', f);
}

int top_view_write(const struct top_view *v, const struct top_head *h, int rows, int width, FILE *f)
{
	const char *what = h->lines ? "source lines" : "functions";
	double span = v->secs - v->prev_secs;
	__u64 isamples = v->samples - v->prev_samples, all = v->samples;
	const void *arg[2] = { v, h };
	size_t *ids = NULL, n = 0, i;
	char line[1024], p[6][16], last[32];
	int k;

	ids = malloc((v->names.n ? v->names.n : 1) * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	for (i = 0; i < v->names.n; i++)
		if (v->now[i].total)
			ids[n++] = i;
	qsort_r(ids, n, sizeof(*ids), top_cmp, arg);
	snprintf(last, sizeof(last), "last %.1f s", span);
	snprintf(line, sizeof(line), "nupp-bpf top: PID %d%s%s%s at %d Hz, %.1f s; %s by %s", (int)h->pid,
		 h->target ? " (" : "", h->target ? h->target : "", h->target ? ")" : "", h->freq, v->secs, what,
		 h->by_total ? "total" : "self");
	top_line(f, line, width);
	k = snprintf(line, sizeof(line), "samples: %llu in the %s, %llu in all; lost %llu (%s)",
		     (unsigned long long)isamples, last, (unsigned long long)all, (unsigned long long)v->lost,
		     top_pct(p[0], sizeof(p[0]), v->lost, v->lost + all));
	if (h->aborts && k > 0 && (size_t)k < sizeof(line))
		snprintf(line + k, sizeof(line) - (size_t)k, "; trace aborts: %llu in the %s, %llu in all (%llu blacklisted)",
			 (unsigned long long)(v->aborts - v->prev_aborts), last, (unsigned long long)v->aborts,
			 (unsigned long long)v->blacklisted);
	top_line(f, line, width);
	if (h->note)
		top_line(f, h->note, width);
	snprintf(line, sizeof(line), "%-15s  %-15s  VM states of the self samples of the %s", last, "in all", last);
	top_line(f, line, width);
	snprintf(line, sizeof(line), "%7s %7s  %7s %7s  %8s %7s %7s %7s %7s  %s", "self", "total", "self", "total",
		 "compiled", "interp", "C code", "GC", "JIT", h->lines ? "line" : "function");
	top_line(f, line, width);
	for (i = 0; i < n && (rows <= 0 || i < (size_t)rows); i++) {
		struct top_fig d = top_delta(v, ids[i]);
		const struct top_fig *t = &v->now[ids[i]];
		char *name = nupp_rtext_display_dup(v->names.names[ids[i]]);
		char st[NUPP_RS__MAX][16];
		__u64 known = 0;

		for (k = 0; k < NUPP_RS__MAX; k++)
			known += d.state[k];
		for (k = 0; k < NUPP_RS__MAX; k++)
			top_pct(st[k], sizeof(st[k]), d.state[k], known);
		snprintf(line, sizeof(line), "%7s %7s  %7s %7s  %8s %7s %7s %7s %7s  %s",
			 top_pct(p[0], sizeof(p[0]), d.self, isamples), top_pct(p[1], sizeof(p[1]), d.total, isamples),
			 top_pct(p[2], sizeof(p[2]), t->self, all), top_pct(p[3], sizeof(p[3]), t->total, all), st[0],
			 st[1], st[2], st[3], st[4], name ? name : "?");
		free(name);
		top_line(f, line, width);
	}
	if (!n)
		top_line(f, "(no samples yet)", width);
	if (h->interactive)
		top_line(f, "keys: s sort by self  t sort by total  l functions/lines  q quit", width);
	free(ids);
	return ferror(f) ? -EIO : 0;
}
