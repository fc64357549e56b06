/* Why: the hottest code of a profile that ran interpreted, joined with the trace-abort
 * rows that explain it. The two channels meet only by source location, so the join is
 * by location:
 *  - a profile recorded with --lines names each Lua frame by its current line. Hot
 *    interpreted code is grouped into blocks: runs of sampled lines of one file reached
 *    from the same callers, each line no more compiled than interpreted, at most 3
 *    lines apart (a blacklisted loop runs wholly interpreted, so its body is one block;
 *    a compiled neighbour ends it); blocks of one file that overlap are merged (the
 *    same code from other callers, a closure defined on the loop's lines).
 *    An abort row joins a block when its line is within the block (or the line just
 *    before or after it: a loop's or function's header and end); when its line is a
 *    frame called from the block in some sample (the trace aborted in a callee); or
 *    when it is the nearest abort line above the block, at most 30 lines up, with no
 *    sampled line between them (where the block's function or loop may start: LuaJIT
 *    reports a function it will not compile at its first line);
 *  - a profile recorded without --lines names functions, not lines: an abort row joins
 *    a function when it is in the same file, and the text says the join is by file.
 * Limits: two interpreted functions within 3 lines of each other are one block; a
 * string chunk ("[string]") is never joined (its abort location quotes its text); an
 * abort recorded before the recording began (record -p) is not in the profile. */
#ifndef NUPP_WHY_H
#define NUPP_WHY_H

#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>

#include "nupp/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

struct nupp_why_opts {
	size_t sz;        /* sizeof(struct nupp_why_opts) */
	double min_share; /* interpreted samples, % of all samples, for code to be listed (default 1.0) */
	int top;          /* at most this many items (default 10) */
	bool lines;       /* the profile's frames are lines (recorded with --lines) */
};

/* How an abort row was joined to an item. */
enum nupp_why_join {
	NUPP_WHY_WITHIN, /* its line is within the block (or just before or after it) */
	NUPP_WHY_CALLEE, /* its line is a frame called from the block */
	NUPP_WHY_ABOVE,  /* the nearest abort line above the block, nothing sampled between */
	NUPP_WHY_FILE,   /* same file (a profile without lines) */
};

/* An abort row as joined. */
struct nupp_why_abort {
	const struct nupp_abort_row *row; /* in the profile given */
	enum nupp_why_join join;
};

/* One piece of hot code that ran interpreted: a block of lines, or a function. */
struct nupp_why_item {
	char *what;           /* "foo.lua:11-13", "foo.lua:12", or the function "foo.lua:bad" */
	char *file;           /* its file (module) */
	int first, last;      /* its lines (0 for a function) */
	__u64 samples;        /* samples whose innermost Lua frame is in it */
	__u64 compiled, interpreted, ccode, collecting, compiling; /* their VM states */
	__u64 inclusive;      /* samples with one of its frames anywhere on the stack */
	struct nupp_why_abort *aborts; /* blacklist rows first, then by count */
	size_t naborts;
};

/* The result. */
struct nupp_why {
	struct nupp_why_opts opts; /* as applied */
	__u64 samples;             /* all samples of the profile */
	bool aborts_counted;       /* the abort channel ran */
	__u64 total_aborts, blacklisted;
	struct nupp_why_item *items; /* most interpreted samples first */
	size_t n;
	const struct nupp_abort_row **unmatched; /* abort rows joined to no listed item */
	size_t nunmatched;
};

/* Builds the explanation of p (which must outlive the result). 0 and *out, -ENOMEM. */
int nupp_why_compute(const struct nupp_profile *p, const struct nupp_why_opts *opts, struct nupp_why **out);
/* Frees a result. */
void nupp_why_free(struct nupp_why *w);

/* Writes the explanation as text: one paragraph per item, then the abort rows that no
 * listed item explains; "nothing to explain" when no hot code ran interpreted. */
int nupp_why_write_text(const struct nupp_why *w, FILE *f);
/* Writes it as one JSON document. */
int nupp_why_write_json(const struct nupp_why *w, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* NUPP_WHY_H */
