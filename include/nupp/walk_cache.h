/* The caches kept across walks: the frame cache (what a Lua frame emits and the CALL
 * before its PC, keyed by GCfunc and PC, checked by the free generation of its
 * prototype's block) and the function cache (the facts of a GCfunc, valid while its VM
 * begins no GC sweep): set hashing, tags, lookups, the way to fill, and the function
 * facts' get and fill. See NUPP_WALK_FC and NUPP_WALK_PGEN in walk_state.h for why an
 * entry is right.
 *
 * Owns the entries reached through NUPP_WALK_FC_ENTRY, NUPP_WALK_FNC_ENTRY and
 * NUPP_WALK_PGEN_AT, and the fc_* counters of a walk; reads no target memory (the
 * includer's free generation table aside) and emits no frame (the frame step and the
 * cache runs fill and use the frame cache, walk_frame.h and walk_runs.h). */
#ifndef NUPP_WALK_CACHE_H
#define NUPP_WALK_CACHE_H

#include "nupp/walk_state.h"

/* -- Frame cache ------------------------------------------------------------------- */

/* First entry of the frame cache set of a PC (its two ways are this and the next). */
NUPP_WALK_INLINE __u32 nupp_walk_fc_set(__u64 pc)
{
	__u64 h = pc * 0x9e3779b97f4a7c15ull;

	h ^= h >> 31;
	h *= 0xff51afd7ed558ccdull;
	return (__u32)(h >> 48) & (NUPP_WALK_FC - 2);
}

/* The frame cache tag of a walk: the process (tgid < 2^22), the includer's count of VM
 * lifetime events (epoch, < 2^22) and the bits of the process's count of prototype frees
 * above the 31 an entry keeps (pfrees >> 31, < 2^20): an entry last checked 2^31 frees
 * ago has another tag, never the look of one checked at this count (never 0: epoch > 0). */
NUPP_WALK_INLINE __u64 nupp_walk_fc_tag(__u64 epoch, __u32 tgid, __u64 pfrees)
{
	return (((epoch << 20) ^ (pfrees >> 31)) << 22) | (tgid & 0x3fffff);
}

/* Free generation slot of the block that holds target address a: blocks in a row take
 * slots in a row, so the prototypes of one program (allocated together) share few cache
 * lines of the table (a walk reads a slot or two per frame). */
NUPP_WALK_INLINE __u32 nupp_walk_pgen_slot(__u64 a)
{
	return (__u32)(a / NUPP_WALK_PGEN_BLOCK) & (NUPP_WALK_PGEN - 1);
}

/* The free generation of the block that holds target address a. */
NUPP_WALK_INLINE __u32 nupp_walk_pgen(struct nupp_walk *w, __u64 a)
{
	return NUPP_WALK_PGEN_AT(w, nupp_walk_pgen_slot(a));
}

/* Is cache entry c, tagged tag, one of pc whose prototype (the one it names) was not
 * freed since it was filled, and with any one that holds the CALL before pc, else the
 * one of (fn, pc)? */
NUPP_WALK_INLINE int nupp_walk_fc_is(struct nupp_walk *w, struct nupp_walk_fc *c, __u64 tag, __u64 fn, __u64 pc,
				     int any)
{
	/* One test of the key's fields (fewer branches for the BPF verifier to follow). */
	if (!c || ((c->tag ^ tag) | (c->pc ^ pc) | (any ? (__u64)!(c->pg_ins & 1) : c->fn ^ fn)))
		return 0;
	if ((c->pg_ins >> 1) == ((__u32)w->fc_pg & 0x7fffffff))
		return 1;
	w->fc_pgreads++;
	if (c->gen != nupp_walk_pgen(w, c->proto)) {
		w->fc_stale++;
		return 0;
	}
	/* Its prototype was not freed up to this walk's count of frees (none happens during
	 * a walk of its VM): from that count on, the entry needs no generation read. */
	c->pg_ins = ((__u32)w->fc_pg << 1) | (c->pg_ins & 1);
	return 1;
}

/* The cache entry of (fn, pc), or with any one of pc that holds the CALL before it; 0 if
 * none is there and valid. */
NUPP_WALK_INLINE struct nupp_walk_fc *nupp_walk_fc_look(struct nupp_walk *w, __u64 tag, __u64 fn, __u64 pc,
							 int any)
{
	__u32 set = nupp_walk_fc_set(pc);
	struct nupp_walk_fc *c = NUPP_WALK_FC_ENTRY(w, set);

	w->fc_looks++;
	if (nupp_walk_fc_is(w, c, tag, fn, pc, any))
		return c;
	c = NUPP_WALK_FC_ENTRY(w, set + 1);
	return nupp_walk_fc_is(w, c, tag, fn, pc, any) ? c : 0;
}

/* The cache entry of the frame of GCfunc fn at pc; 0 if none (always for a pc that is not
 * 4-byte aligned: no frame is at one, and a trace start frame's key is one). */
NUPP_WALK_INLINE struct nupp_walk_fc *nupp_walk_fc_find(struct nupp_walk *w, __u64 tag, __u64 fn, __u64 pc)
{
	return pc & 3 ? 0 : nupp_walk_fc_look(w, tag, fn, pc, 0);
}

/* The key of the entry of a trace's start frame whose function's bytecode is at bc. */
NUPP_WALK_INLINE __u64 nupp_walk_fc_start_key(__u64 bc)
{
	return bc + 2;
}

/* A cache entry that holds the CALL before return PC pc (any frame's at pc); 0 if none. */
NUPP_WALK_INLINE struct nupp_walk_fc *nupp_walk_fc_call(struct nupp_walk *w, __u64 tag, __u64 pc)
{
	return nupp_walk_fc_look(w, tag, 0, pc, 1);
}

/* The CALL before return PC pc from the cache (an entry of any frame at pc that holds
 * it) into *ins: 1, or 0 if none. */
NUPP_WALK_INLINE int nupp_walk_fc_call_ins(struct nupp_walk *w, __u64 tag, __u64 pc, __u32 *ins)
{
	struct nupp_walk_fc *c = nupp_walk_fc_call(w, tag, pc);

	if (!c)
		return 0;
	*ins = c->ins;
	return 1;
}

/* The includer may take it out of line (BPF: a global function, verified once rather
 * than in every state the step reaches it in). */
#ifndef NUPP_WALK_FC_CALL_INS
#define NUPP_WALK_FC_CALL_INS(w, tag, pc, ins) nupp_walk_fc_call_ins((w), (tag), (pc), (ins))
#endif

/* Of the two ways c0, c1 of a set, the entry to fill for (fn, pc): the one it has, else
 * way 0, whose entry moves to way 1 unless it is another process's or an earlier
 * epoch's; 0 if none. */
NUPP_WALK_INLINE struct nupp_walk_fc *nupp_walk_way(struct nupp_walk_fc *c0, struct nupp_walk_fc *c1, __u64 tag,
						     __u64 fn, __u64 pc)
{
	if (!c0 || !c1)
		return 0;
	if (c1->fn == fn && c1->pc == pc && c1->tag == tag)
		return c1;
	if (!(c0->fn == fn && c0->pc == pc) && c0->tag == tag)
		*c1 = *c0;
	return c0;
}

/* The frame cache entry to fill for (fn, pc) (nupp_walk_way). */
NUPP_WALK_INLINE struct nupp_walk_fc *nupp_walk_fc_way(struct nupp_walk *w, __u64 tag, __u64 fn, __u64 pc)
{
	__u32 set = nupp_walk_fc_set(pc);

	return nupp_walk_way(NUPP_WALK_FC_ENTRY(w, set), NUPP_WALK_FC_ENTRY(w, set + 1), tag, fn, pc);
}

/* -- Function cache ---------------------------------------------------------------- */

/* What a walk read of a function, kept in the function cache: the facts of a GCfunc
 * (its kind, its C function or its bytecode, and that prototype's size, first line and
 * chunk name) are immutable while it lives, and it lives from a walk that found it in a
 * frame until the VM begins a GC sweep (a function on a stack was marked before the
 * sweep under way or allocated since: no sweep begun after it was seen has freed it).
 * An entry is keyed by the function and fn | 1 as its PC (odd: never a frame's PC nor a
 * start frame's key) and holds its VM (each VM counts its own sweeps; a process may run
 * several) and that VM's count of sweeps when filled (gen), the function's
 * ptr (proto), ffid (pos), chunk, sizebc and firstline; it is used while that count is
 * the VM's. A walk that fails drops what it filled (NUPP_WALK_WATCH: noted as met with
 * that key and no prototype), since its frames are not proven genuine. */
NUPP_WALK_INLINE __u64 nupp_walk_fc_fn_key(__u64 fn)
{
	return fn | 1;
}

/* First entry of the function cache set of function fn (its two ways are this and the
 * next). */
NUPP_WALK_INLINE __u32 nupp_walk_fnc_set(__u64 fn)
{
	__u64 h = (fn >> 3) * 0x9e3779b97f4a7c15ull;

	return (__u32)(h >> 40) & (NUPP_WALK_FNC - 2);
}

/* Is entry c the facts of function fn for this walk (its tag, its VM, whose count of
 * sweeps is its own, and that count)? An entry keeps its VM's global_State in ins (low
 * half) and pg_ins (high half). */
NUPP_WALK_INLINE int nupp_walk_fc_fn_is(const struct nupp_walk *w, const struct nupp_walk_fc *c, __u64 tag,
					__u64 fn)
{
	return c && !((c->tag ^ tag) | (c->pc ^ nupp_walk_fc_fn_key(fn)) | (c->fn ^ fn) | (__u64)(c->gen ^ w->sweepno) |
		      ((((__u64)c->pg_ins << 32) | c->ins) ^ w->g));
}

/* The cache entry of the facts of function fn valid for this walk, or 0. */
NUPP_WALK_INLINE struct nupp_walk_fc *nupp_walk_fc_fn(struct nupp_walk *w, __u64 tag, __u64 fn)
{
	__u32 set = nupp_walk_fnc_set(fn);
	struct nupp_walk_fc *c = NUPP_WALK_FNC_ENTRY(w, set);

	w->fc_looks++;
	if (nupp_walk_fc_fn_is(w, c, tag, fn))
		return c;
	c = NUPP_WALK_FNC_ENTRY(w, set + 1);
	return nupp_walk_fc_fn_is(w, c, tag, fn) ? c : 0;
}

/* Keeps the facts of function fn, just read, in the cache (with NUPP_WALK_WATCH only
 * while the walk can note them, to be dropped if it fails, and still note every frame
 * it may emit after: a note taken here never costs a prototype its watch). */
NUPP_WALK_INLINE void nupp_walk_fc_fn_fill(struct nupp_walk *w, __u64 fn, const struct nupp_walk_fn *m)
{
	__u64 key = nupp_walk_fc_fn_key(fn);
	struct nupp_walk_fc *c;
	__u32 set;

#ifdef NUPP_WALK_WATCH
	struct nupp_walk_met *n;

	if (w->st.depth > w->max_depth || w->nmet + 1 + (w->max_depth - w->st.depth) > NUPP_WALK_MET)
		return;
#endif
	set = nupp_walk_fnc_set(fn);
	c = nupp_walk_way(NUPP_WALK_FNC_ENTRY(w, set), NUPP_WALK_FNC_ENTRY(w, set + 1), w->fc_tag, fn, key);
	if (!c)
		return;
	c->tag = w->fc_tag;
	c->fn = fn;
	c->pc = key;
	c->proto = m->ptr;
	c->chunk = m->chunk;
	c->sizebc = m->sizebc;
	c->firstline = m->firstline;
	c->pos = (__s32)m->ffid;
	c->ins = (__u32)w->g;
	c->gen = w->sweepno;
	c->pg_ins = (__u32)(w->g >> 32);
	w->fc_fnfills++;
#ifdef NUPP_WALK_WATCH
	n = &w->met[w->nmet & (NUPP_WALK_MET - 1)];
	n->pt = 0; /* no prototype to watch: the VM's sweeps end the entry */
	n->fn = fn;
	n->key = key;
	n->gen = 0;
	w->nmet++;
#endif
}

/* Copies the facts of function fn into memo entry m from the cache: 1, or 0 if it holds
 * none valid for this walk. */
NUPP_WALK_INLINE int nupp_walk_fc_fn_get(struct nupp_walk *w, __u64 fn, struct nupp_walk_fn *m)
{
	struct nupp_walk_fc *c = nupp_walk_fc_fn(w, w->fc_tag, fn);

	if (!c)
		return 0;
	m->fn = fn;
	m->gen = w->gen;
	m->ptr = c->proto;
	m->chunk = c->chunk;
	m->sizebc = c->sizebc;
	m->firstline = c->firstline;
	m->ffid = (__u32)c->pos;
	w->fc_fns++;
	return 1;
}

/* The includer may take these two out of line (BPF: global functions, verified once). */
#ifndef NUPP_WALK_FC_FN_GET
#define NUPP_WALK_FC_FN_GET(w, fn, m) nupp_walk_fc_fn_get((w), (fn), (m))
#endif
#ifndef NUPP_WALK_FC_FN_FILL
#define NUPP_WALK_FC_FN_FILL(w, fn, m) nupp_walk_fc_fn_fill((w), (fn), (m))
#endif

#endif /* NUPP_WALK_CACHE_H */
