/* Internals of the top subcommand shared by its files: user/cli/cmd_top.c (options, the
 * session, the terminal and the loop) and top_view.c (the figures of each interval and
 * the table drawn from them). Nothing outside top's files includes it. */
#ifndef NUPP_CLI_TOP_H
#define NUPP_CLI_TOP_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include <linux/types.h>

#include "nupp/profile.h"
#include "report/report_internal.h"

/* One function's (or line's) figures: self and total samples, and the self samples'
 * split by VM state (enum nupp_rstate). */
struct top_fig {
	__u64 self, total;
	__u64 state[NUPP_RS__MAX];
};

/* The figures of one session, since it started and at the previous update: the interval
 * is their difference. Frame ids stay the same from one update to the next. */
struct top_view {
	struct nupp_rframes names; /* every frame seen, by id */
	struct top_fig *now, *prev; /* by id, cumulative */
	size_t cap;
	__u64 samples, prev_samples; /* samples reported as stacks */
	__u64 lost, prev_lost;       /* samples not reported, all reasons */
	__u64 aborts, prev_aborts;   /* trace aborts counted */
	__u64 blacklisted;
	double secs, prev_secs; /* session time of the two updates */
	int updates;
};

/* What the table's header says besides the figures. */
struct top_head {
	pid_t pid;
	const char *target; /* the command, or NULL for -p */
	int freq;
	bool lines;       /* frames are source lines */
	bool by_total;    /* sorted by total, not self */
	bool aborts;      /* the trace channel runs */
	bool interactive; /* a terminal: the key line is drawn */
	const char *note; /* one line under the header (NULL: none) */
};

/* Takes a new cumulative profile of the session, secs after it started. 0 or -ENOMEM. */
int top_view_update(struct top_view *v, const struct nupp_profile *p, double secs);
/* Writes the table: the header, at most rows rows (0: all), lines cut at width columns
 * (0: whole). 0 or -ENOMEM / -EIO. */
int top_view_write(const struct top_view *v, const struct top_head *h, int rows, int width, FILE *f);
void top_view_free(struct top_view *v);

#endif /* NUPP_CLI_TOP_H */
