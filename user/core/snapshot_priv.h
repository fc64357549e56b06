/* What the parts of the trace cache share, and nothing outside them includes
 * (user/core/snapshot*.c): the cache of one process's traces, its entries, their decoded
 * snapshots and frames, a decode in progress and the facts it reads. The API is in
 * sampler_internal.h (Traces). Needs no LuaJIT header: only snapshot.c and
 * snapshot_decode.c include lj_*.h. */
#ifndef NUPP_SNAPSHOT_PRIV_H
#define NUPP_SNAPSHOT_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <linux/types.h>

#include "nupp_internal.h"
#include "sampler_internal.h"

/* Traces of one process by address: a trace is copied by BPF at its first sample and
 * named by its address, number, machine code and serial (unique in the process); one no
 * sample named for TR_IDLE_US is dropped (a later sample of it reads it again). */
#define TR_BUCKET_BITS 14
#define TR_BUCKETS (1u << TR_BUCKET_BITS)
#define TR_MAX_SNAP 4096
#define TR_MAX_SNAPMAP (1u << 20)
/* Inlined frames kept per snapshot: all LuaJIT can make (a snapshot names slots 0-255 and
 * a frame takes two, its function and its link). */
#define TR_MAX_INL 128
#define TR_MAX_BC (1u << 20) /* instructions of a prototype we read */
#define TR_MAX_CAND 8        /* control instructions a resume PC may belong to */
#define TR_IDLE_US 30000000ull /* an entry no sample named for this long is dropped */

/* A fact of one decode, read once: a GCfunc's frame identity, or a GCproto's header and
 * (once a snapshot needs its bytecode) its whole allocation. It is true while the trace
 * lives: a trace's IR constants are GC roots of their functions (lj_gc.c
 * gc_traverse_trace), a Lua function keeps its prototype, and a trace its start
 * prototype. A decode from a BPF copy takes the functions' identities from the copy and
 * a prototype's allocation from the symbolizer's copy of that incarnation; a decode read
 * from the target checks that the trace still lived when it was done. */
struct tr_fact {
	struct tr_fact *next;
	__u64 addr;
	int is_proto;
	struct nupp_smp_frame f; /* GCfunc: kind, ptr, fingerprint; GCproto: ptr, fingerprint */
	/* GCproto only: */
	__s32 numline;
	__u32 sizept;
	__u64 lineinfo;
	unsigned char *mem; /* [addr, addr + sizept) or NULL: not read yet */
};

/* One inlined frame of a snapshot, innermost last. */
struct tr_frame {
	struct nupp_smp_frame f; /* kind, ptr and fingerprint; pos/link filled per frame */
	__u64 link;              /* link value of the frame (return PC or typed delta) */
	/* The return PC into the frame below: the link itself, or for a continuation
	 * frame the PC stored below its function (frame_contpc); 0: not known. */
	__u64 ret_pc;
};

/* A decoded snapshot: the PC of the bytecode its code executes and the inlined frames
 * (slot > 0) above the start frame. */
struct tr_snap {
	__u64 pc;                /* see tr_exec_pc: not always the snapshot's resume PC */
	__u64 resume;            /* the snapshot's PC: where the interpreter resumes */
	__u32 ref;               /* first IR instruction of the snapshot's code */
	__u8 depth;              /* baseslot - 2 of the innermost frame (0: the start frame) */
	__u64 startpt;           /* GCproto* of slot 0's function if it is a constant, else 0 */
	int ok;                  /* every inlined function was a constant we could read */
	__u8 why;                /* when !ok, why not: enum tr_refusal */
	/* The trace returned below its start frame before this snapshot's code (an IR_RETF:
	 * each moves the trace's BASE, and g->jit_base with it, down one frame), and the
	 * GCproto* the last return went into (its operand; 0: not known). */
	bool ret_below;
	__u64 retpt;
	/* An IR_RETF in this snapshot's own code: the prototype it returns into and the
	 * return PC it checked (0: none). */
	__u64 retin_pt, retin_pc;
	int nfr;
	/* Its nfr frames: in the trace's array of them (tr_entry.frs; most snapshots have
	 * none or a few, so none is kept in place), or while decoding a scratch array. */
	struct tr_frame *fr;
};

/* Returns below the start frame a decode keeps (past them, the prototype a snapshot
 * returned into is not known). */
#define TR_MAX_RETF 16
/* Calls specialised to a prototype or a builtin kept per trace (more: those frames are
 * refused, as POLY). */
#define TR_MAX_SPEC 256

/* Why a snapshot is not decoded (tr_snap.why): _(ID, what the log says), one table for
 * the enum and for tr_refusal_name. */
#define TR_REFUSALDEF(_)                                                          \
	_(NONE, "decoded")                                                        \
	_(MAP, "its map runs past the trace")                                     \
	_(POLY, "an inlined function is not a constant, nor its kind guarded")    \
	_(LINK, "an inlined frame's link is not a constant")                      \
	_(DEPTH, "too many inlined frames")                                       \
	_(FUNC, "an inlined function could not be read")                          \
	_(BRANCH, "a branch's two sides lie on different lines")                  \
	_(BC, "its prototype's bytecode could not be read")

enum tr_refusal {
#define TR_REFUSAL_ENUM(id, text) TR_REF_##id,
	TR_REFUSALDEF(TR_REFUSAL_ENUM)
#undef TR_REFUSAL_ENUM
	TR_REF__MAX
};

const char *tr_refusal_name(int why);
/* The same as a cause of lost samples ("trace snapshot not decoded: ..."). */
const char *tr_refusal_cause(int why);

/* One decoded trace. */
struct tr_entry {
	struct tr_entry *next, **pnext; /* in its bucket (pnext: the pointer to it there) */
	struct tr_entry *lprev, *lnext; /* in the list of all entries */
	__u64 T, mcode;
	__u32 traceno, nsnap;
	__u32 serial; /* with T, traceno and mcode: this incarnation of the trace */
	/* The prototype generation of a sample taken while it lived: names the incarnations
	 * of its functions' prototypes (nupp_sym_proto_mem). */
	__u64 born;
	__u64 used_us; /* the drain clock (nupp_traces_purge) when a sample last named it */
	__u64 startpt;
	/* The prototype of the start frame's function (slot 0), proven without slot 0
	 * being a constant: a root trace starts in T->startpt's frame (lj_trace.c
	 * trace_start, lj_record.c lj_record_setup), a side trace in its root's. 0: not
	 * known (the root was not decoded). */
	__u64 start0;
	__u16 root;
	__u16 *mcofs;
	struct tr_snap *snaps;
	struct tr_frame *frs; /* the snapshots' frames, each snapshot's in a row */
	/* Not decoded yet (mcofs, snaps NULL): the copy BPF sent at its first sample,
	 * decoded when the drain names that sample. */
	unsigned char *raw;
	__u32 rawsize, nfn;
	struct nupp_smp_trace_fn *fns;
	/* raw and fns live in blk, a pooled block of its own (the entry is small and
	 * separate: frees and purges of thousands a second touch only entries). */
	bool inline_raw;
	void *blk;
	__u8 pool;       /* size class + 1 of blk (tr_block_get), 0: malloc'ed */
	int failed; /* the decode failed: its samples cannot be named */
};

struct nupp_traces {
	struct nupp_lj_layout lo;
	int ops_ok; /* our LuaJIT headers number bytecodes and IR as the target does */
	const char *why; /* why the last nupp_traces_expand failed (static text), or NULL */
	nupp_read_fn read;
	void *read_ctx;
	struct tr_entry *b[TR_BUCKETS];
	struct tr_entry *all; /* every entry, the newest first */
	__u64 now_us;         /* the drain clock, as nupp_traces_purge last gave it */
	/* Entries are carved from chunks of TR_ECHUNK; free ones are listed (by lnext). */
	struct tr_entry *efree;
	struct tr_entry **echunks;
	size_t nechunks;
	struct nupp_sym *sym; /* prototypes' copies, or NULL (nupp_traces_set_sym) */
	/* Copy blocks freed, kept for the next copies (a target that compiles without pause
	 * has thousands of traces sampled a second): per power-of-two size class, up to
	 * TR_POOL_KEEP bytes of them (their addresses kept here: taking one does not touch
	 * its cold memory). */
	struct {
		void **free;
		__u32 n;
	} pool[6];
};

/* Reads a field of width w (1, 2, 4, 8) at offset ofs of a copied struct. */
static inline __u64 tr_get(const unsigned char *mem, __u32 ofs, int w)
{
	__u64 v = 0;

	memcpy(&v, mem + ofs, w); /* little endian */
	return v;
}

/* One trace being decoded: its header, IR, snapshots and snapshot map copied from the
 * target, and the facts it takes. */
struct tr_dec {
	struct tr_entry *e;
	unsigned char hdr[512];
	__u32 nk, nins;          /* IR refs [nk, nins) are in irbuf */
	unsigned char *buf;      /* the copy */
	const unsigned char *irbuf; /* ir[nk] .. ir[nins - 1] */
	const unsigned char *snaps;
	const __u32 *map;
	__u32 nmap;
	struct tr_fact *priv;    /* the facts this decode read */
	/* From a BPF copy: the functions named while the trace was alive (nfn entries). */
	const struct nupp_smp_trace_fn *fns;
	__u32 nfn;
	/* Its returns below the start frame (IR_RETF, in IR order) and its IR_LOOP. */
	struct tr_retf {
		__u32 ref;
		__u64 pt, pc;
	} retf[TR_MAX_RETF];
	__u32 nretf, loopref;
	bool retf_loop;          /* an IR_RETF after the IR_LOOP */
	bool retf_many;          /* more than TR_MAX_RETF of them */
	/* Its guards that specialise a call to what a closure is, not which one (lj_record.c
	 * rec_call_specialize): EQ(FLOAD(fn, FUNC_PC), KPTR) holds fn's prototype, and
	 * EQ(FLOAD(fn, FUNC_FFID), KINT) its builtin, where fn is a computed value. */
	struct tr_spec {
		__u32 fn;   /* the IR ref of the function */
		bool ff;    /* v is an ffid, not a prototype's bytecode */
		__u64 v;
	} spec[TR_MAX_SPEC];
	__u32 nspec;
	bool spec_many;          /* more than TR_MAX_SPEC of them */
};

/* -- The cache (snapshot.c) ------------------------------------------------------------ */

/* Gives a block back to the pool (or frees it). */
void tr_block_put(struct nupp_traces *t, void *b, __u8 pool);
/* Frees one entry. */
void tr_entry_free(struct nupp_traces *t, struct tr_entry *e);
/* Makes a new entry known: its bucket and the list of all entries. */
void tr_insert(struct nupp_traces *t, struct tr_entry *e);
/* A new entry for incarnation serial of trace T (header hdr), not decoded; with a pooled
 * block of extra bytes (e->blk) unless extra is 0. */
struct tr_entry *tr_entry_new(struct nupp_traces *t, __u64 T, const unsigned char *hdr, __u32 serial, __u64 born,
			      __u64 start0, size_t extra);
/* The entry of incarnation serial of trace (T, traceno, mcode), or NULL. */
struct tr_entry *tr_lookup(struct nupp_traces *t, __u64 T, __u32 traceno, __u64 mcode, __u32 serial);

/* -- Facts of GCfuncs and GCprotos (snapshot_fact.c) ---------------------------------- */

/* Frees a fact. */
void tr_fact_free(struct tr_fact *f);
/* The fact of a GCfunc or GCproto at addr for the trace being decoded; NULL and *err. */
struct tr_fact *tr_fact_get(struct nupp_traces *t, struct tr_dec *d, __u64 addr, int is_proto, int *err);
/* Fills a frame's identity from a GCfunc of the target (kind, proto and fingerprint). */
int tr_func(struct nupp_traces *t, struct tr_dec *d, __u64 fn, struct nupp_smp_frame *f);

/* -- Decoding (snapshot_decode.c) ------------------------------------------------------ */

/* Decodes entry d->e from d (header, IR, snapshots and map copied). 0 or -errno. */
int tr_decode(struct nupp_traces *t, struct tr_dec *d);
/* Frees what a decode kept for itself. */
void tr_dec_done(struct tr_dec *d);

/* -- Reading traces (snapshot_read.c) -------------------------------------------------- */

/* Decodes incarnation serial of trace T (number traceno of VM g), read now from the
 * target, if it still lives. 0 or -errno. */
int tr_add(struct nupp_traces *t, __u64 g, __u64 T, __u32 traceno, __u32 serial, __u64 born);
/* Decodes an entry from its BPF copy (the first sample that needs it). 0 or -errno. */
int tr_decode_raw(struct nupp_traces *t, struct tr_entry *e);

#endif
