/* What the files of the symbolizer share: its limits, a prototype's incarnation record
 * (struct sym_proto) and the symbolizer's state (struct nupp_sym), and the functions one
 * part calls in another. Private to symbolize*.c; it includes LuaJIT's own headers. */
#ifndef NUPP_SYMBOLIZE_PRIV_H
#define NUPP_SYMBOLIZE_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nupp_internal.h"
#include "sampler_internal.h"
#include "nupp_vmdef.h"

/* LuaJIT's own headers (build/luajit/src) for the bytecode mode table, metamethod names
 * and internal variable names; GCproto fields the layout struct does not export. */
#include "lj_obj.h"
#include "lj_bc.h"
#include "lj_debug.h"

/* A/B/C modes and metamethod of each bytecode (symbolize_bc.c). */
extern const uint16_t sym_bcmode[BC__MAX + 1];

#define SYM_BUCKETS 4096
#define SYM_STR_MAX 256
#define SYM_NAME_MAX (2 * SYM_STR_MAX) /* a frame name is cut to this (with its NUL) */

#define SYM_ALIVE (~0ull)

/* String constants of a prototype read at once (the first this many): each range holds
 * the GCstr header and this many bytes of its text; a longer one is read alone. */
#define SYM_KSTR_BULK 2048
#define SYM_KSTR_HEAD 48
/* Prototypes met since the last prefetch that are queued to be read (more are read when
 * a sample needs them), and the ranges of one prefetch's read of string constants. */
#define SYM_BORN_MAX 4096
#define SYM_PREFETCH_SEGS 8192

/* A string constant of a prototype, read while it was alive. */
struct sym_kstr_entry {
	__u32 idx;
	__u64 drain;
	char *str;
};

/* One incarnation of a prototype at an address: the samples of generations [lo, hi) saw
 * it (hi = SYM_ALIVE while no free is known). Its allocation is copied from the target
 * while it is alive, or from its luajit:proto_free event; its module from the event of
 * the first sample that met it, or read while it is alive. */
struct sym_proto {
	struct sym_proto *next;
	__u64 pt, lo, hi;
	__u64 chunk; /* fingerprint: GCstr* of the chunk name, firstline, sizebc */
	__s32 firstline;
	__u32 sizebc;
	bool have_fp;     /* the fingerprint is known */
	bool have_module; /* module[] is known */
	bool live_module; /* module[] was read from the target, not sent at birth */
	bool unusable;    /* its events were lost, or its copy is cut: it names nothing */
	bool mem_live;    /* mem was read from the target (not sent by its free event) */
	bool unwatched;   /* read for a trace no sample copied: its free may not be reported */
	__u64 live_drain; /* drain in which mem or module[] was read from the target, 0 never */
	/* String constants read from the target while it was alive (a freed prototype's may
	 * be freed: only these name frames then), with the drain that read each. */
	struct sym_kstr_entry *kstr;
	int nkstr;
	bool kstr_bulk; /* all of them were read at once (sym_kstr_load) */
	unsigned char *mem; /* NULL: not copied yet */
	__u32 size;         /* bytes of mem (the copy of a freed prototype may be cut) */
	/* Names its call sites gave (sym_funcname of a position), from mem and kstr as they
	 * are: dropped whenever either changes. */
	struct sym_fname {
		__u32 pos;
		char *name;
	} *fnames;
	int nfnames;
	/* Whole frame names this record gave (nupp_sym_frame), each keyed by what else it
	 * depends on: the caller record (by id and memo generation) and its position, or
	 * the frame's own position in lines mode. Dropped with fnames (sym_memo_clear),
	 * so a name survives drains exactly while nothing it was made from changes. */
	struct sym_fmemo *fmemo;
	int nfmemo, capfmemo;
	__u64 id;       /* unique per record of this symbolizer (never reused) */
	__u32 memo_gen; /* bumped whenever the memos are dropped */
	char module[SYM_STR_MAX];
};

/* What a memoised frame name was made from besides its own record. */
enum sym_fmemo_kind {
	SYM_FMEMO_OWN,    /* its record alone: module:firstline, a builtin's module */
	SYM_FMEMO_CALLER, /* named by a caller's bytecode at a position */
	SYM_FMEMO_LINE,   /* lines mode: module:line of a position */
};

/* One memoised frame name. */
struct sym_fmemo {
	__u64 cp_id;     /* SYM_FMEMO_CALLER: the caller record's id ... */
	__u32 cp_gen;    /* ... and memo generation when the name was made */
	__s32 pos;       /* the caller's position (CALLER) or the frame's (LINE) */
	__u8 kind;       /* enum sym_fmemo_kind */
	__u32 len;       /* strlen(name) */
	__u64 rec_epoch; /* the frame table (nupp_sym_set_frames) it was last recorded in */
	char *name;
};

/* A named C function address. */
struct sym_cfunc {
	struct sym_cfunc *next;
	__u64 addr;
	char name[SYM_STR_MAX];
};

struct nupp_sym {
	pid_t pid;
	bool lines;
	bool full_filenames; /* modules are the chunk's full path, not jit.p's basename */
	struct nupp_lj_layout lo;
	nupp_read_fn read;
	nupp_readv_fn readv; /* NULL: the ranges one by one with read */
	void *read_ctx;
	struct sym_proto *protos[SYM_BUCKETS];
	struct sym_cfunc *cfuncs[SYM_BUCKETS];
	__u64 drain;     /* number of the current drain (nupp_sym_begin) */
	bool suspect;    /* a copy read in this drain belongs to a prototype freed since */
	__u64 refuse_upto; /* stacks of generations <= this are refused (events were lost) */
	__u64 refuse_from; /* ... and >= this (nupp_sym_lost: the first generation lost) */
	/* The process's generation as the sampler read it (nupp_sym_gen_seen), with the
	 * drain then: every copy of a drain <= seen[i].drain was read before the
	 * generation passed seen[i].gen. The last 16, oldest first. */
	struct {
		__u64 drain, gen;
	} seen[16];
	int nseen;
	bool refused;    /* a name needed a string constant of a freed prototype */
	bool gc_busy;    /* a name needed a string read while a VM was sweeping */
	__u64 vms[NUPP_SMP_MAX_VMS]; /* the process's VMs (global_State *), 0 = none */
	/* Addresses whose naming failed in this drain: a free of one may give the name. */
	__u64 failed_pt[16];
	int nfailed; /* > 16: too many, any free may */
	__u64 failed_drain;
	/* Frees handled: every generation <= freed_upto, and those in ooo[] above it (free
	 * events of several VMs' threads may arrive out of order). A sample of generation E
	 * is named only when every free <= E is known: a free not yet read could end the
	 * incarnation a record still says covers E. */
	__u64 freed_upto;
	__u64 *ooo;
	size_t nooo, ooocap;
	/* Records read for traces whose prototypes no sample met (nupp_sym_proto_mem): the
	 * sampler reports the frees of prototypes met only, so they are dropped at the next
	 * naming round (read again while alive when needed). */
	int nunwatched;
	struct nupp_addrmap *amap; /* the process's mappings and symbols (C functions) */
	bool own_amap;             /* made here (no nupp_sym_set_addrmap) */
	struct nupp_frame_table *frames; /* where named Lua frames are recorded (NULL: not) */
	int frames_err;                  /* -ENOMEM once recording one failed */
	/* Prototypes born since the last prefetch (nupp_sym_prefetch reads them). */
	__u64 born[SYM_BORN_MAX];
	int nborn;
	__u64 frames_epoch;              /* bumped by each table given: memos record again */
	__u64 next_id;                   /* the id of the next record made */
	char namebuf[SYM_NAME_MAX];      /* the last frame name made (sym_frame) */
	char *stk;                       /* where nupp_sym_stack joins a stack's names */
	size_t stkcap;
	__u64 ended_min; /* no record has ended below this generation (SYM_ALIVE: none ended) */
};

/* The symbolizer (symbolize.c): its reads of the target and the strings it reads. */
void sym_proto_free(struct sym_proto *p);
unsigned sym_bucket(__u64 a);
int sym_read_live_str(struct nupp_sym *s, __u64 pt, __u64 str, char *buf, size_t size);
void sym_set_module(const struct nupp_sym *s, struct sym_proto *p, const char *chunk);
int sym_readv(struct nupp_sym *s, const struct nupp_read_seg *seg, int n);
bool sym_gc_quiet(struct nupp_sym *s, __u64 pt);

/* The prototype ledger (symbolize_ledger.c): incarnations by generation. */
struct sym_proto *sym_proto_alive(struct nupp_sym *s, __u64 pt);
bool sym_mem_fp_eq(const struct nupp_lj_layout *lo, const unsigned char *mem, __u64 chunk,
			  __s32 firstline, __u32 sizebc);
void sym_proto_take_live(struct nupp_sym *s, struct sym_proto *p, unsigned char *mem, __u32 size);
struct sym_proto *sym_proto_add(struct nupp_sym *s, __u64 pt, __u64 lo);
__u64 sym_proto_end(struct nupp_sym *s, __u64 pt);
bool sym_fp_eq(const struct sym_proto *p, const struct nupp_smp_frame *f);
int sym_proto_read(struct nupp_sym *s, struct sym_proto *p, const struct nupp_smp_frame *f);
struct sym_proto *sym_proto(struct nupp_sym *s, const struct nupp_smp_frame *f, __u64 pgen, int *err);
void sym_failed_add(struct nupp_sym *s, __u64 pt);

/* A prototype's bytecode (symbolize_bc.c): instructions, constants, slot names. */
__u64 sym_u64(const struct sym_proto *p, size_t ofs);
int sym_kstr_load(struct nupp_sym *s, struct sym_proto *p);
const unsigned char *sym_at(const struct sym_proto *p, __u64 addr, __u64 len);
__u32 sym_ins(const struct sym_proto *p, const struct nupp_lj_layout *lo, __u32 pos);
const char *sym_slotname(struct nupp_sym *s, struct sym_proto *p, __u32 pos, __u32 slot, char *buf,
				size_t size);

/* Naming (symbolize_name.c): function names, lines, C functions, memos. */
void sym_memo_clear(struct sym_proto *p);

#endif
