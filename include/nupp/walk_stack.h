/* The stack a walk builds: the hash of its frames, appending and relinking frame
 * records, the end of a cut stack, the helper and vmstate marks of the sample, and the
 * key of a finished stack (its frames and its prototypes' free generations).
 *
 * Owns w->st and the hash and key fields (hash, gmix, last_gen); reads no target memory
 * and decides nothing about which frame comes next (walk_frame.h does). */
#ifndef NUPP_WALK_STACK_H
#define NUPP_WALK_STACK_H

#include "nupp/walk_state.h"

/* Mixes one 64-bit word into the stack hash. */
NUPP_WALK_INLINE __u64 nupp_walk_mix(__u64 h, __u64 v)
{
	h ^= v;
	h *= 0x100000001b3ull;
	return h ^ (h >> 29);
}

/* Maps a vmstate value to the sample's state (enum nupp_smp_state). */
NUPP_WALK_INLINE __u32 nupp_walk_state(const struct nupp_lj_layout *lo, __s32 vmstate)
{
	if (vmstate >= 0)
		return NUPP_SMP_COMPILED;
	if (vmstate == lo->vmst_interp)
		return NUPP_SMP_INTERPRETED;
	if (vmstate == lo->vmst_c)
		return NUPP_SMP_CCODE;
	if (vmstate == lo->vmst_gc)
		return NUPP_SMP_COLLECTING;
	return NUPP_SMP_COMPILING; /* EXIT, RECORD, OPT, ASM (lj_obj.h:528-537) */
}

/* Mixes a frame record into the stack hash. */
NUPP_WALK_INLINE __u64 nupp_walk_mix_frame(__u64 h, const struct nupp_smp_frame *f)
{
	h = nupp_walk_mix(h, f->ptr ^ ((__u64)f->kind << 56));
	h = nupp_walk_mix(h, f->chunkname ^ ((__u64)(__u32)f->pos << 32) ^ (__u32)f->firstline);
	return nupp_walk_mix(h, ((__u64)f->sizebc << 8) | f->link);
}

/* Ends the walk with the frames emitted so far: the leaf-most ones of a deeper stack. */
NUPP_WALK_INLINE void nupp_walk_cut(struct nupp_walk *w)
{
	w->st.flags |= NUPP_SMP_F_CUT;
	w->result = NUPP_WALK_DONE;
}

/* The leaf takes SAVE_PC below a helper's call site: flag it for userspace's check. */
NUPP_WALK_INLINE void nupp_walk_helper(struct nupp_walk *w)
{
	w->st.flags |= NUPP_SMP_F_HELPER;
	w->st.callsite = w->helper_ra;
	w->hash = nupp_walk_mix(w->hash, w->helper_ra);
}

/* Appends a frame (innermost first); a full stack ends the walk, cut (nupp_walk_cut). */
NUPP_WALK_INLINE int nupp_walk_emit(struct nupp_walk *w, __u8 kind, __u64 ptr, __u64 chunk,
				    __s32 firstline, __u32 sizebc, __s32 pos, __u8 link)
{
	__u32 d = w->st.depth;
	struct nupp_smp_frame *f;

	if (d >= w->max_depth || d >= NUPP_SMP_MAX_DEPTH) {
		nupp_walk_cut(w);
		return -1;
	}
	f = &w->st.frames[d & (NUPP_SMP_MAX_DEPTH - 1)];
	f->ptr = ptr;
	f->chunkname = chunk;
	f->firstline = firstline;
	f->sizebc = sizebc;
	f->pos = pos;
	f->kind = kind;
	f->link = link;
	f->pad = 0;
	w->hash = nupp_walk_mix_frame(w->hash, f);
#ifdef NUPP_WALK_EMIT_HOOK
	NUPP_WALK_EMIT_HOOK(w, d); /* userspace only: where the frame lies */
#endif
	w->st.depth = d + 1;
	return 0;
}

/* Sets the link type of the last emitted frame (a vararg frame's real caller link). */
NUPP_WALK_INLINE void nupp_walk_relink(struct nupp_walk *w, __u8 link)
{
	__u32 d = w->st.depth;

	if (d > 0 && d <= NUPP_SMP_MAX_DEPTH) {
		w->st.frames[(d - 1) & (NUPP_SMP_MAX_DEPTH - 1)].link = link;
		w->hash = nupp_walk_mix(w->hash, 0x5a00u | link);
	}
}

/* Mixes the free generation of an emitted Lua frame's GCproto block into the key. */
NUPP_WALK_INLINE void nupp_walk_gen_add(struct nupp_walk *w, __u32 gen)
{
	w->gmix = nupp_walk_mix(w->gmix, gen);
	w->last_gen = gen;
}

/* The key of the stack of a finished walk: its frames (on a trace, with the trace's
 * serial: another trace made at the same addresses gives another key) and the
 * incarnation of each Lua frame's prototype (the free generations of their blocks: a
 * prototype freed and another made at its address gives another key, a free elsewhere
 * does not). */
NUPP_WALK_INLINE __u64 nupp_walk_key(const struct nupp_walk *w)
{
	return nupp_walk_mix(w->hash, w->gmix);
}

#endif /* NUPP_WALK_STACK_H */
