/* Internals shared by diff's computation (user/compare/diff.c) and its writers
 * (user/compare/diff_write.c). */
#ifndef NUPP_DIFF_INTERNAL_H
#define NUPP_DIFF_INTERNAL_H

#include "nupp/diff.h"

/* Share of a side's Lua samples (compiled + interpreted) that ran interpreted; -1 if none. */
double diff_interp_frac(const struct nupp_diff_counts *c);

#endif /* NUPP_DIFF_INTERNAL_H */
