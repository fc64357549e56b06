/* Severity of a trace abort (blacklist, warn, info): pure logic for BPF and host C. */
#ifndef NUPP_SEVERITY_H
#define NUPP_SEVERITY_H

#include "nupp_vmdef.h"
#include "nupp/trace_abi.h"

/* Values of enum nupp_severity (profile.h), which BPF code cannot include. */
#define NUPP_TRACE_SEV_BLACKLIST 0
#define NUPP_TRACE_SEV_WARN 1
#define NUPP_TRACE_SEV_INFO 2

/* 1 if a TraceError is ordinary trace formation, not a fault in the code: the JIT tries
 * elsewhere or again (the abort still takes the usual penalty, which RETRY alone does
 * not, and penalties repeated at one place blacklist it: that is a blacklist, below). */
static inline int nupp_severity_benign(__s32 err)
{
	switch (err) {
	case NUPP_TRERR_TRACEUV: /* trace too short (lj_record.c: a loop with no body) */
	case NUPP_TRERR_RETRY:   /* retry recording: no penalty (lj_trace.c trace_abort) */
	case NUPP_TRERR_LLEAVE:  /* leaving loop in root trace: forms elsewhere */
	case NUPP_TRERR_LINNER:  /* inner loop in root trace: the inner loop gets its own */
	case NUPP_TRERR_LUNROLL: /* loop unroll limit reached */
	case NUPP_TRERR_CUNROLL: /* call unroll limit reached (recursion) */
	case NUPP_TRERR_DOWNREC: /* down-recursion, restarting at once (lj_trace.c:632) */
		return 1;
	}
	return 0;
}

/* The severity of an abort from its error code and the action LuaJIT took: the action
 * wins (a blacklist is a blacklist whatever the reason, even LLEAVE x11). */
static inline __u8 nupp_severity_of(__s32 err, __u32 action)
{
	if (action == NUPP_LJ_ACT_BLACKLIST || action == NUPP_LJ_ACT_STITCHBL)
		return NUPP_TRACE_SEV_BLACKLIST;
	return nupp_severity_benign(err) ? NUPP_TRACE_SEV_INFO : NUPP_TRACE_SEV_WARN;
}

/* 1 if the message of err substitutes the info (jit.vmdef.traceerr has a %d/%s). */
static inline int nupp_severity_takes_info(__s32 err)
{
	return err >= 0 && err < 64 && ((NUPP_TRERR_INFO_MASK >> err) & 1);
}

#endif /* NUPP_SEVERITY_H */
