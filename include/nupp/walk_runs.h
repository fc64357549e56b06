/* Runs of frames a step takes without its full reads: a recursion's repeated frames
 * (nupp_walk_repeat), frame cache hits in a row (nupp_walk_cached) and a C or fast
 * function's frame whose facts are known (nupp_walk_cframe), each from the stack window
 * with the walk's state in registers, each emitting exactly what as many full steps
 * (nupp_walk_step) would.
 *
 * Owns the run loops and the NUPP_WALK_*_RUN hooks the step calls them through; reads
 * no target memory (the window and the caches only) and fills no cache entry. */
#ifndef NUPP_WALK_RUNS_H
#define NUPP_WALK_RUNS_H

#include "nupp/walk_read.h"
#include "nupp/walk_stack.h"

/* Recursion: a frame whose function and link are those of the Lua frame above it, whose
 * PC was that same link, emits the same frame record one frame lower (everything a frame
 * emits follows from its GCfunc, its PC and its link; the memo holds the rest). Takes up
 * to NUPP_WALK_REPEAT such frames from the stack window, state kept in registers;
 * returns how many. */
#define NUPP_WALK_REPEAT 16
NUPP_WALK_INLINE __u32 nupp_walk_repeat(struct nupp_walk *w)
{
	__u64 frame = w->frame, bot = w->bot, wlo = w->win_lo, whi = w->win_hi, fnv = w->rep_fn;
	__u64 lk = w->rep_link, delta = w->rep_delta, gcv = w->rep_gcv, h = w->hash, hdr[2], gm = w->gmix;
	__u32 d = w->st.depth, maxd = w->max_depth, k, di, gen = w->last_gen;
	struct nupp_smp_frame rec;

	if (!delta || w->skip || !w->iter || w->result != NUPP_WALK_RUN || w->pc_above != lk || !d)
		return 0;
	rec = w->st.frames[(d - 1) & (NUPP_SMP_MAX_DEPTH - 1)];
	for (k = 0; k < NUPP_WALK_REPEAT; k++) {
		if (frame <= bot || frame - 8 < wlo || frame + 8 > whi)
			break;
		__builtin_memcpy(hdr, w->win + ((frame - 8 - wlo) & (NUPP_WALK_WIN - 1)), 16);
		if ((hdr[0] & gcv) != fnv || hdr[1] != lk)
			break;
		if (d >= maxd || d >= NUPP_SMP_MAX_DEPTH) {
			nupp_walk_cut(w);
			break;
		}
		di = d;
		__asm__ volatile("" : "+r"(di)); /* keep the mask the verifier needs */
		w->st.frames[di & (NUPP_SMP_MAX_DEPTH - 1)] = rec;
		h = nupp_walk_mix_frame(h, &rec);
		gm = nupp_walk_mix(gm, gen); /* the same prototype: the same block */
		d++;
		frame -= delta;
	}
	w->frame = frame;
	w->hash = h;
	w->gmix = gm;
	w->st.depth = d;
	w->iter += k;
	return k;
}

/* Frames taken from the cache in a row at most (each one is verified once per count). */
#define NUPP_WALK_CACHED 8

/* Frame cache hits in a row: Lua frames below a Lua link whose entry is cached, linked
 * by a Lua, C, pcall or vararg link (a continuation link goes through the full step),
 * emitted from the stack window with the walk's state in registers. Emits exactly what
 * nupp_walk_step would on those hits; returns how many frames it took (0: none).
 *
 * A vararg function's frame (BC_IFUNCV) has a vararg link down to its pseudo-frame, the
 * original call, which holds the same function and the link of that call: the full step
 * emits the frame, then steps over the pseudo-frame without reading it (it holds the
 * function the hit stands for) and relinks the frame emitted to the pseudo-frame's link.
 * A run that takes such a frame ends there, and takes the pseudo-frame too (once, after
 * its loop: fewer instructions to verify) when its header is in the window, holds that
 * function, and its link is a Lua link whose CALL the cache holds or a C or pcall link;
 * otherwise the walk is left as the full step leaves it above the pseudo-frame (skip
 * set), and the next step goes on from there. */
NUPP_WALK_INLINE __u32 nupp_walk_cached(struct nupp_walk *w, const struct nupp_lj_layout *lo)
{
	__u64 frame = w->frame, bot = w->bot, wlo = w->win_lo, whi = w->win_hi, pca = w->pc_above, h = w->hash;
	__u64 tag = w->fc_tag, gcv = lo->gcvmask, L = w->L, hdr[2], fn, link, next, rep = 0, ipc = 0, gm = w->gmix;
	__u64 vlink = 0, vfn = 0;
	__u32 d = w->st.depth, maxd = w->max_depth, k, di, t, vt, flua = lo->frame_lua, ash = lo->bc_a_shift & 31;
	__u32 ins = 0, ci_ins = 0, gen = w->last_gen, steps = 0;
	struct nupp_walk_fc *c, *ci = 0;
	struct nupp_smp_frame rec;

	if (!tag || !pca || w->skip || !w->iter || w->result != NUPP_WALK_RUN)
		return 0;
	for (k = 0; k < NUPP_WALK_CACHED; k++) {
		if (!pca || frame <= bot || frame - 8 < wlo || frame + 8 > whi)
			break;
		__builtin_memcpy(hdr, w->win + ((frame - 8 - wlo) & (NUPP_WALK_WIN - 1)), 16);
		fn = hdr[0] & gcv;
		link = hdr[1];
		if (fn == L)
			break; /* a dummy frame */
		t = (link & lo->frame_type) == flua ? flua : (__u32)(link & lo->frame_typep);
		if (t == lo->frame_cont)
			break;
		/* The entry that gave the CALL before this frame's PC (the last frame's link)
		 * is nearly always this frame's own: checked for this walk's count of frees
		 * already, it takes no second lookup. */
		if (ci && ci->fn == fn && ci->pc == pca)
			c = ci;
		else
			c = nupp_walk_fc_find(w, tag, fn, pca);
		if (!c)
			break;
		ci = 0;
		if (t == flua) {
			ci = nupp_walk_fc_call(w, tag, link); /* the caller's entry at this link */
			if (!ci)
				break;
			ci_ins = ci->ins; /* ins only once this frame is taken: it goes with ipc */
			next = frame - 8 * (2 + ((ci_ins >> ash) & 0xff)); /* tv_size 8, LJ_FR2 */
		} else {
			next = frame - (link & ~(__u64)lo->frame_typep);
		}
		if (next >= frame || (next & 7))
			break; /* the full step says why */
		if (d >= maxd || d >= NUPP_SMP_MAX_DEPTH) {
			nupp_walk_cut(w);
			break;
		}
		rec.ptr = c->proto;
		rec.chunkname = c->chunk;
		rec.firstline = c->firstline;
		rec.sizebc = c->sizebc;
		rec.pos = c->pos;
		rec.kind = NUPP_SMP_LUA;
		rec.link = (__u8)t;
		rec.pad = 0;
		di = d;
		__asm__ volatile("" : "+r"(di)); /* keep the mask the verifier needs */
		w->st.frames[di & (NUPP_SMP_MAX_DEPTH - 1)] = rec;
		h = nupp_walk_mix_frame(h, &rec);
		/* A hit's generation is its block's now (nupp_walk_fc_is). */
		gen = c->gen;
		gm = nupp_walk_mix(gm, gen);
		d++;
		steps++;
		pca = t == flua ? link : 0;
		ipc = pca; /* its CALL is ins */
		ins = ci_ins;
		if (t == flua && c->pc == link) {
			/* Recursion (its PC is its own link): nupp_walk_repeat, without lookups. */
			rep = frame - next;
			w->rep_fn = fn;
			w->rep_link = link;
			w->rep_gcv = gcv;
		}
		frame = next;
		if (rep) {
			k++;
			break;
		}
		if (t == lo->frame_varg) {
			/* Above the pseudo-frame, as the full step leaves it (taken below). */
			vfn = fn;
			ins = 0;
			k++;
			break;
		}
	}
	/* The pseudo-frame of a vararg frame just taken, out of the loop (verified once). */
	if (vfn && frame > bot && frame - 8 >= wlo && frame + 8 <= whi) {
		__builtin_memcpy(hdr, w->win + ((frame - 8 - wlo) & (NUPP_WALK_WIN - 1)), 16);
		vlink = hdr[1];
		vt = (vlink & lo->frame_type) == flua ? flua : (__u32)(vlink & lo->frame_typep);
		c = 0;
		if ((hdr[0] & gcv) != vfn || vt == lo->frame_cont || vt == lo->frame_varg)
			next = frame;
		else if (vt == flua)
			next = (c = nupp_walk_fc_call(w, tag, vlink)) ? frame - 8 * (2 + ((c->ins >> ash) & 0xff)) : frame;
		else
			next = frame - (vlink & ~(__u64)lo->frame_typep);
		if (next < frame && !(next & 7) && (vt != flua || c) && d > 0) {
			/* nupp_walk_relink: the frame emitted was called by the original call. */
			di = d - 1;
			__asm__ volatile("" : "+r"(di));
			w->st.frames[di & (NUPP_SMP_MAX_DEPTH - 1)].link = (__u8)vt;
			h = nupp_walk_mix(h, 0x5a00u | (__u8)vt);
			vfn = 0;
			steps++;
			pca = c ? vlink : 0;
			ipc = pca;
			ins = c ? c->ins : 0;
			frame = next;
		}
	}
	if (k) {
		w->frame = frame;
		w->hash = h;
		w->gmix = gm;
		w->last_gen = gen;
		w->st.depth = d;
		w->pc_above = pca;
		w->iter += steps;
		w->fc_hits += k;
		w->rep_delta = rep;
		w->ins_pc = ipc;
		w->ins_val = ins;
		if (vfn) {
			w->skip = 1;
			w->skip_fn = vfn;
		}
	}
	return k;
}

/* The frame of a C or fast function (pcall, xpcall, require) below a C or pcall link,
 * when its facts are in the walk's memo or the function cache: emits exactly what
 * nupp_walk_step would, without its reads and lookups, so that a run of cache hits
 * (nupp_walk_cached) goes on below it in the same step. Returns 1 when it took it. */
NUPP_WALK_INLINE int nupp_walk_cframe(struct nupp_walk *w, const struct nupp_lj_layout *lo)
{
	__u64 frame = w->frame, wlo = w->win_lo, tag = w->fc_tag, hdr[2], fn, link, next;
	__u32 t, ins = 0, flua = lo->frame_lua;
	struct nupp_walk_fc *ci;
	struct nupp_walk_fn *m;

	if (!tag || w->pc_above || w->skip || !w->iter || w->result != NUPP_WALK_RUN)
		return 0;
	if (frame <= w->bot || frame - 8 < wlo || frame + 8 > w->win_hi)
		return 0;
	__builtin_memcpy(hdr, w->win + ((frame - 8 - wlo) & (NUPP_WALK_WIN - 1)), 16);
	fn = hdr[0] & lo->gcvmask;
	link = hdr[1];
	t = (link & lo->frame_type) == flua ? flua : (__u32)(link & lo->frame_typep);
	if (fn == w->L || t == lo->frame_cont || t == lo->frame_varg)
		return 0;
	m = &w->fns[nupp_walk_slot(fn)];
	if (!(m->fn == fn && m->gen == w->gen) && !NUPP_WALK_FC_FN_GET(w, fn, m))
		return 0;
	if (m->ffid == lo->ff_lua)
		return 0; /* a Lua function without a PC: the full step */
	if (t == flua) {
		ci = nupp_walk_fc_call(w, tag, link); /* the caller's entry at this link */
		if (!ci)
			return 0;
		ins = ci->ins;
		next = frame - 8 * (2 + ((ins >> (lo->bc_a_shift & 31)) & 0xff)); /* tv_size 8, LJ_FR2 */
	} else {
		next = frame - (link & ~(__u64)lo->frame_typep);
	}
	if (next >= frame || (next & 7))
		return 0; /* the full step says why */
	if (nupp_walk_emit(w, m->ffid == lo->ff_c ? NUPP_SMP_C : NUPP_SMP_FF, m->ffid == lo->ff_c ? m->ptr : m->ffid,
			   0, 0, 0, -1, (__u8)t))
		return 1; /* a full stack: cut */
	w->pc_above = t == flua ? link : 0;
	w->ins_pc = w->pc_above; /* the CALL before a Lua link, for the frame below */
	w->ins_val = ins;
	w->rep_delta = 0; /* a repeat run goes on from a Lua frame only */
	w->frame = next;
	w->iter++;
	return 1;
}

/* The includer may run the repeat and cache-hit loops apart (in BPF, as functions the
 * verifier checks once on their own rather than inside every step). */
#ifndef NUPP_WALK_REPEAT_RUN
#define NUPP_WALK_REPEAT_RUN(w) nupp_walk_repeat(w)
#endif
#ifndef NUPP_WALK_CACHED_RUN
#define NUPP_WALK_CACHED_RUN(w, lo) nupp_walk_cached((w), (lo))
#endif
#ifndef NUPP_WALK_CFRAME_RUN
#define NUPP_WALK_CFRAME_RUN(w, lo) nupp_walk_cframe((w), (lo))
#endif

#endif /* NUPP_WALK_RUNS_H */
