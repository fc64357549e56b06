/* The top-functions table: the hottest functions (or source lines) with their self
 * and total share, sample counts and how their own samples split by VM state. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/profile.h"
#include "core/nupp_internal.h"
#include "report_internal.h"

/* A share in percent of total, "-" for an empty total. */
static void top_pct(char *buf, size_t size, __u64 part, __u64 total)
{
	if (!total)
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%.1f%%", 100.0 * (double)part / (double)total);
}

/* Writes the table. */
int nupp_write_top(const struct nupp_profile *p, const struct nupp_report_opts *o, FILE *f)
{
	struct nupp_rframes frames = { 0 };
	struct nupp_rfunc *fn = NULL;
	const char *what = p->meta.lines ? "source lines" : "functions";
	size_t n = 0, i, rows;
	int top = o && o->top > 0 ? o->top : 20, k, err;
	__u64 total = p->samples.samples;
	char a[16], b[16], st[NUPP_RS__MAX][16];

	if (o && o->lines && !p->meta.lines)
		return nupp_fail(-EINVAL, "the profile names functions, not source lines: record it with --lines "
					  "for a table per line");
	err = nupp_rfuncs(&p->samples, &frames, &fn, &n);
	if (err)
		return nupp_fail(err, "out of memory");
	rows = n < (size_t)top ? n : (size_t)top;
	fprintf(f, "Top %zu %s of %llu samples", rows, what, (unsigned long long)total);
	if (p->meta.frequency_hz)
		fprintf(f, " (%d Hz, %.1f s)", p->meta.frequency_hz, p->meta.duration_sec);
	fprintf(f, "; VM states of the self samples\n");
	fprintf(f, "%7s %7s %9s %9s %8s %8s %8s %8s %8s  %s\n", "self", "total", "self", "total", "compiled",
		"interp", "C code", "GC", "JIT", p->meta.lines ? "line" : "function");
	for (i = 0; i < rows; i++) {
		const struct nupp_rfunc *r = &fn[i];
		char *name = nupp_rtext_display_dup(frames.names[r->frame]);

		top_pct(a, sizeof(a), r->self, total);
		top_pct(b, sizeof(b), r->total, total);
		for (k = 0; k < NUPP_RS__MAX; k++) {
			__u64 known = 0;
			int j;

			for (j = 0; j < NUPP_RS__MAX; j++)
				known += r->self_state[j];
			top_pct(st[k], sizeof(st[k]), r->self_state[k], known);
		}
		fprintf(f, "%7s %7s %9llu %9llu %8s %8s %8s %8s %8s  %s\n", a, b, (unsigned long long)r->self,
			(unsigned long long)r->total, st[0], st[1], st[2], st[3], st[4], name ? name : "?");
		free(name);
	}
	if (!n)
		fprintf(f, "(no samples)\n");
	free(fn);
	nupp_rframes_free(&frames);
	return ferror(f) ? -EIO : 0;
}
