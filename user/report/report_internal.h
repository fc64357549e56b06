/* Internals shared by the report writers (user/report_*.c) and the profile reader:
 * growing buffers, name text, the frame table and the merged call tree. */
#ifndef NUPP_REPORT_INTERNAL_H
#define NUPP_REPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#include "nupp/profile.h"

/* -- Growing buffers (user/report/report_text.c) ------------------------------------------ */

struct nupp_buf {
	char *p;
	size_t len, cap;
	int err; /* -ENOMEM once an append failed; later appends do nothing */
};

/* Appends n bytes / one byte; 0 or -ENOMEM (also kept in b->err). */
int nupp_buf_add(struct nupp_buf *b, const char *s, size_t n);
int nupp_buf_addc(struct nupp_buf *b, char c);

/* -- Name text (user/report/report_text.c) ------------------------------------------------ */

/* True if s is well-formed UTF-8 with no character that the lossless JSON form uses
 * for raw bytes, i.e. it is written to JSON as it is. */
bool nupp_rtext_plain(const char *s);
/* Appends s[0..len) as well-formed UTF-8 for display formats (SVG, speedscope, pprof,
 * tables): bytes that are not well-formed UTF-8 and control characters become "\xHH".
 * s must be NUL-terminated at or after len. */
int nupp_rtext_display(struct nupp_buf *b, const char *s, size_t len);
/* The same as a new string, or NULL on ENOMEM. */
char *nupp_rtext_display_dup(const char *s);
/* Splits a frame name ("module:name", "module:12", "pcall", "[host]") into its module
 * and what follows: true and the module's length if it has one. */
bool nupp_rtext_frame_split(const char *frame, size_t len, size_t *module_len);
/* The line number a frame name ends in ("m.lua:123"), or 0. */
int nupp_rtext_frame_line(const char *frame, size_t len);

/* -- VM states ------------------------------------------------------------------- */

/* The five states of a sample row, in the order of enum nupp_rstate. */
enum nupp_rstate { NUPP_RS_COMPILED, NUPP_RS_INTERP, NUPP_RS_C, NUPP_RS_GC, NUPP_RS_JIT, NUPP_RS__MAX };

/* A row's count in state i. */
__u64 nupp_rstate_of(const struct nupp_sample_row *r, int i);
/* The JSON field name of state i ("compiled", "interpreted", "cCode", ...). */
const char *nupp_rstate_key(int i);
/* The legend name of state i ("compiled", "interpreted", "C code", "GC", "JIT compiler"). */
const char *nupp_rstate_label(int i);

/* -- Frames and the call tree (user/report/report_tree.c) -------------------------------- */

/* Distinct frame names, each with an id (0..n-1) in first-seen order. */
struct nupp_rframes {
	char **names; /* NUL-terminated copies */
	size_t n, cap;
	__u32 *hash; /* open addressing: id + 1, 0 = empty */
	size_t hcap;
};

/* The id of frame s[0..len), added if new; -ENOMEM. */
long nupp_rframes_intern(struct nupp_rframes *t, const char *s, size_t len);
void nupp_rframes_free(struct nupp_rframes *t);

/* One node of the call tree: a frame under a parent, with what was sampled in it and
 * below it. Children are a list sorted by frame name once built. */
struct nupp_rnode {
	long frame;           /* id in the tree's frames; -1 for the root */
	long parent, child, next;
	__u64 total, self;    /* samples in this node and below / with this node the leaf */
	__u64 state[NUPP_RS__MAX]; /* the total's split by VM state */
};

struct nupp_rtree {
	struct nupp_rframes frames;
	struct nupp_rnode *nodes; /* nodes[0] is the root */
	size_t n, cap;
	long *hash; /* (parent, frame) -> node + 1 */
	size_t hcap;
	__u64 total;
};

/* Builds the tree of every row's stack (rows of all zones merged). 0 or -ENOMEM. */
int nupp_rtree_build(struct nupp_rtree *t, const struct nupp_sample_set *s);
void nupp_rtree_free(struct nupp_rtree *t);

/* Per-function figures for the tables: self and total (each stack counted once for a
 * function however often it recurs), and the self samples' split by VM state. */
struct nupp_rfunc {
	long frame;
	__u64 self, total;
	__u64 self_state[NUPP_RS__MAX];
};

/* The figures of every frame of t->frames (rows of s interned into frames), sorted by
 * self, then total, descending, then name. *out is malloc'ed, n = frames->n. */
int nupp_rfuncs(const struct nupp_sample_set *s, struct nupp_rframes *frames, struct nupp_rfunc **out,
		size_t *n);

/* -- Reading (user/report/profile_read.c) --------------------------------------------------- */

/* Reads buf[0..len) as collapsed stacks whatever its first byte (the fuzz target's way
 * into that reader); as nupp_profile_read_mem otherwise. */
int nupp_rread_collapsed(const void *buf, size_t len, const char *name, struct nupp_profile *p);

#endif /* NUPP_REPORT_INTERNAL_H */
