/* The real sampler on hot compiled loops whose header and body are on different lines: a
 * sample in the trace's machine code names the line of the bytecode its snapshot's code
 * executes. hotloop.lua: >= 99 % of the compiled samples in hot() name a body line (each
 * getting its share), the loop's compare-and-branch is on the `for` line (< 1 %), and the
 * function inlined into the trace appears as its own frame at its own line. hotif.lua:
 * a comparison is named on its own line, never on the branch it does not take. */
#include <check.h>

#include "nupp_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_test.h"

#define NLINES 64

/* Line of frame "<chunk>:N" at p (up to ';' or the end), or -1. */
static int frame_line(const char *p, const char *chunk)
{
	size_t n = strlen(chunk);
	char *end;
	long v;

	if (strncmp(p, chunk, n) != 0 || p[n] != ':')
		return -1;
	v = strtol(p + n + 1, &end, 10);
	if (end == p + n + 1 || (*end && *end != ';') || v <= 0 || v >= NLINES)
		return -1;
	return (int)v;
}

/* Compiled samples in hot() of tests/data/sampler/<chunk>, run for 4 CPU seconds under
 * the real sampler, by hot's line: on[] with nothing below hot, inlined[] by the line of
 * the one frame inlined below hot's line `call` (0: none expected); odd: any other
 * stack below hot. */
struct hot_lines {
	__u64 on[NLINES], inlined[NLINES], in_hot, odd;
};

static void profile_hot(const char *chunk, int call, struct hot_lines *h)
{
	struct nupp_sampler_opts o = { .sz = sizeof(o), .freq_hz = 4999, .lines = true };
	struct nupp_sample_set set = { 0 };
	char script[512];
	char *argv[] = { NUPP_LUAJIT, script, "4", NULL };
	__u64 ns = 0, cnt = 0;
	size_t i;
	int l;

	memset(h, 0, sizeof(*h));
	snprintf(script, sizeof(script), "%s/sampler/%s", NUPP_TEST_DATA, chunk);
	ck_assert_int_eq(smp_profile(argv, &o, &set, &ns, &cnt), 0);
	smp_print(&set, 24);
	if (cnt)
		printf("bpf: run_cnt %llu, %llu ns per sample\n", (unsigned long long)cnt,
		       (unsigned long long)(ns / cnt));
	for (i = 0; i < set.n; i++) {
		const struct nupp_sample_row *r = &set.rows[i];
		const char *p = strstr(r->stack, chunk), *hot, *below;
		int hl, il;

		/* pmain;<chunk>:<main line>;<chunk>:<hot's line>[;<inlined>] */
		if (!p || !(hot = strchr(p, ';')) || strncmp(hot + 1, chunk, strlen(chunk)) != 0 || !r->compiled)
			continue;
		hot++;
		h->in_hot += r->compiled;
		hl = frame_line(hot, chunk);
		below = strchr(hot, ';');
		if (hl < 0) {
			h->odd += r->compiled;
			continue;
		}
		if (!below) {
			h->on[hl] += r->compiled;
			continue;
		}
		il = frame_line(below + 1, chunk);
		if (call && hl == call && il > 0 && !strchr(below + 1, ';'))
			h->inlined[il] += r->compiled;
		else
			h->odd += r->compiled;
	}
	printf("%s: compiled samples in hot(): %llu\n", chunk, (unsigned long long)h->in_hot);
	for (l = 0; l < NLINES; l++) {
		if (h->on[l])
			printf("  hot line %2d: %6llu (%.2f %%)\n", l, (unsigned long long)h->on[l],
			       100.0 * h->on[l] / h->in_hot);
		if (h->inlined[l])
			printf("  hot line %d, inlined line %d: %6llu (%.2f %%)\n", call, l,
			       (unsigned long long)h->inlined[l], 100.0 * h->inlined[l] / h->in_hot);
	}
	printf("  other stacks: %llu\n", (unsigned long long)h->odd);
	nupp_sample_set_free(&set);
	ck_assert_msg(h->in_hot >= 5000, "only %llu compiled samples in hot()", (unsigned long long)h->in_hot);
}

/* Lines of hotloop.lua. */
#define L_INNER 22     /* if a < 0 then ...; local r = sqrt(sqrt(a + s)); ... (inlined) */
#define L_HOT_FIRST 26 /* local function hot(n, t): hot's position when unknown */
#define L_FOR 28       /* for i = 1, n do */
#define L_B1 29        /* local a = sqrt(sqrt(t[i % 64 + 1] + s)) * 0.5 */
#define L_B2 30        /* if a > 1e300 ...; local b = sqrt(sqrt(a + 1.25)) * 0.5 */
#define L_B3 31        /* if b > 1e300 ...; s = inner(b, s) */
#define L_B4 32        /* if s > 1e300 ...; s = sqrt(sqrt(s + 0.125)) * 0.5 */
#define L_RET 34       /* return s */

START_TEST(sampler_trace_leaf_is_the_executing_body_line)
{
	struct hot_lines h;
	__u64 body, outside;

	profile_hot("hotloop.lua", L_B3, &h);
	body = h.on[L_B1] + h.on[L_B2] + h.on[L_B3] + h.on[L_B4] + h.inlined[L_INNER];
	outside = h.on[L_FOR] + h.on[L_RET] + h.on[L_HOT_FIRST];
	printf("  body %llu (%.2f %%), for line + return + unknown %llu\n", (unsigned long long)body,
	       100.0 * body / h.in_hot, (unsigned long long)outside);
	/* The body dominates and is reported on its own lines, not on the `for` line. */
	ck_assert_msg(body * 100 >= h.in_hot * 99, "%llu of %llu compiled samples on the body lines",
		      (unsigned long long)body, (unsigned long long)h.in_hot);
	/* Each of the 4 equal blocks of work gets its share (about a quarter). */
	ck_assert_msg(h.on[L_B1] * 10 >= h.in_hot, "line %d: %llu", L_B1, (unsigned long long)h.on[L_B1]);
	ck_assert_msg(h.on[L_B2] * 10 >= h.in_hot, "line %d: %llu", L_B2, (unsigned long long)h.on[L_B2]);
	ck_assert_msg(h.on[L_B4] * 10 >= h.in_hot, "line %d: %llu", L_B4, (unsigned long long)h.on[L_B4]);
	/* inner() is inlined: its work is in its own frame at its own line, below the call. */
	ck_assert_msg(h.inlined[L_INNER] * 10 >= h.in_hot, "inlined inner() line %d: %llu", L_INNER,
		      (unsigned long long)h.inlined[L_INNER]);
	/* Outside the body: the loop's compare-and-branch on the `for` line, the return of
	 * hot() (once per call, after the loop) and a position not known (hot's first line:
	 * IP in an exit stub) -- together < 1 %. */
	ck_assert_msg(outside * 100 < h.in_hot, "for %llu, return %llu, unknown %llu of %llu",
		      (unsigned long long)h.on[L_FOR], (unsigned long long)h.on[L_RET],
		      (unsigned long long)h.on[L_HOT_FIRST], (unsigned long long)h.in_hot);
	/* No sample on any other line or stack: every compiled sample in hot() is counted. */
	ck_assert_uint_eq(body + outside, h.in_hot);
	ck_assert_uint_eq(h.odd, 0);
}
END_TEST

/* Lines of hotif.lua. */
#define I_HOT_FIRST 14 /* local function hot(n, t) */
#define I_FOR 16       /* for i = 1, n do */
#define I_A 17         /* local a = sqrt(sqrt(t[i % 64 + 1] + s)) * 0.5 */
#define I_IF1 18       /* if a > 1e300 then (never true) */
#define I_THEN1 19     /*   a = 0 (never runs) */
#define I_IF2 21       /* if a < 1e300 then (always true) */
#define I_THEN2 22     /*   s = sqrt(sqrt(t[i % 32 + 1] + a)) * 0.5 */
#define I_RET 25       /* return s */

START_TEST(sampler_trace_comparison_is_on_its_own_line)
{
	struct hot_lines h;
	__u64 body, outside;

	profile_hot("hotif.lua", 0, &h);
	body = h.on[I_A] + h.on[I_IF1] + h.on[I_IF2] + h.on[I_THEN2];
	outside = h.on[I_FOR] + h.on[I_RET] + h.on[I_HOT_FIRST];
	printf("  body %llu (%.2f %%), for line + return + unknown %llu\n", (unsigned long long)body,
	       100.0 * body / h.in_hot, (unsigned long long)outside);
	/* A line that never runs is never named: the never-true comparison's snapshot
	 * resumes there, but its code runs the comparison (line 18). */
	ck_assert_uint_eq(h.on[I_THEN1], 0);
	/* The always-true comparison resumes at the FORL: it is not the loop header's. */
	ck_assert_msg(body * 100 >= h.in_hot * 99, "%llu of %llu compiled samples on the body lines",
		      (unsigned long long)body, (unsigned long long)h.in_hot);
	ck_assert_msg(outside * 100 < h.in_hot, "for %llu, return %llu, unknown %llu of %llu",
		      (unsigned long long)h.on[I_FOR], (unsigned long long)h.on[I_RET],
		      (unsigned long long)h.on[I_HOT_FIRST], (unsigned long long)h.in_hot);
	/* The two blocks of work, on their lines (about half each). */
	ck_assert_msg(h.on[I_A] * 5 >= h.in_hot, "line %d: %llu", I_A, (unsigned long long)h.on[I_A]);
	ck_assert_msg(h.on[I_THEN2] * 5 >= h.in_hot, "line %d: %llu", I_THEN2, (unsigned long long)h.on[I_THEN2]);
	ck_assert_uint_eq(body + outside, h.in_hot);
	ck_assert_uint_eq(h.odd, 0);
}
END_TEST

NUPP_CHECK_MAIN("sampler_hotloop", 240, true, true, sampler_trace_leaf_is_the_executing_body_line,
		sampler_trace_comparison_is_on_its_own_line)
