/* The prototype ledger: each prototype a sample met, by incarnation (the generations
 * [lo, hi) of the samples that saw it), from its birth, its frees and the generations the
 * sampler reported; a sample's prototype is the incarnation of its generation, read once
 * from the target and checked by fingerprint. The generations follow the protocol of
 * nupp/proto_gen.h (nupp_pgen_end). It names nothing: symbolize_name.c does. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolize_priv.h"

/* A new incarnation record of pt for generations [lo, SYM_ALIVE). */
struct sym_proto *sym_proto_add(struct nupp_sym *s, __u64 pt, __u64 lo)
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
struct sym_proto *sym_proto_alive(struct nupp_sym *s, __u64 pt)
{
	struct sym_proto *p = sym_proto_newest(s, pt);

	return p && p->hi == SYM_ALIVE ? p : NULL;
}

/* Where the generations of pt's freed records end: its next incarnation starts there. */
__u64 sym_proto_end(struct nupp_sym *s, __u64 pt)
{
	struct sym_proto *p;

	for (p = s->protos[sym_bucket(pt)]; p; p = p->next)
		if (p->pt == pt && p->hi != SYM_ALIVE)
			return p->hi;
	return 0;
}

/* Whether f's fingerprint is p's. */
bool sym_fp_eq(const struct sym_proto *p, const struct nupp_smp_frame *f)
{
	return p->chunk == f->chunkname && p->firstline == f->firstline && p->sizebc == f->sizebc;
}

/* Whether a prototype's copy mem holds this fingerprint (chunk name, first line,
 * bytecode size): a freed and reused address does not. */
bool sym_mem_fp_eq(const struct nupp_lj_layout *lo, const unsigned char *mem, __u64 chunk,
			  __s32 firstline, __u32 sizebc)
{
	return *(const __u64 *)(mem + lo->pt_chunkname) == chunk &&
	       *(const __s32 *)(mem + lo->pt_firstline) == firstline && *(const __u32 *)(mem + lo->pt_sizebc) == sizebc;
}

/* Makes mem (size bytes, just read from the target) p's copy. */
void sym_proto_take_live(struct nupp_sym *s, struct sym_proto *p, unsigned char *mem, __u32 size)
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
int sym_proto_read(struct nupp_sym *s, struct sym_proto *p, const struct nupp_smp_frame *f)
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
struct sym_proto *sym_proto(struct nupp_sym *s, const struct nupp_smp_frame *f, __u64 pgen, int *err)
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
		sym_proto_end_at(s, p, nupp_pgen_end(p->lo, pgen));
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
void sym_failed_add(struct nupp_sym *s, __u64 pt)
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
	sym_proto_end_at(s, p, nupp_pgen_end(p->lo, pgen));
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
	if (!p || (p->hi == SYM_ALIVE ? p->lo != pgen : p->hi != nupp_pgen_end(p->lo, pgen)))
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
