/* The trace channel's BPF ABI: LuaJIT's USDT payloads as we read them, the abort map's
 * key, and the counters. Fixed-width types only; compiles as BPF (vmlinux.h) and host C. */
#ifndef NUPP_TRACE_ABI_H
#define NUPP_TRACE_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* -- USDT payloads (mirrors of lj_usdt.h in scripts/luajit-usdt.patch) ---------
 * Pinned field by field against LuaJIT's own header by tests/unit/test_lj_usdt.c. */

/* LJ_USDTLoc: a location resolved in-process like lj_debug_pushloc (lj_debug.c:376-399). */
struct nupp_lj_usdt_loc {
	__u64 pt;      /* GCproto * */
	__u64 name;    /* const char *: basename ('@'), name ('='), chunk text ('"'), builtin */
	__u32 namelen;
	__s32 line;    /* lj_debug_line(pt, pos) */
	__u32 pos;     /* bytecode position in pt */
	__u8 kind;     /* '@', '=', '"', 'p' (name > 40 chars: printed as %p of pt), 'b' */
	__u8 unused[3];
};

/* LJ_USDTAbort: the payload of luajit:trace_abort (argument 5). */
struct nupp_lj_usdt_abort {
	struct nupp_lj_usdt_loc start;   /* J->cur.startpt/startpc */
	struct nupp_lj_usdt_loc abort;   /* the Lua function being recorded, as the vmevent */
	struct nupp_lj_usdt_loc infoloc; /* info_kind 4: the Lua function in J->errinfo */
	__u64 info;                      /* errinfo number, ffid, or C function address */
	__u64 errstr;                    /* error object if a string (RECERR), else 0 */
	__u32 errstrlen;
	__s32 info_kind;                 /* enum nupp_lj_info_kind */
	__u32 parent;
	__u32 exitno;
	__u32 startop;
	__u32 unused;
};

/* LJ_USDTAbort.info_kind. */
enum nupp_lj_info_kind {
	NUPP_LJ_INFO_NONE = 0,
	NUPP_LJ_INFO_NUMBER = 1,
	NUPP_LJ_INFO_FFID = 2,
	NUPP_LJ_INFO_CFUNC = 3,
	NUPP_LJ_INFO_LUAFUNC = 4,
	/* Ours, not LuaJIT's: the key's aux holds the string error object (RECERR). */
	NUPP_LJ_INFO_ERRSTR = 5,
};

/* luajit:trace_abort argument 4 (LJ_USDT_ACT_* in lj_usdt.h). */
enum nupp_lj_action {
	NUPP_LJ_ACT_NONE = 0,      /* side trace, or started at a return: no penalty */
	NUPP_LJ_ACT_PENALTY = 1,   /* start bytecode penalized (lj_trace.c penalty_pc) */
	NUPP_LJ_ACT_BLACKLIST = 2, /* start bytecode blacklisted (blacklist_pc) */
	NUPP_LJ_ACT_STITCHBL = 3,  /* stitch link of the previous trace blacklisted */
	NUPP_LJ_ACT_RETRY = 4,     /* immediate retry, no penalty */
};

/* -- The abort map -------------------------------------------------------------- */

#define NUPP_TRACE_NAME_MAX 128    /* bytes of a location name / error string kept */
#define NUPP_TRACE_MAX_SITES 4096  /* default size of the abort map */
#define NUPP_TRACE_MAX_THREADS 4096 /* threads with a pending blacklist event */

/* A location as the key holds it: the name bytes copied while the proto was alive. */
struct nupp_trace_loc {
	__u64 pt;      /* kind 'p' only (it prints the pointer); else 0 so rows merge by text */
	__s32 line;
	__u16 namelen; /* bytes in name */
	__u8 kind;     /* as nupp_lj_usdt_loc.kind; 0: no location */
	__u8 truncated; /* the name was longer than NUPP_TRACE_NAME_MAX */
	char name[NUPP_TRACE_NAME_MAX];
};

/* One abort row in the kernel. Every byte is set (zeroed first): it is hashed whole. */
struct nupp_trace_key {
	__u32 tgid;
	__u32 zone;      /* zone-path id read from the process; 0 = none */
	__s32 err;       /* TraceError code (NUPP_TRERR_*) */
	__u8 severity;   /* NUPP_TRACE_SEV_* */
	__u8 info_kind;  /* enum nupp_lj_info_kind; NONE when the message takes no info */
	__u16 pad;
	__u64 info;      /* NUMBER: the value; FFID: the id; CFUNC: the address */
	struct nupp_trace_loc loc; /* where it aborted (the function being recorded) */
	struct nupp_trace_loc aux; /* LUAFUNC: the function's location; ERRSTR: the string */
};

/* Counters of the trace program (global data, read and reset by userspace). */
struct nupp_trace_counters {
	__u64 total_aborts;     /* abort events counted (benign ones only with include_benign) */
	__u64 blacklisted;      /* counted events whose action blacklisted (2 or 3) */
	__u64 blacklist_events; /* luajit:trace_blacklist events seen (not paused) */
	__u64 bl_unmatched;     /* trace_blacklist not followed by abort(action 2), or reverse */
	__u64 benign_skipped;   /* info events left out (include_benign off; only a LuaJIT built by an
				 * earlier patch sends them: ours fires trace_abort_benign for them) */
	__u64 unreported;       /* trace_abort with traceno 0: no "abort" vmevent, not counted */
	__u64 paused;           /* events while paused */
	__u64 map_full;         /* rows lost: the abort map was full (raise max_sites) */
	__u64 read_faults;      /* a payload or name could not be read (row counted, text lost) */
	__u64 truncated;        /* names longer than NUPP_TRACE_NAME_MAX (row text cut) */
	__u64 zone_faults;      /* the zone id could not be read (counted under zone 0) */
	__u64 not_followed;     /* events of processes the tgid filter leaves out (nupp_trace_follow) */
};

/* A pending luajit:trace_blacklist event of a thread, matched by the next trace_abort. */
struct nupp_trace_pending {
	__u64 pt;
	__u32 pos;
	__s32 err;
};

#endif /* NUPP_TRACE_ABI_H */
