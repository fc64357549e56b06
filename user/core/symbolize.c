/* Naming sampled frames as jit.p does (luajit -jp=F): module:name derived from the
 * caller's bytecode like lj_debug_funcname, else module:firstline; builtins by name. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nupp_internal.h"
#include "sampler_internal.h"
#include "nupp_vmdef.h"

/* LuaJIT's own headers (build/luajit/src) for the bytecode mode table, metamethod names
 * and internal variable names; GCproto fields the layout struct does not export. */
#include "lj_obj.h"
#include "lj_bc.h"
#include "lj_debug.h"

/* lj_bc.c:11-14: A/B/C modes and metamethod of each bytecode. */
static const uint16_t sym_bcmode[] = { BCDEF(BCMODE) BCMODE_FF };

/* Metamethod names as mmname_str gives them (lj_obj.h:556-563, lj_meta.c:22-29). */
static const char *const sym_mmname[] = {
#define SYM_MMNAME(name) "__" #name,
	MMDEF(SYM_MMNAME)
#undef SYM_MMNAME
};

/* Internal local variable names (lj_debug.h:50-56). */
static const char *const sym_varnames[] = {
	"",
#define SYM_VARNAME(name, str) str,
	VARNAMEDEF(SYM_VARNAME)
#undef SYM_VARNAME
};

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

/* A symbolizer for one process. */
struct nupp_sym *nupp_sym_new(pid_t pid, const struct nupp_lj_layout *lo, bool lines, nupp_read_fn read,
			      void *read_ctx)
{
	struct nupp_sym *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->pid = pid;
	s->lines = lines;
	s->drain = 1;
	s->lo = *lo;
	s->read = read;
	s->read_ctx = read_ctx;
	s->ended_min = SYM_ALIVE;
	return s;
}

/* Gives it a vectored reader. */
void nupp_sym_set_readv(struct nupp_sym *s, nupp_readv_fn readv)
{
	s->readv = readv;
}

/* Reads n ranges, with the vectored reader or one by one: how many leading ranges were
 * read whole, or -errno. */
static int sym_readv(struct nupp_sym *s, const struct nupp_read_seg *seg, int n)
{
	int i, err;

	if (s->readv)
		return s->readv(s->read_ctx, seg, n);
	for (i = 0; i < n; i++) {
		err = s->read(s->read_ctx, seg[i].addr, seg[i].buf, seg[i].len);
		if (err)
			return i ? i : err;
	}
	return n;
}

/* Frees a prototype record. */
static void sym_memo_clear(struct sym_proto *p);

static void sym_proto_free(struct sym_proto *p)
{
	int i;

	sym_memo_clear(p);
	for (i = 0; i < p->nkstr; i++)
		free(p->kstr[i].str);
	free(p->kstr);
	free(p->mem);
	free(p);
}

/* Frees it and its caches. */
void nupp_sym_free(struct nupp_sym *s)
{
	int i;

	if (!s)
		return;
	for (i = 0; i < SYM_BUCKETS; i++) {
		while (s->protos[i]) {
			struct sym_proto *p = s->protos[i];

			s->protos[i] = p->next;
			sym_proto_free(p);
		}
		while (s->cfuncs[i]) {
			struct sym_cfunc *c = s->cfuncs[i];

			s->cfuncs[i] = c->next;
			free(c);
		}
	}
	if (s->own_amap)
		nupp_addrmap_free(s->amap);
	free(s->ooo);
	free(s->stk);
	free(s);
}

/* Bucket of an address. */
static unsigned sym_bucket(__u64 a)
{
	return (unsigned)((a >> 3) * 0x9e3779b97f4a7c15ull >> 52) & (SYM_BUCKETS - 1);
}

/* Reads a GCstr of the target (NUL-terminated, truncated to size). */
static int sym_read_str(struct nupp_sym *s, __u64 str, char *buf, size_t size)
{
	__u32 len = 0;
	int err;

	if (!str)
		return -EINVAL;
	err = s->read(s->read_ctx, str + s->lo.str_len, &len, sizeof(len));
	if (err)
		return err;
	if (len >= size)
		len = (__u32)size - 1;
	err = s->read(s->read_ctx, str + s->lo.str_size, buf, len);
	if (err)
		return err;
	buf[len] = 0;
	return 0;
}

/* The process's VMs, whose GC phase decides whether a string read from it is proven. */
void nupp_sym_set_vms(struct nupp_sym *s, const __u64 *g, int n)
{
	int i;

	for (i = 0; i < NUPP_SMP_MAX_VMS; i++)
		s->vms[i] = i < n ? g[i] : 0;
}

/* Whether the strings of prototype pt are intact now. The GC frees strings
 * (GCSsweepstring) before prototypes (GCSsweep): while it sweeps, a string of a
 * prototype that is unreachable but not yet freed may already be recycled, and no free
 * event says so yet. So: every VM of the process is outside the sweep, or pt is not dead
 * under it (marked & otherwhite, lj_gc.h isdead). (A VM that stops allocating can stay
 * in a sweep phase for good: the second test keeps its live code nameable.) Outside the
 * sweep, an unreachable prototype's strings are intact, and once swept its free event
 * follows. pt 0 (the strings of several prototypes): every VM outside the sweep. */
static bool sym_gc_quiet(struct nupp_sym *s, __u64 pt)
{
	const struct nupp_lj_layout *lo = &s->lo;
	int i;

	for (i = 0; i < NUPP_SMP_MAX_VMS; i++) {
		__u8 st = 0, white = 0, marked = 0;

		if (!s->vms[i])
			continue;
		if (s->read(s->read_ctx, s->vms[i] + lo->g_gc_state, &st, 1))
			return false;
		if (st != lo->gcs_sweepstring && st != lo->gcs_sweep)
			continue;
		if (!pt || s->read(s->read_ctx, s->vms[i] + lo->g_gc_currentwhite, &white, 1) ||
		    s->read(s->read_ctx, pt + lo->gch_marked, &marked, 1))
			return false;
		if (marked & (white ^ lo->gc_whites) & lo->gc_whites)
			return false;
	}
	return true;
}

/* Reads a string of prototype pt, thought alive: proven only if its strings were intact
 * before and after the read (-EAGAIN and gc_busy otherwise: the stack is named later). */
static int sym_read_live_str(struct nupp_sym *s, __u64 pt, __u64 str, char *buf, size_t size)
{
	int err;

	if (!sym_gc_quiet(s, pt)) {
		s->gc_busy = true;
		return -EAGAIN;
	}
	err = sym_read_str(s, str, buf, size);
	if (!err && !sym_gc_quiet(s, pt)) {
		s->gc_busy = true;
		return -EAGAIN;
	}
	return err;
}

/* Module of a chunk name as jit.p prints it (debug_putchunkname, lj_debug.c:553-578). */
void nupp_sym_module(const char *chunk, char *buf, size_t size)
{
	const char *p = chunk, *slash;

	if (*p == '@' || *p == '=') {
		p++;
		slash = strrchr(p, '/');
		if (slash)
			p = slash + 1;
		snprintf(buf, size, "%s", p);
	} else {
		snprintf(buf, size, "[string]");
	}
}

static __u64 sym_u64(const struct sym_proto *p, size_t ofs);

/* Names modules by the chunk's full path ("@/a/b/c.lua" -> "/a/b/c.lua") or not. */
void nupp_sym_set_full_filenames(struct nupp_sym *s, bool on)
{
	s->full_filenames = on;
}

/* Sets the module of a chunk name (a bytecode builtin's as lj_debug.c:557-562 does). */
static void sym_set_module(const struct nupp_sym *s, struct sym_proto *p, const char *chunk)
{
	if (p->firstline == -1)
		snprintf(p->module, sizeof(p->module), "[builtin:%.*s]", (int)sizeof(p->module) - 11, chunk);
	else if (s->full_filenames && (chunk[0] == '@' || chunk[0] == '='))
		snprintf(p->module, sizeof(p->module), "%s", chunk + 1);
	else
		nupp_sym_module(chunk, p->module, sizeof(p->module));
	p->have_module = true;
}

/* A new incarnation record of pt for generations [lo, SYM_ALIVE). */
static struct sym_proto *sym_proto_add(struct nupp_sym *s, __u64 pt, __u64 lo)
{
	unsigned b = sym_bucket(pt);
	struct sym_proto *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->pt = pt;
	p->lo = lo;
	p->hi = SYM_ALIVE;
	p->id = ++s->next_id;
	p->next = s->protos[b];
	s->protos[b] = p;
	return p;
}

/* Ends record p at generation hi (its samples are those of [p->lo, hi)). */
static void sym_proto_end_at(struct nupp_sym *s, struct sym_proto *p, __u64 hi)
{
	p->hi = hi;
	if (hi < s->ended_min)
		s->ended_min = hi;
}

/* The records of an address are in its bucket newest first, and only the newest can be
 * alive: every record is added at the head, and only when the address has no alive one
 * (nupp_sym_born ends the alive one first). */

/* The newest record of pt, or NULL. */
static struct sym_proto *sym_proto_newest(struct nupp_sym *s, __u64 pt)
{
	struct sym_proto *p;

	for (p = s->protos[sym_bucket(pt)]; p; p = p->next)
		if (p->pt == pt)
			return p;
	return NULL;
}

/* The incarnation of pt alive now (hi == SYM_ALIVE), or NULL. */
static struct sym_proto *sym_proto_alive(struct nupp_sym *s, __u64 pt)
{
	struct sym_proto *p = sym_proto_newest(s, pt);

	return p && p->hi == SYM_ALIVE ? p : NULL;
}

/* Where the generations of pt's freed records end: its next incarnation starts there. */
static __u64 sym_proto_end(struct nupp_sym *s, __u64 pt)
{
	struct sym_proto *p;

	for (p = s->protos[sym_bucket(pt)]; p; p = p->next)
		if (p->pt == pt && p->hi != SYM_ALIVE)
			return p->hi;
	return 0;
}

/* Whether f's fingerprint is p's. */
static bool sym_fp_eq(const struct sym_proto *p, const struct nupp_smp_frame *f)
{
	return p->chunk == f->chunkname && p->firstline == f->firstline && p->sizebc == f->sizebc;
}

static int sym_kstr_load(struct nupp_sym *s, struct sym_proto *p);

/* Whether a prototype's copy mem holds this fingerprint (chunk name, first line,
 * bytecode size): a freed and reused address does not. */
static bool sym_mem_fp_eq(const struct nupp_lj_layout *lo, const unsigned char *mem, __u64 chunk,
			  __s32 firstline, __u32 sizebc)
{
	return *(const __u64 *)(mem + lo->pt_chunkname) == chunk &&
	       *(const __s32 *)(mem + lo->pt_firstline) == firstline && *(const __u32 *)(mem + lo->pt_sizebc) == sizebc;
}

/* Makes mem (size bytes, just read from the target) p's copy. */
static void sym_proto_take_live(struct nupp_sym *s, struct sym_proto *p, unsigned char *mem, __u32 size)
{
	sym_memo_clear(p);
	free(p->mem);
	p->mem = mem;
	p->mem_live = true;
	p->size = size;
	p->live_drain = s->drain;
}

/* Makes a copy of mem[size], sent by BPF (not read from the target), p's allocation: 0,
 * or -ENOMEM (p unchanged). */
static int sym_proto_take_copy(struct sym_proto *p, const void *mem, __u32 size)
{
	unsigned char *copy = malloc(size ? size : 1);

	if (!copy)
		return -ENOMEM;
	memcpy(copy, mem, size);
	free(p->mem);
	p->mem = copy;
	p->mem_live = false;
	p->size = size;
	return 0;
}

/* Copies p's allocation from the target (it must be alive), checked against f. */
static int sym_proto_read(struct nupp_sym *s, struct sym_proto *p, const struct nupp_smp_frame *f)
{
	const struct nupp_lj_layout *lo = &s->lo;
	__u32 sizept = 0;
	unsigned char *mem;
	int err;

	err = s->read(s->read_ctx, f->ptr + lo->pt_sizept, &sizept, sizeof(sizept));
	if (err)
		return err;
	if (sizept < lo->pt_size + 4 * f->sizebc || sizept > (64u << 20))
		return -ESTALE;
	mem = malloc(sizept);
	if (!mem)
		return -ENOMEM;
	err = s->read(s->read_ctx, f->ptr, mem, sizept);
	/* The fingerprint must match the memory now: a freed and reused address is refused. */
	if (!err && !sym_mem_fp_eq(lo, mem, f->chunkname, f->firstline, f->sizebc))
		err = -ESTALE;
	if (err) {
		free(mem);
		return err;
	}
	sym_proto_take_live(s, p, mem, sizept);
	/* Its string constants with it, while it lives: the names of its call sites may be
	 * needed only after the process is gone (its last samples). Not read now (the GC
	 * sweeps): when first needed. */
	if (!p->kstr_bulk)
		sym_kstr_load(s, p);
	return 0;
}

/* The copy of the incarnation of f->ptr that a sample of generation pgen saw, checked
 * against the sample's fingerprint; NULL and *err (-ESTALE: it cannot be named). */
static struct sym_proto *sym_proto(struct nupp_sym *s, const struct nupp_smp_frame *f, __u64 pgen, int *err)
{
	struct sym_proto *p;
	char chunk[SYM_STR_MAX];

	for (p = s->protos[sym_bucket(f->ptr)]; p; p = p->next)
		if (p->pt == f->ptr && p->lo <= pgen && pgen < p->hi)
			break;
	if (!p) {
		/* No event about this incarnation: born before we looked, alive when last
		 * heard of; read it from the target. Unless the generation falls between
		 * known incarnations (events were lost). */
		__u64 end = sym_proto_end(s, f->ptr);

		*err = -ESTALE;
		if (pgen < end || sym_proto_alive(s, f->ptr))
			return NULL;
		/* Before events were lost (nupp_sym_lost): what the target holds now may
		 * have replaced it in a free not read. */
		if (s->refuse_upto && pgen < s->refuse_from)
			return NULL;
		p = sym_proto_add(s, f->ptr, end);
		if (!p) {
			*err = -ENOMEM;
			return NULL;
		}
	}
	*err = -ESTALE;
	if (p->unusable || (p->have_fp && !sym_fp_eq(p, f)))
		return NULL;
	if (p->hi != SYM_ALIVE) {
		/* Freed: only what was copied at its free and birth (or while alive) names it. */
		if (!p->mem || !p->have_module)
			return NULL;
		*err = 0;
		return p;
	}
	if (!p->mem) {
		*err = sym_proto_read(s, p, f);
		if (*err)
			return NULL;
	}
	if (!p->have_module) {
		*err = sym_read_live_str(s, f->ptr, f->chunkname, chunk, sizeof(chunk));
		if (*err)
			return NULL;
		p->firstline = f->firstline;
		sym_set_module(s, p, chunk);
		p->live_module = true;
		p->live_drain = s->drain;
	}
	if (!p->have_fp) {
		p->chunk = f->chunkname;
		p->firstline = f->firstline;
		p->sizebc = f->sizebc;
		p->have_fp = true;
	}
	*err = 0;
	return p;
}

/* The first sample (or trace copy) that met pt, alive, since it was made, at generation
 * pgen: its chunk name (name[len], the whole name if len == full), for the day it dies
 * before it is named. Its incarnation starts at pgen (its samples are of pgen or later). */
int nupp_sym_born(struct nupp_sym *s, __u64 pt, __u64 pgen, __u64 chunk, __s32 firstline, __u32 sizebc,
		  const char *name, __u32 len, __u32 full)
{
	struct sym_proto *p;
	char buf[SYM_STR_MAX];

	if (s->refuse_upto && pgen < s->refuse_upto)
		return 0; /* from before a reset: read from the target if it lives on */
	p = sym_proto_alive(s, pt);
	/* An incarnation still thought alive died before this one was born (its free event
	 * was lost): only samples before this birth saw it. Or it is this one, made when a
	 * sample was named before this event was read: what was read of it from the target
	 * in this drain may postdate its death, whose free now ends the new record instead,
	 * so the round's names must be given again (as after a free, nupp_sym_freed). */
	if (p) {
		if (p->live_drain && p->live_drain == s->drain)
			s->suspect = true;
		sym_proto_end_at(s, p, pgen > p->lo ? pgen : p->lo + 1);
		if (!p->mem)
			p->unusable = true;
	}
	p = sym_proto_add(s, pt, pgen);
	if (!p)
		return -ENOMEM;
	p->chunk = chunk;
	p->firstline = firstline;
	p->sizebc = sizebc;
	p->have_fp = true;
	if (len == full && len < sizeof(buf)) {
		memcpy(buf, name, len);
		buf[len] = 0;
		sym_set_module(s, p, buf);
	}
	if (s->nborn < SYM_BORN_MAX)
		s->born[s->nborn++] = pt;
	return 0;
}

/* Records that the free of generation gen was handled (or lost). */
static void sym_freed_gen(struct nupp_sym *s, __u64 gen)
{
	size_t i;

	if (gen <= s->freed_upto)
		return;
	if (gen == s->freed_upto + 1) {
		s->freed_upto = gen;
		/* Absorb the out-of-order ones that now follow. */
		for (i = 0; i < s->nooo;) {
			if (s->ooo[i] == s->freed_upto + 1) {
				s->freed_upto++;
				s->ooo[i] = s->ooo[--s->nooo];
				i = 0;
			} else if (s->ooo[i] <= s->freed_upto) {
				s->ooo[i] = s->ooo[--s->nooo];
			} else {
				i++;
			}
		}
		return;
	}
	if (s->nooo == s->ooocap) {
		size_t cap = s->ooocap ? 2 * s->ooocap : 64;
		__u64 *n = realloc(s->ooo, cap * sizeof(*n));

		if (!n)
			return; /* never counted: its samples wait, then are lost */
		s->ooo = n;
		s->ooocap = cap;
	}
	s->ooo[s->nooo++] = gen;
}

/* Notes an address whose naming failed in this drain. */
static void sym_failed_add(struct nupp_sym *s, __u64 pt)
{
	if (s->failed_drain != s->drain) {
		s->failed_drain = s->drain;
		s->nfailed = 0;
	}
	if (s->nfailed < (int)NUPP_ARRAY_SIZE(s->failed_pt))
		s->failed_pt[s->nfailed] = pt;
	if (s->nfailed <= (int)NUPP_ARRAY_SIZE(s->failed_pt))
		s->nfailed++;
}

/* Whether naming failed on pt in this drain (or on too many addresses to tell). */
static bool sym_failed_has(const struct nupp_sym *s, __u64 pt)
{
	int i;

	if (s->failed_drain != s->drain || !s->nfailed)
		return false;
	if (s->nfailed > (int)NUPP_ARRAY_SIZE(s->failed_pt))
		return true;
	for (i = 0; i < s->nfailed; i++)
		if (s->failed_pt[i] == pt)
			return true;
	return false;
}

/* luajit:proto_free: pt dies, ending generation pgen; mem[size] is its allocation (cut
 * if size < sizept) and chunk/firstline/sizebc its fingerprint. */
int nupp_sym_freed(struct nupp_sym *s, __u64 pt, __u64 pgen, __u64 chunk, __s32 firstline, __u32 sizebc,
		   const void *mem, __u32 size, __u32 sizept)
{
	struct sym_proto *p;

	/* Of the generations nupp_sym_reset gave up: their stacks are refused anyway. */
	if (pgen <= s->refuse_upto)
		return 0;
	sym_freed_gen(s, pgen);
	p = sym_proto_alive(s, pt);
	if (!p) {
		/* Born before we looked and never copied. */
		p = sym_proto_add(s, pt, sym_proto_end(s, pt));
		if (!p)
			return -ENOMEM;
	}
	/* Copied in this drain: maybe after this free. Or a name failed in this drain on
	 * this address: this copy may give it. */
	if ((p->live_drain && p->live_drain == s->drain) || sym_failed_has(s, pt))
		s->suspect = true;
	sym_proto_end_at(s, p, pgen > p->lo ? pgen : p->lo + 1);
	sym_memo_clear(p); /* its copy and constants may change below */
	if (p->have_fp && (p->chunk != chunk || p->firstline != firstline || p->sizebc != sizebc)) {
		/* Not the prototype we knew (events were lost): name neither. */
		p->unusable = true;
		return 0;
	}
	p->chunk = chunk;
	p->firstline = firstline;
	p->sizebc = sizebc;
	p->have_fp = true;
	if (p->live_module && p->live_drain == s->drain)
		p->have_module = false; /* its chunk name may have been read after it died */
	for (int i = 0; i < p->nkstr;) /* so may its constants read in this drain */
		if (p->kstr[i].drain == s->drain) {
			free(p->kstr[i].str);
			p->kstr[i] = p->kstr[--p->nkstr];
		} else {
			i++;
		}
	/* A cut copy (a prototype over NUPP_SMP_PT_MAX bytes) lacks its debug information
	 * (after the bytecode and constants): it names nothing rather than something else. */
	if (size < sizept || size < s->lo.pt_size + 4ull * sizebc) {
		free(p->mem);
		p->mem = NULL;
		p->unusable = true;
		return 0;
	}
	if (sym_proto_take_copy(p, mem, size)) {
		free(p->mem); /* ended all the same: it names nothing */
		p->mem = NULL;
		p->unusable = true;
		return -ENOMEM;
	}
	return 0;
}

/* The allocation of pt as the sample that first met it found it, alive (its met event,
 * of generation pgen, came just before): the record that event began holds it, so pt is
 * named without reading it (after its process exits too). mem[size] is cut if size <
 * sizept (then it is read while alive). */
int nupp_sym_copied(struct nupp_sym *s, __u64 pt, __u64 pgen, __u64 chunk, __s32 firstline, __u32 sizebc,
		    const void *mem, __u32 size, __u32 sizept)
{
	struct sym_proto *p = sym_proto_alive(s, pt);

	if (!p || p->lo != pgen || !p->have_fp || p->chunk != chunk || p->firstline != firstline ||
	    p->sizebc != sizebc)
		return -ENOENT;
	if (p->mem || size < sizept || size < s->lo.pt_size + 4ull * sizebc)
		return 0;
	if (!sym_mem_fp_eq(&s->lo, mem, chunk, firstline, sizebc))
		return -ESTALE;
	return sym_proto_take_copy(p, mem, size);
}

/* The string constants of pt as it died at generation pgen (a closing VM's), or as the
 * sample that first met it at generation pgen found them (after its copy). */
int nupp_sym_kstrs(struct nupp_sym *s, __u64 pt, __u64 pgen, const void *data, __u32 size)
{
	const unsigned char *q = data, *end = q + size;
	struct sym_proto *p = sym_proto_newest(s, pt);
	struct nupp_smp_kstr e;
	struct sym_kstr_entry *ne;

	/* The record its free event (sent just before) ended, or its met event began. */
	if (!p || (p->hi == SYM_ALIVE ? p->lo != pgen : p->hi != (pgen > p->lo ? pgen : p->lo + 1)))
		return -ENOENT;
	while (q + sizeof(e) <= end) {
		memcpy(&e, q, sizeof(e));
		q += sizeof(e);
		if (q + e.len > end)
			break;
		if (e.whole) {
			ne = realloc(p->kstr, (p->nkstr + 1) * sizeof(*ne));
			if (!ne)
				return -ENOMEM;
			p->kstr = ne;
			ne[p->nkstr].idx = e.idx;
			ne[p->nkstr].drain = 0; /* copied by BPF: valid whatever the drain */
			ne[p->nkstr].str = strndup((const char *)q, e.len);
			if (ne[p->nkstr].str)
				p->nkstr++;
		}
		q += e.len;
	}
	return 0;
}

/* Frees the records drop(p, arg) is true of; returns the lowest end of those kept. */
static __u64 sym_drop(struct nupp_sym *s, bool (*drop)(const struct sym_proto *, __u64), __u64 arg)
{
	__u64 min = SYM_ALIVE;
	int i;

	for (i = 0; i < SYM_BUCKETS; i++) {
		struct sym_proto **pp = &s->protos[i];

		while (*pp) {
			struct sym_proto *p = *pp;

			if (drop(p, arg)) {
				*pp = p->next;
				sym_proto_free(p);
			} else {
				if (p->hi < min)
					min = p->hi;
				pp = &p->next;
			}
		}
	}
	return min;
}

/* Whether p died at or before generation pgen. */
static bool sym_ended_by(const struct sym_proto *p, __u64 pgen)
{
	return p->hi != SYM_ALIVE && p->hi <= pgen;
}

/* Drops the incarnations that died at or before generation pgen (a walk of every
 * record only when one ended there: ended_min is the lowest end of those kept). */
void nupp_sym_purge(struct nupp_sym *s, __u64 pgen)
{
	if (s->ended_min > pgen)
		return;
	s->ended_min = sym_drop(s, sym_ended_by, pgen);
}

/* Free events were lost, all at generations <= pgen (the process's generation now):
 * no record can say which incarnations those samples saw. Forgets every record, refuses
 * stacks up to pgen, and names later ones from records made afresh. */
void nupp_sym_reset(struct nupp_sym *s, __u64 pgen)
{
	int i;

	for (i = 0; i < SYM_BUCKETS; i++)
		while (s->protos[i]) {
			struct sym_proto *p = s->protos[i];

			s->protos[i] = p->next;
			sym_proto_free(p);
		}
	s->ended_min = SYM_ALIVE;
	if (pgen > s->refuse_upto)
		s->refuse_upto = pgen;
	if (pgen > s->freed_upto)
		s->freed_upto = pgen;
	s->nooo = 0;
	s->drain++; /* copies read before are not this drain's */
}

/* The sampler read the process's generation gen (before this drain names anything):
 * the copies read so far were read before any free of a later generation. */
void nupp_sym_gen_seen(struct nupp_sym *s, __u64 gen)
{
	if (s->nseen == (int)NUPP_ARRAY_SIZE(s->seen)) {
		memmove(&s->seen[0], &s->seen[1], sizeof(s->seen) - sizeof(s->seen[0]));
		s->nseen--;
	}
	s->seen[s->nseen].drain = s->drain;
	s->seen[s->nseen].gen = gen;
	s->nseen++;
}

/* Free events were lost, all at generations <= pgen (the process's generation now), and
 * none below the first one not read (freed_upto + 1 = lo): every free < lo is known.
 * Only what a free of lo or later can make wrong is given up:
 * - stacks of generations lo..pgen are refused (any of their prototypes may have died
 *   and been replaced in that window); earlier stacks are named as before;
 * - every incarnation thought alive ends at lo (it lived until lo at least; samples
 *   after pgen are named from records made afresh);
 * - a copy read from the target after the generation reached lo (it may postdate a lost
 *   free) is dropped; one read before a generation < lo was seen is proven.
 * Returns lo (the trace cache ends its live traces there too). */
__u64 nupp_sym_lost(struct nupp_sym *s, __u64 pgen)
{
	__u64 lo = s->freed_upto + 1, proven = 0;
	int i, j;

	for (i = 0; i < s->nseen; i++)
		if (s->seen[i].gen < lo && s->seen[i].drain > proven)
			proven = s->seen[i].drain;
	for (i = 0; i < SYM_BUCKETS; i++)
		for (struct sym_proto *p = s->protos[i]; p; p = p->next) {
			if (p->hi == SYM_ALIVE)
				sym_proto_end_at(s, p, lo > p->lo ? lo : p->lo);
			if (p->live_drain <= proven)
				continue;
			sym_memo_clear(p);
			if (p->mem && p->mem_live) {
				free(p->mem);
				p->mem = NULL;
			}
			if (p->live_module)
				p->have_module = false;
			p->kstr_bulk = false; /* read again while alive, if needed */
			for (j = 0; j < p->nkstr;)
				if (p->kstr[j].drain > proven) {
					free(p->kstr[j].str);
					p->kstr[j] = p->kstr[--p->nkstr];
				} else {
					j++;
				}
		}
	/* No free is missing up to pgen (the event lost had no generation): no stack to
	 * refuse. Otherwise this window replaces the last: no stack left to name is older. */
	if (pgen >= lo) {
		s->refuse_from = lo;
		s->refuse_upto = pgen;
	}
	if (pgen > s->freed_upto)
		s->freed_upto = pgen;
	for (size_t k = 0; k < s->nooo;)
		if (s->ooo[k] <= s->freed_upto)
			s->ooo[k] = s->ooo[--s->nooo];
		else
			k++;
	s->drain++; /* copies read before are not this drain's */
	return lo;
}

/* Drops the records of prototypes read for a trace and never met by a sample since (still
 * thought alive, unwatched): no free of theirs may come, so none may name a later
 * incarnation of the address. */
static bool sym_unwatched_alive(const struct sym_proto *p, __u64 unused)
{
	return p->unwatched && p->hi == SYM_ALIVE;
}

static void sym_drop_unwatched(struct nupp_sym *s)
{
	s->ended_min = sym_drop(s, sym_unwatched_alive, 0);
	s->nunwatched = 0;
}

/* Starts a naming round, after the events sent so far were read: copies read from the
 * target before are proven (a free after them came after them). */
void nupp_sym_begin(struct nupp_sym *s)
{
	s->drain++;
	s->suspect = false;
	if (s->nunwatched)
		sym_drop_unwatched(s);
}

/* Whether a free event read since nupp_sym_begin may change a name given since: a copy
 * read from the target in this round died (maybe before it was read), or a name failed
 * (the free's copy may give it). The round's stacks must be named again. */
bool nupp_sym_suspect(const struct nupp_sym *s)
{
	return s->suspect;
}

/* Local pointer for a target address inside the proto copy, or NULL. */
static const unsigned char *sym_at(const struct sym_proto *p, __u64 addr, __u64 len)
{
	if (addr < p->pt || addr - p->pt > p->size || p->size - (addr - p->pt) < len)
		return NULL;
	return p->mem + (addr - p->pt);
}

/* The 64-bit field at offset ofs of the proto copy. */
static __u64 sym_u64(const struct sym_proto *p, size_t ofs)
{
	__u64 v;

	memcpy(&v, p->mem + ofs, sizeof(v));
	return v;
}

/* Bytecode instruction pos of the proto copy (0xffffffff, an invalid opcode, if the copy
 * does not hold it). */
static __u32 sym_ins(const struct sym_proto *p, const struct nupp_lj_layout *lo, __u32 pos)
{
	__u32 ins;

	if (lo->pt_size + 4ull * pos + 4 > p->size)
		return 0xffffffffu;
	memcpy(&ins, p->mem + lo->pt_size + 4 * pos, sizeof(ins));
	return ins;
}

/* Reads an uleb128 from [*pp, end) (lj_buf_ruleb128). */
static __u32 sym_uleb128(const unsigned char **pp, const unsigned char *end)
{
	const unsigned char *q = *pp;
	__u32 v = 0;
	int sh = 0;

	while (q < end) {
		__u8 b = *q++;

		v |= (__u32)(b & 0x7f) << sh;
		sh += 7;
		if (!(b & 0x80) || sh > 28)
			break;
	}
	*pp = q;
	return v;
}

/* Name of the local in slot at pc (debug_varname, lj_debug.c:146-178), or NULL. */
static const char *sym_varname(const struct sym_proto *p, __u32 pc, __u32 slot, char *buf, size_t size)
{
	__u64 vi = sym_u64(p, offsetof(GCproto, varinfo));
	const unsigned char *q, *end = p->mem + p->size;
	__u32 lastpc = 0;

	if (!vi || !(q = sym_at(p, vi, 1)))
		return NULL;
	while (q < end) {
		const unsigned char *name = q;
		__u32 vn = *q, startpc, endpc;

		if (vn < NUPP_ARRAY_SIZE(sym_varnames)) {
			if (vn == 0)
				break;
		} else {
			while (q < end && *q)
				q++;
		}
		q++;
		lastpc = startpc = lastpc + sym_uleb128(&q, end);
		if (startpc > pc)
			break;
		endpc = startpc + sym_uleb128(&q, end);
		if (pc < endpc && slot-- == 0) {
			if (vn < NUPP_ARRAY_SIZE(sym_varnames))
				return sym_varnames[vn];
			snprintf(buf, size, "%.*s", (int)strnlen((const char *)name, end - name), name);
			return buf;
		}
	}
	return NULL;
}

/* Adds string constant idx of p, read at the current drain; 0 or -ENOMEM. */
static int sym_kstr_add(struct nupp_sym *s, struct sym_proto *p, __u32 idx, const char *str, size_t len)
{
	struct sym_kstr_entry *e = realloc(p->kstr, (p->nkstr + 1) * sizeof(*e));

	if (!e)
		return -ENOMEM;
	p->kstr = e;
	e[p->nkstr].idx = idx;
	e[p->nkstr].drain = s->drain;
	e[p->nkstr].str = strndup(str, len);
	if (!e[p->nkstr].str)
		return -ENOMEM;
	p->nkstr++;
	return 0;
}

/* Collectable constants of p's copy read at once by sym_kstr_load_many (the first
 * SYM_KSTR_BULK). */
static __u32 sym_nkgc(const struct sym_proto *p)
{
	__u32 nk;

	memcpy(&nk, p->mem + offsetof(GCproto, sizekgc), sizeof(nk));
	return nk < SYM_KSTR_BULK ? nk : SYM_KSTR_BULK;
}

/* Reads the string constants of the prototypes ps[n] (alive, their copies read) in one
 * vectored read, proven like a live string (sym_gc_quiet before and after: of the one
 * prototype, or for several, no VM sweeping). Each range is a
 * constant's GCstr header and the first SYM_KSTR_HEAD bytes of its text; a constant that
 * is no string, or longer, or in a range not read is left to sym_kstr's read of one.
 * The prototypes whose ranges fit in one read get kstr_bulk. 0, -EAGAIN (the GC sweeps:
 * tried again when needed), or -errno. */
static int sym_kstr_load_many(struct nupp_sym *s, struct sym_proto **ps, int n)
{
	const struct nupp_lj_layout *lo = &s->lo;
	__u32 span = lo->str_size + SYM_KSTR_HEAD, nseg = 0, cap = 0, len, i;
	struct nupp_read_seg *seg = NULL;
	__u32 *idx = NULL;
	int *of = NULL, j, done = 0, got, err = 0;
	unsigned char *bytes = NULL;
	__u64 quiet_pt = n == 1 ? ps[0]->pt : 0;

	for (j = 0; j < n; j++)
		cap += sym_nkgc(ps[j]);
	if (cap > SYM_PREFETCH_SEGS)
		cap = SYM_PREFETCH_SEGS;
	if (cap) {
		seg = malloc(cap * sizeof(*seg));
		idx = malloc(cap * sizeof(*idx));
		of = malloc(cap * sizeof(*of));
		bytes = malloc((size_t)cap * span);
		if (!seg || !idx || !of || !bytes) {
			err = -ENOMEM;
			goto out;
		}
	}
	/* Constant i of a prototype is the GCRef at k[-1 - i]. */
	for (j = 0; j < n; j++) {
		struct sym_proto *p = ps[j];
		__u64 k = sym_u64(p, offsetof(GCproto, k));
		__u32 m = sym_nkgc(p);
		const unsigned char *at;

		if (!k || !m || !(at = sym_at(p, k - 8ull * m, 8ull * m)))
			goto whole;
		if (nseg + m > cap)
			break;
		for (i = 0; i < m; i++) {
			__u64 ref;

			memcpy(&ref, at + 8ull * (m - 1 - i), sizeof(ref));
			ref &= lo->gcvmask;
			if (!ref)
				continue;
			seg[nseg].addr = ref;
			seg[nseg].buf = bytes + (size_t)nseg * span;
			seg[nseg].len = span;
			idx[nseg] = i;
			of[nseg++] = j;
		}
whole:
		done = j + 1;
	}
	if (!sym_gc_quiet(s, quiet_pt)) {
		err = -EAGAIN;
		goto out;
	}
	got = nseg ? sym_readv(s, seg, (int)nseg) : 0;
	if (got < 0) {
		err = got;
		goto out;
	}
	if (!sym_gc_quiet(s, quiet_pt)) {
		err = -EAGAIN;
		goto out;
	}
	for (i = 0; i < (__u32)got; i++) {
		const unsigned char *h = seg[i].buf;

		memcpy(&len, h + lo->str_len, sizeof(len));
		if (h[lo->pt_gct] != lo->gct_str || len > SYM_KSTR_HEAD)
			continue;
		err = sym_kstr_add(s, ps[of[i]], idx[i], (const char *)h + lo->str_size, len);
		if (err)
			goto out;
	}
	/* Those whose ranges were all read. */
	if ((__u32)got < nseg)
		done = of[got];
	for (j = 0; j < done; j++) {
		ps[j]->kstr_bulk = true;
		ps[j]->live_drain = s->drain;
	}
out:
	free(seg);
	free(idx);
	free(of);
	free(bytes);
	return err;
}

/* The string constants of one prototype (sym_kstr_load_many). */
static int sym_kstr_load(struct nupp_sym *s, struct sym_proto *p)
{
	return sym_kstr_load_many(s, &p, 1);
}

/* Reads the prototypes met since the last call (nupp_sym_born), at most max of them,
 * while they live: their allocations in two vectored reads (sizes, then the
 * allocations, checked against their fingerprints as sym_proto_read does) and their
 * string constants in one more. A program's last samples are named after it exits:
 * what it ran last may have been met since the last drain. The rest are read when a
 * sample needs them. Returns how many were read. */
int nupp_sym_prefetch(struct nupp_sym *s, int max)
{
	const struct nupp_lj_layout *lo = &s->lo;
	struct sym_proto **ps = NULL;
	struct nupp_read_seg *seg = NULL;
	__u32 *sz = NULL;
	int n = 0, m = 0, k = 0, i, got;

	if (max > s->nborn)
		max = s->nborn;
	if (max <= 0)
		goto out;
	ps = malloc(max * sizeof(*ps));
	seg = malloc(max * sizeof(*seg));
	sz = calloc(max, sizeof(*sz));
	if (!ps || !seg || !sz)
		goto out;
	for (i = 0; i < max; i++) {
		struct sym_proto *p = sym_proto_alive(s, s->born[i]);

		if (!p || p->mem || p->unusable || !p->have_fp)
			continue;
		ps[n] = p;
		seg[n] = (struct nupp_read_seg){ p->pt + lo->pt_sizept, &sz[n], sizeof(sz[n]) };
		n++;
	}
	got = n ? sym_readv(s, seg, n) : 0;
	for (i = 0; i < got; i++) {
		struct sym_proto *p = ps[i];

		if (sz[i] < lo->pt_size + 4ull * p->sizebc || sz[i] > (1u << 20))
			continue;
		seg[m] = (struct nupp_read_seg){ p->pt, malloc(sz[i]), sz[i] };
		if (!seg[m].buf)
			break;
		ps[m++] = p;
	}
	got = m ? sym_readv(s, seg, m) : 0;
	for (i = 0; i < m; i++) {
		struct sym_proto *p = ps[i];
		unsigned char *mem = seg[i].buf;

		/* Read whole, and still the prototype born. */
		if (i >= got || !sym_mem_fp_eq(lo, mem, p->chunk, p->firstline, p->sizebc)) {
			free(mem);
			continue;
		}
		sym_proto_take_live(s, p, mem, (__u32)seg[i].len);
		ps[k++] = p;
	}
	if (k)
		sym_kstr_load_many(s, ps, k);
out:
	free(ps);
	free(seg);
	free(sz);
	s->nborn = 0;
	return k;
}

/* String constant idx of p as it was read, or NULL. */
static const char *sym_kstr_find(const struct sym_proto *p, __u32 idx)
{
	int i;

	for (i = 0; i < p->nkstr; i++)
		if (p->kstr[i].idx == idx)
			return p->kstr[i].str;
	return NULL;
}

/* Collectable constant idx (negative) of the proto, a GCstr*, read as a string. */
static int sym_kstr(struct nupp_sym *s, struct sym_proto *p, __u32 idx, char *buf, size_t size)
{
	__u64 k = sym_u64(p, offsetof(GCproto, k)), str;
	const unsigned char *at = sym_at(p, k - 8ull * (idx + 1), 8);
	const char *kept;
	int err;

	if (!k || !at)
		return -EINVAL;
	kept = sym_kstr_find(p, idx);
	/* A freed prototype's constants may be freed too (the GC sweeps strings first). */
	if (!kept && p->hi != SYM_ALIVE) {
		s->refused = true;
		return -ESTALE;
	}
	/* The first one needed: all of them at once, in one read (a program's last samples
	 * are named after it exits, from what was read before). */
	if (!kept && !p->kstr_bulk && sym_kstr_load(s, p) == 0)
		kept = sym_kstr_find(p, idx);
	if (kept) {
		snprintf(buf, size, "%s", kept);
		return 0;
	}
	memcpy(&str, at, 8);
	err = sym_read_live_str(s, p->pt, str & s->lo.gcvmask, buf, size);
	if (err)
		return err;
	/* Kept for the day it is freed (lua_close frees every prototype, before strings);
	 * a failed allocation only costs that. */
	sym_kstr_add(s, p, idx, buf, strlen(buf));
	p->live_drain = s->drain;
	return 0;
}

/* Name of upvalue idx (lj_debug_uvname, lj_debug.c:218-225). */
static const char *sym_uvname(const struct sym_proto *p, __u32 idx, char *buf, size_t size)
{
	__u64 uv = sym_u64(p, offsetof(GCproto, uvinfo));
	const unsigned char *q, *end = p->mem + p->size;

	if (!uv || !(q = sym_at(p, uv, 1)))
		return "";
	while (idx && q < end)
		if (*q++ == 0)
			idx--;
	snprintf(buf, size, "%.*s", (int)strnlen((const char *)q, end - q), q);
	return buf;
}

/* What the value in slot was loaded from before pos (lj_debug_slotname,
 * lj_debug.c:246-291): a local, global, field, method or upvalue name, or NULL. */
static const char *sym_slotname(struct nupp_sym *s, struct sym_proto *p, __u32 pos, __u32 slot, char *buf,
				size_t size)
{
	const struct nupp_lj_layout *lo = &s->lo;
	const char *lname;
	__u32 ip = pos;

restart:
	lname = sym_varname(p, ip, slot, buf, size);
	if (lname)
		return lname == buf ? buf : (snprintf(buf, size, "%s", lname), buf);
	while (--ip > 0) {
		__u32 ins = sym_ins(p, lo, ip), op = ins & 0xff, ra = (ins >> 8) & 0xff;
		__u32 ma;

		if (op >= NUPP_ARRAY_SIZE(sym_bcmode))
			return NULL;
		ma = sym_bcmode[op] & 7;
		if (ma == BCMbase) {
			if (slot >= ra && (op != BC_KNIL || slot <= (ins >> 16)))
				return NULL;
		} else if (ma == BCMdst && ra == slot) {
			switch (op) {
			case BC_MOV:
				slot = ins >> 16;
				goto restart;
			case BC_GGET:
				return sym_kstr(s, p, ins >> 16, buf, size) ? NULL : buf;
			case BC_TGETS:
				return sym_kstr(s, p, (ins >> 16) & 0xff, buf, size) ? NULL : buf;
			case BC_UGET:
				return sym_uvname(p, ins >> 16, buf, size);
			default:
				return NULL;
			}
		}
	}
	return NULL;
}

static const char *sym_funcname_decode(struct nupp_sym *s, struct sym_proto *caller, __u32 pos, char *buf,
				       size_t size);

/* Writes a, then sep and b if sep is not 0, into buf (truncated to size): the names of
 * every frame of every drain go through here, so without printf. */
static void sym_join(char *buf, size_t size, const char *a, char sep, const char *b)
{
	size_t la = strlen(a), lb = sep ? strlen(b) : 0, n = 0;

	if (!size)
		return;
	if (la > size - 1)
		la = size - 1;
	memcpy(buf, a, la);
	n = la;
	if (sep && n < size - 1) {
		buf[n++] = sep;
		if (lb > size - 1 - n)
			lb = size - 1 - n;
		memcpy(buf + n, b, lb);
		n += lb;
	}
	buf[n] = 0;
}

/* Call-site names memoized per caller record, at most this many each. */
#define SYM_FNAMES_MAX 256

/* Forgets the names p's call sites gave and the frame names p gave: what they were
 * made from (its copy, chunk name or string constants) may change. Names other records
 * made with p as their caller die too: they hold p's generation, which moves. */
static void sym_memo_clear(struct sym_proto *p)
{
	int i;

	for (i = 0; i < p->nfnames; i++)
		free(p->fnames[i].name);
	free(p->fnames);
	p->fnames = NULL;
	p->nfnames = 0;
	for (i = 0; i < p->nfmemo; i++)
		free(p->fmemo[i].name);
	free(p->fmemo);
	p->fmemo = NULL;
	p->nfmemo = p->capfmemo = 0;
	p->memo_gen++;
}

/* The name caller's call at pos gives its callee (lj_debug_funcname), or NULL: decoded
 * once per caller copy and position, then kept (only a name given is kept: a refusal
 * or a string not readable yet is tried again). */
static const char *sym_funcname(struct nupp_sym *s, struct sym_proto *caller, __u32 pos, char *buf,
				size_t size)
{
	struct sym_fname *n;
	const char *r;
	int i;

	for (i = 0; i < caller->nfnames; i++)
		if (caller->fnames[i].pos == pos) {
			sym_join(buf, size, caller->fnames[i].name, 0, NULL);
			return buf;
		}
	r = sym_funcname_decode(s, caller, pos, buf, size);
	if (!r || s->refused || s->gc_busy || caller->nfnames >= SYM_FNAMES_MAX)
		return r;
	n = realloc(caller->fnames, (caller->nfnames + 1) * sizeof(*n));
	if (!n)
		return r;
	caller->fnames = n;
	n[caller->nfnames].pos = pos;
	n[caller->nfnames].name = strdup(r);
	if (n[caller->nfnames].name)
		caller->nfnames++;
	return r;
}

/* The name a caller gave the function it called at pos (lj_debug_funcname,
 * lj_debug.c:294-320), or NULL, decoded from the caller's bytecode. */
static const char *sym_funcname_decode(struct nupp_sym *s, struct sym_proto *caller, __u32 pos, char *buf,
				       size_t size)
{
	__u32 ins, op, mm;

	if (pos >= caller->sizebc)
		return NULL;
	ins = sym_ins(caller, &s->lo, pos);
	op = ins & 0xff;
	if (op >= NUPP_ARRAY_SIZE(sym_bcmode))
		return NULL;
	mm = sym_bcmode[op] >> 11;
	if (mm == MM_call) {
		__u32 slot = (ins >> 8) & 0xff;

		if (op == BC_ITERC)
			slot -= 3;
		return sym_slotname(s, caller, pos, slot, buf, size);
	}
	if (mm < NUPP_ARRAY_SIZE(sym_mmname)) {
		snprintf(buf, size, "%s", sym_mmname[mm]);
		return buf;
	}
	return NULL;
}

/* "module:line" into buf, as snprintf "%s:%d" would (cut to size), without its cost:
 * every Lua frame of every row of a drain is named so. */
static void sym_join_line(char *buf, size_t size, const char *module, __s32 line)
{
	char num[16], *p = num + sizeof(num);
	__u32 v = line < 0 ? (__u32)0 - (__u32)line : (__u32)line;

	*--p = 0;
	do
		*--p = (char)('0' + v % 10);
	while (v /= 10);
	if (line < 0)
		*--p = '-';
	sym_join(buf, size, module, ':', p);
}

/* Current line of a Lua frame (lj_debug_line, lj_debug.c:116-130), firstline if unknown. */
static __s32 sym_line(struct nupp_sym *s, const struct sym_proto *p, __s32 pos)
{
	const struct nupp_lj_layout *lo = &s->lo;
	__s32 numline;
	__u64 li = sym_u64(p, lo->pt_lineinfo);
	const unsigned char *at;

	if (pos < 0 || (__u32)pos > p->sizebc)
		return p->firstline;
	if (!li)
		return 0;
	memcpy(&numline, p->mem + lo->pt_numline, 4);
	if ((__u32)pos == p->sizebc)
		return p->firstline + numline;
	if (pos == 0)
		return p->firstline;
	pos--;
	if (numline < 256) {
		at = sym_at(p, li + pos, 1);
		return at ? p->firstline + *at : p->firstline;
	} else if (numline < 65536) {
		__u16 v;

		at = sym_at(p, li + 2ull * pos, 2);
		if (!at)
			return p->firstline;
		memcpy(&v, at, 2);
		return p->firstline + v;
	} else {
		__u32 v;

		at = sym_at(p, li + 4ull * pos, 4);
		if (!at)
			return p->firstline;
		memcpy(&v, at, 4);
		return p->firstline + (__s32)v;
	}
}

/* Uses a (borrowed) address map of the process to name C functions. */
void nupp_sym_set_addrmap(struct nupp_sym *s, struct nupp_addrmap *a)
{
	if (s->own_amap)
		nupp_addrmap_free(s->amap);
	s->amap = a;
	s->own_amap = false;
}

/* Names a C function by the ELF symbol that contains it, else by its file and address,
 * else "@0x...". Names from a symbol or a file are cached. */
static void sym_cfunc(struct nupp_sym *s, __u64 addr, char *buf, size_t size)
{
	unsigned b = sym_bucket(addr);
	struct sym_cfunc *c;
	int e;

	for (c = s->cfuncs[b]; c; c = c->next)
		if (c->addr == addr) {
			sym_join(buf, size, c->name, 0, NULL);
			return;
		}
	snprintf(buf, size, "@%#llx", (unsigned long long)addr);
	if (!s->amap && s->pid > 0) {
		s->amap = nupp_addrmap_new(s->pid);
		s->own_amap = s->amap != NULL;
		if (s->amap)
			nupp_addrmap_refresh(s->amap);
	}
	if (!s->amap)
		return;
	e = nupp_addrmap_name(s->amap, addr, buf, size);
	if (e < 0 && nupp_addrmap_refresh(s->amap) == 0)
		e = nupp_addrmap_name(s->amap, addr, buf, size);
	if (e < 0) {
		snprintf(buf, size, "@%#llx", (unsigned long long)addr);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c) {
		c->addr = addr;
		sym_join(c->name, sizeof(c->name), buf, 0, NULL);
		c->next = s->cfuncs[b];
		s->cfuncs[b] = c;
	}
}

/* Records where the function of a Lua frame just named name is defined: its chunk as
 * frames name it and its lines (firstline to firstline + numline, the line of its "end":
 * lj_parse.c sets numline = lastline - linedefined). */
static void sym_record(struct nupp_sym *s, const struct sym_proto *p, const char *name)
{
	__s32 numline;

	if (!s->frames || p->firstline < 0 || p->size < s->lo.pt_numline + 4)
		return;
	memcpy(&numline, p->mem + s->lo.pt_numline, 4);
	if (numline < 0)
		return;
	if (nupp_frame_table_add(s->frames, name, p->module, p->firstline, p->firstline + numline))
		s->frames_err = -ENOMEM;
}

/* Sets the table where named Lua frames are recorded (NULL: none); returns -ENOMEM if
 * recording failed since the last call, else 0. */
int nupp_sym_set_frames(struct nupp_sym *s, struct nupp_frame_table *t)
{
	int e = s->frames_err;

	s->frames = t;
	s->frames_err = 0;
	if (t)
		s->frames_epoch++; /* a new table: every memoised name is recorded in it again */
	return e;
}

/* Frame names memoised per record, at most this many each (then named afresh). */
#define SYM_FMEMO_MAX 256

/* p's memoised frame name of this kind, caller record and position, or NULL. */
static struct sym_fmemo *sym_fmemo_find(struct sym_proto *p, int kind, const struct sym_proto *cp, __s32 pos)
{
	int i;

	for (i = 0; i < p->nfmemo; i++) {
		struct sym_fmemo *m = &p->fmemo[i];

		if (m->kind == kind && m->pos == pos &&
		    (kind != SYM_FMEMO_CALLER || (m->cp_id == cp->id && m->cp_gen == cp->memo_gen)))
			return m;
	}
	return NULL;
}

/* Memoises the frame name p gave (just recorded in the table, if any); a failed
 * allocation only costs the memo. */
static void sym_fmemo_add(struct nupp_sym *s, struct sym_proto *p, int kind, const struct sym_proto *cp,
			  __s32 pos, const char *name)
{
	struct sym_fmemo *m;

	if (p->nfmemo >= SYM_FMEMO_MAX)
		return;
	if (p->nfmemo == p->capfmemo) {
		int cap = p->capfmemo ? 2 * p->capfmemo : 4;

		m = realloc(p->fmemo, (size_t)cap * sizeof(*m));
		if (!m)
			return;
		p->fmemo = m;
		p->capfmemo = cap;
	}
	m = &p->fmemo[p->nfmemo];
	m->name = strdup(name);
	if (!m->name)
		return;
	m->kind = (__u8)kind;
	m->pos = pos;
	m->cp_id = cp ? cp->id : 0;
	m->cp_gen = cp ? cp->memo_gen : 0;
	m->len = (__u32)strlen(name);
	m->rec_epoch = s->frames ? s->frames_epoch : 0;
	p->nfmemo++;
}

/* A memoised name used: recorded in the current table unless it is there already. */
static const char *sym_fmemo_use(struct nupp_sym *s, const struct sym_proto *p, struct sym_fmemo *m,
				 size_t *len)
{
	if (s->frames && m->rec_epoch != s->frames_epoch) {
		sym_record(s, p, m->name);
		m->rec_epoch = s->frames_epoch;
	}
	*len = m->len;
	return m->name;
}

/* The frame name just made in s->namebuf by p: recorded in the table, memoised under
 * (kind, cp, pos) when keep, given to the caller; 0. */
static int sym_fmemo_made(struct nupp_sym *s, struct sym_proto *p, int kind, const struct sym_proto *cp,
			  __s32 pos, bool keep, const char **out, size_t *len)
{
	sym_record(s, p, s->namebuf);
	if (keep)
		sym_fmemo_add(s, p, kind, cp, pos, s->namebuf);
	*out = s->namebuf;
	*len = strlen(s->namebuf);
	return 0;
}

/* Names one Lua frame (f->kind NUPP_SMP_LUA) given its caller (NULL if none): *out
 * points at the name (made in s->namebuf, or memoised), *len is its length; 0 or
 * -errno. Names are made whole (cut at SYM_NAME_MAX), whoever asks. */
static int sym_lua_frame(struct nupp_sym *s, const struct nupp_smp_frame *f, const struct nupp_smp_frame *caller,
			 __u64 pgen, const char **out, size_t *len)
{
	char *buf = s->namebuf;
	size_t size = sizeof(s->namebuf);
	struct sym_proto *p, *cp;
	struct sym_fmemo *m;
	char name[SYM_STR_MAX];
	int err = 0;

	p = sym_proto(s, f, pgen, &err);
	if (!p) {
		sym_failed_add(s, f->ptr);
		return err;
	}
	/* A bytecode builtin (firstline ~0, lj_debug.c:555-561 and 606-609): its name
	 * alone when the caller gives one, else "[builtin:name]" with no line. */
	if (s->lines) {
		m = sym_fmemo_find(p, SYM_FMEMO_LINE, NULL, f->pos);
		if (m) {
			*out = sym_fmemo_use(s, p, m, len);
			return 0;
		}
		if (p->firstline == -1)
			sym_join(buf, size, p->module, 0, NULL);
		else
			sym_join_line(buf, size, p->module, sym_line(s, p, f->pos));
		return sym_fmemo_made(s, p, SYM_FMEMO_LINE, NULL, f->pos, true, out, len);
	}
	/* Named by the caller's bytecode when called from Lua or as a metamethod. */
	if (caller && caller->kind == NUPP_SMP_LUA && caller->pos >= 0 &&
	    (f->link == s->lo.frame_lua || f->link == s->lo.frame_cont)) {
		cp = sym_proto(s, caller, pgen, &err);
		if (!cp) {
			sym_failed_add(s, caller->ptr);
			return err;
		}
		m = sym_fmemo_find(p, SYM_FMEMO_CALLER, cp, caller->pos);
		if (m) {
			*out = sym_fmemo_use(s, p, m, len);
			return 0;
		}
		s->refused = false;
		if (sym_funcname(s, cp, (__u32)caller->pos, name, sizeof(name))) {
			if (p->firstline == -1)
				sym_join(buf, size, name, 0, NULL);
			else
				sym_join(buf, size, p->module, ':', name);
			/* Only a name from the caller's copy and kept constants is kept: one
			 * that needed a string not proven yet is made again. */
			return sym_fmemo_made(s, p, SYM_FMEMO_CALLER, cp, caller->pos, !s->refused && !s->gc_busy, out,
					      len);
		}
		/* No name from the caller (maybe not yet: a string not readable now): its
		 * fallback below is not memoised under this caller. */
		if (s->gc_busy)
			return -EAGAIN; /* a name read while a VM swept: not proven yet */
		if (s->refused) {
			sym_failed_add(s, caller->ptr);
			return -ESTALE; /* jit.p would have named it; its name is gone */
		}
	}
	m = sym_fmemo_find(p, SYM_FMEMO_OWN, NULL, 0);
	if (m) {
		*out = sym_fmemo_use(s, p, m, len);
		return 0;
	}
	if (p->firstline == -1)
		sym_join(buf, size, p->module, 0, NULL);
	else
		sym_join_line(buf, size, p->module, p->firstline);
	return sym_fmemo_made(s, p, SYM_FMEMO_OWN, NULL, 0, true, out, len);
}

/* Names one frame given its caller (NULL if none): *out points at the name (held by
 * the symbolizer until its next call), *len is its length; 0 or -errno. */
static int sym_frame(struct nupp_sym *s, const struct nupp_smp_frame *f, const struct nupp_smp_frame *caller,
		     __u64 pgen, const char **out, size_t *len)
{
	char *buf = s->namebuf;
	size_t size = sizeof(s->namebuf);

	s->refused = false;
	s->gc_busy = false;
	switch (f->kind) {
	case NUPP_SMP_FF:
		if (f->ptr < NUPP_VMDEF_FFNAMES_N && nupp_vmdef_ffnames[f->ptr][0])
			sym_join(buf, size, nupp_vmdef_ffnames[f->ptr], 0, NULL);
		else
			snprintf(buf, size, "[builtin#%llu]", (unsigned long long)f->ptr);
		break;
	case NUPP_SMP_C:
		sym_cfunc(s, f->ptr, buf, size);
		break;
	case NUPP_SMP_CORO:
		sym_join(buf, size, "[coroutine]", 0, NULL);
		break;
	case NUPP_SMP_LUA:
		return sym_lua_frame(s, f, caller, pgen, out, len);
	default:
		return -EINVAL;
	}
	*out = buf;
	*len = strlen(buf);
	return 0;
}

/* Names one frame given its caller (NULL if none). */
int nupp_sym_frame(struct nupp_sym *s, const struct nupp_smp_frame *f, const struct nupp_smp_frame *caller,
		   __u64 pgen, char *buf, size_t size)
{
	const char *name;
	size_t len;
	int err = sym_frame(s, f, caller, pgen, &name, &len);

	if (!err)
		sym_join(buf, size, name, 0, NULL);
	return err;
}

/* Names frames (innermost first) as "outer;...;inner". */
int nupp_sym_stack(struct nupp_sym *s, const struct nupp_smp_frame *f, int n, __u64 pgen, char **out)
{
	/* Not before every free up to the sample is known; never across lost ones. */
	if (s->refuse_upto && pgen <= s->refuse_upto && pgen >= s->refuse_from)
		return -ESTALE;
	if (pgen > s->freed_upto)
		return -EAGAIN;
	size_t len = 0;
	char *str;
	int i, err;

	/* Joined in the symbolizer's scratch (kept from stack to stack), then copied once. */
	for (i = n - 1; i >= 0; i--) {
		const char *name;
		size_t l;

		err = sym_frame(s, &f[i], i + 1 < n ? &f[i + 1] : NULL, pgen, &name, &l);
		if (err)
			return err;
		if (len + l + 2 > s->stkcap) {
			size_t cap = (len + l + 2) * 2 > 4096 ? (len + l + 2) * 2 : 4096;
			char *ns = realloc(s->stk, cap);

			if (!ns)
				return -ENOMEM;
			s->stk = ns;
			s->stkcap = cap;
		}
		if (len)
			s->stk[len++] = ';';
		memcpy(s->stk + len, name, l);
		len += l;
	}
	str = malloc(len + 1);
	if (!str)
		return -ENOMEM;
	if (len)
		memcpy(str, s->stk, len);
	str[len] = 0;
	*out = str;
	return 0;
}

/* The allocation of the incarnation of f->ptr that generation pgen saw, as this
 * symbolizer holds it: copied from the target while it lives (checked against f's
 * fingerprint), or sent by its luajit:proto_free event (a large one's copy is cut:
 * *size says how much). For the trace decoder, which needs the bytecode of a trace's
 * prototypes after they may have died. 0 or -errno (-ESTALE: not held, cannot be read). */
int nupp_sym_proto_mem(struct nupp_sym *s, const struct nupp_smp_frame *f, __u64 pgen, const unsigned char **mem,
		       __u32 *size)
{
	struct sym_proto *p;
	int err;

	for (p = s->protos[sym_bucket(f->ptr)]; p; p = p->next)
		if (p->pt == f->ptr && p->lo <= pgen && pgen < p->hi)
			break;
	if (!p) {
		__u64 end = sym_proto_end(s, f->ptr);

		if (pgen < end || sym_proto_alive(s, f->ptr))
			return -ESTALE;
		p = sym_proto_add(s, f->ptr, end);
		if (!p)
			return -ENOMEM;
		/* A trace's prototype no event named (its trace was not copied by a sample,
		 * or its event was lost): its free may not be reported. */
		p->unwatched = true;
		s->nunwatched++;
	}
	if (p->unusable || (p->have_fp && !sym_fp_eq(p, f)))
		return -ESTALE;
	if (!p->mem) {
		if (p->hi != SYM_ALIVE)
			return -ESTALE;
		err = sym_proto_read(s, p, f);
		if (err)
			return err;
	}
	if (!p->have_fp) {
		p->chunk = f->chunkname;
		p->firstline = f->firstline;
		p->sizebc = f->sizebc;
		p->have_fp = true;
	}
	*mem = p->mem;
	*size = p->size;
	return 0;
}
