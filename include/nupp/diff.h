/* Diff: compares BASE and NEW (each one profile or several runs merged) by normalised
 * shares of the samples, and flags only what changed by more than a threshold AND more
 * than sampling noise, on rows with enough samples. Pure computation over in-memory
 * profiles; `nupp-bpf diff` is the CLI on top. */
#ifndef NUPP_DIFF_H
#define NUPP_DIFF_H

#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>

#include "nupp/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a row of the diff is. */
enum nupp_diff_unit {
	NUPP_DIFF_FUNCTIONS, /* a frame name: module:name (module:line in a --lines profile) */
	NUPP_DIFF_STACKS,    /* a whole stack, outermost frame first */
	NUPP_DIFF_LINES,     /* a source line (module:line); needs profiles recorded with --lines */
};

struct nupp_diff_opts {
	size_t sz;                /* sizeof(struct nupp_diff_opts) */
	enum nupp_diff_unit unit; /* default functions */
	double threshold;         /* percentage points a share must move (default 1.0; < 0: 0) */
	double sigmas;            /* standard errors of the change it must exceed (default 3.0) */
	__u64 min_samples;        /* a row needs this many samples on one side to be flagged (default 20) */
	bool allow_aborts;        /* a new blacklist abort row is not a regression */
};

/* Flags of a row. A regression is GREW or MORE_INTERPRETED. */
#define NUPP_DIFF_GREW (1u << 0)             /* self share grew beyond threshold and noise */
#define NUPP_DIFF_SHRANK (1u << 1)           /* self share shrank beyond threshold and noise */
#define NUPP_DIFF_MORE_INTERPRETED (1u << 2) /* interpreted share grew beyond threshold and noise */
#define NUPP_DIFF_NOW_INTERPRETED (1u << 3)  /* ... and most of its Lua time ran compiled, now interpreted */
#define NUPP_DIFF_LESS_INTERPRETED (1u << 4) /* interpreted share shrank beyond threshold and noise */
#define NUPP_DIFF_NOW_COMPILED (1u << 5)     /* ... and most of its Lua time ran interpreted, now compiled */
#define NUPP_DIFF_NEW (1u << 6)              /* no sample in BASE */
#define NUPP_DIFF_GONE (1u << 7)             /* no sample in NEW */
#define NUPP_DIFF_FEW (1u << 8)              /* under min_samples on both sides: never flagged */
#define NUPP_DIFF_REGRESSION (1u << 9)

/* Samples of a row on one side, summed over the side's runs. self and its five states
 * count samples whose leaf is the row (the whole stack for NUPP_DIFF_STACKS); total
 * counts samples with the row anywhere on the stack (once per sample). */
struct nupp_diff_counts {
	__u64 self, total;
	__u64 compiled, interpreted, ccode, collecting, compiling;
};

/* A share on both sides, in percent of each side's samples, and its change. */
struct nupp_diff_share {
	double base, new_, change; /* change = new_ - base, percentage points */
	double se;                 /* standard error of the change, percentage points */
	double z;                  /* change / se (0 when there is no change; +-inf when se is 0) */
};

/* One row: a function, a stack or a line. */
struct nupp_diff_row {
	char *key;
	struct nupp_diff_counts base, new_;
	struct nupp_diff_share self, total, interp; /* interp: interpreted self samples */
	unsigned flags;
};

/* Flags of an abort row. */
#define NUPP_DIFF_ABORT_APPEARED (1u << 0)    /* in NEW, not in BASE */
#define NUPP_DIFF_ABORT_DISAPPEARED (1u << 1) /* in BASE, not in NEW */
#define NUPP_DIFF_ABORT_REGRESSION (1u << 2)  /* a blacklist row that appeared (no allow_aborts) */

/* One abort row (severity, reason, location, zone) with its count on each side. */
struct nupp_diff_abort {
	enum nupp_severity severity;
	char *reason, *location, *zone_path;
	__u64 base, new_;
	unsigned flags;
};

/* One side's profiles, as given. */
struct nupp_diff_input {
	const struct nupp_profile *const *profiles;
	const char *const *names; /* file names for messages; NULL: "BASE 1", "NEW 2", ... */
	int n;
};

/* The result: rows sorted by self-share change, largest growth first (ties by key). */
struct nupp_diff {
	struct nupp_diff_opts opts; /* as applied, defaults filled in */
	struct nupp_diff_row *rows;
	size_t n;
	struct nupp_diff_abort *aborts; /* appeared, disappeared and changed; blacklist first */
	size_t naborts;
	int base_runs, new_runs;
	__u64 base_samples, new_samples;
	double base_secs, new_secs;    /* summed durations */
	int base_hz, new_hz;           /* sampling frequency (0 when the runs of a side differ) */
	__u64 base_total_aborts, new_total_aborts, base_blacklisted, new_blacklisted; /* summed meta */
	char *base_label, *new_label;  /* the side's file names, ", " between them */
	bool aborts_compared;          /* both sides ran the abort channel */
	bool states_compared;          /* both sides have VM states (no collapsed-stacks input) */
	bool lines;                    /* the frames are source lines (recorded with --lines) */
	int regressions;               /* rows and abort rows flagged as regressions */
	char note[512];                /* what was left out of the comparison and why; "" if nothing */
};

/* Compares base and new_. 0 and *out (free with nupp_diff_free), or -EINVAL with
 * nupp_errmsg() saying what differs when the profiles cannot be compared (different
 * --lines, --full-filenames, depth, zone filter, root, backend or abort channel; no
 * samples on a side; the unit NUPP_DIFF_LINES on a profile recorded without --lines),
 * -ENOMEM. Collapsed stacks (no meta) are compared by shares only. */
int nupp_diff_compute(const struct nupp_diff_input *base, const struct nupp_diff_input *new_,
		      const struct nupp_diff_opts *opts, struct nupp_diff **out);

/* Frees a result. */
void nupp_diff_free(struct nupp_diff *d);

/* The words of a row's flags, e.g. "grew, now interpreted" (into buf; returns buf). */
const char *nupp_diff_flag_words(unsigned flags, char *buf, size_t size);

/* Writes the human-readable table: the verdict, every flagged row, then the top other
 * changes (at most top rows; 0: 20), the abort rows that appeared or disappeared. */
int nupp_diff_write_text(const struct nupp_diff *d, FILE *f, int top);

/* Writes the whole result as one JSON document (every row, every abort row). */
int nupp_diff_write_json(const struct nupp_diff *d, FILE *f);

/* Writes NEW's shares as Bencher Metric Format: one benchmark per row with at least
 * min_samples samples in NEW (measures self-share, total-share, interpreted-share, in
 * percent, lower/upper = value -/+ sigmas standard errors), and "nupp-bpf" with
 * samples, trace aborts and blacklistings per run. */
int nupp_diff_write_bmf(const struct nupp_diff *d, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* NUPP_DIFF_H */
