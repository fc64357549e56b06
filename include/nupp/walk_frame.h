/* One frame step: the current frame's header, its function and PC (validated inside
 * its prototype, or taken from the frame cache), the frame record it emits, the frame
 * cache entry it fills, and the link down to the frame below; at a lua_State's bottom,
 * the move into the coroutine that resumed it (nupp_walk_chain); and the bounded loop of
 * steps host C uses (BPF runs the steps with bpf_loop).
 *
 * Owns the walk's movement (frame, pc_above, skip, iter, result, why); where a walk
 * begins is nupp_walk_start's (walk_start.h). The lines NUPP_WALK_GOTO records in w->why
 * are lines of this file. */
#ifndef NUPP_WALK_FRAME_H
#define NUPP_WALK_FRAME_H

#include "nupp/walk_runs.h"

/* Jumps to a failure label, remembering the walker line that failed (diagnosis). */
#define NUPP_WALK_GOTO(label)            \
	do {                             \
		w->why = __LINE__;       \
		goto label;              \
	} while (0)

/* At the bottom of a lua_State's stack: the main thread ends the walk; a coroutine
 * continues in the lua_State that resumed it via coroutine.resume/wrap
 * (vm_x64.dasc:1511-1536, 572-577). A coroutine whose resumer cannot be validated
 * (lua_resume from C, a yield in progress) ends with a [coroutine] separator as root. */
NUPP_WALK_INLINE int nupp_walk_chain(struct nupp_walk *w, const struct nupp_lj_layout *lo)
{
	__u64 cf, prev = 0, pcf, pL = 0, pcfr, glref, base, stack, spc = 0;
	__u32 stacksize;
	int k;

	if (w->L == w->g + (__s64)lo->gg_g2l) {
		w->result = NUPP_WALK_DONE; /* the main thread's bottom (lj_state.c:134-136) */
		return 1;
	}
	/* Lbuf holds w->L (read at the start or by the previous chaining). */
	cf = nupp_walk_u64(w->Lbuf, lo->L_cframe, 127) & lo->cframe_rawmask;
	if (!cf)
		goto unchained;
	/* The outermost C frame of the coroutine is the one with SAVE_CFRAME == 0 (the
	 * recorder's or a lua_call's C frames sit above it). */
	for (k = 0; k < 4; k++) {
		if (NUPP_WALK_RD(&prev, 8, cf + lo->cframe_ofs_prev))
			NUPP_WALK_GOTO(fault);
		if (!prev)
			break;
		cf = prev & lo->cframe_rawmask;
	}
	if (prev)
		goto unchained;
	/* vm_resume pushed CFRAME_SIZE bytes below the resumer's C frame. */
	pcf = cf + lo->cframe_size;
	if (NUPP_WALK_RD(&pL, 8, pcf + lo->cframe_ofs_L) || !pL || (pL & 7))
		goto unchained;
	/* The resumer's lua_State in one read: cframe, glref, base, stack, stacksize. */
	if (NUPP_WALK_RD(w->Lbuf, NUPP_WALK_L_READ, pL))
		goto unchained;
	pcfr = nupp_walk_u64(w->Lbuf, lo->L_cframe, 127);
	glref = nupp_walk_u64(w->Lbuf, lo->L_glref, 127);
	if ((pcfr & lo->cframe_rawmask) != pcf || glref != w->g)
		goto unchained;
	if (w->coro >= NUPP_SMP_MAX_CORO) {
		nupp_walk_cut(w); /* the resumers beyond are left out */
		return 1;
	}
	if (NUPP_WALK_RD(&spc, 8, pcf + lo->cframe_ofs_pc))
		NUPP_WALK_GOTO(fault);
	base = nupp_walk_u64(w->Lbuf, lo->L_base, 127);
	stack = nupp_walk_u64(w->Lbuf, lo->L_stack, 127);
	stacksize = nupp_walk_u32(w->Lbuf, lo->L_stacksize, 127);
	if (nupp_walk_emit(w, NUPP_SMP_CORO, w->L, 0, 0, 0, -1, 0))
		return 1;
	w->coro++;
	w->rep_delta = 0;
	w->L = pL;
	w->frame = base - lo->tv_size;
	w->bot = stack + (__u64)lo->tv_size * lo->fr2;
	w->stk_lo = stack;
	w->stk_hi = stack + (__u64)lo->tv_size * stacksize;
	w->pc_above = 0;
	w->ins_pc = 0; /* no CALL known for the resumer's leaf */
	w->leaf_pc[0] = spc;
	w->leaf_pc[1] = 0;
	w->iter = 0;
	w->mode = NUPP_WALK_MEM;
	w->skip = 0;
	return 0;
unchained:
	if (nupp_walk_emit(w, NUPP_SMP_CORO, w->L, 0, 0, 0, -1, 0))
		return 1;
	w->result = NUPP_WALK_DONE;
	return 1;
fault:
	w->result = NUPP_WALK_READ_FAULT;
	return 1;
}

/* Is pc the return PC (one past an instruction) inside bytecode [bc, bc + 4*sizebc)? */
NUPP_WALK_INLINE int nupp_walk_pc_in(__u64 pc, __u64 bc, __u32 sizebc)
{
	return pc > bc && pc <= bc + 4ull * sizebc && !(pc & 3);
}

/* One step of the bounded walk (NUPP_WALK_MAX_ITER steps at most): emits the current
 * frame (or, from the caches, a run of frames) and moves to the one below. Returns 1 when
 * the walk is over (w->result says why), 0 to continue: a stack cut inside a cache run or
 * nupp_walk_cframe ends at the next step. */
NUPP_WALK_INLINE int nupp_walk_step(struct nupp_walk *w, const struct nupp_lj_layout *lo)
{
	__u64 frame, link = 0, fn, bc = 0, pc = 0, next, hdr[2], cand = 0;
	__u64 gg = w->g + (__s64)lo->gg_g2l, tvsz = lo->tv_size;
	__u32 sizebc = 0, ins = 0, t, pgn = 0;
	__s32 pos = -1;
	__u8 ffid = 0, skip, lt;
	int first, e, hit = 0;
	struct nupp_walk_fn *f = 0;
	struct nupp_walk_fc *c = 0;

	if (w->rep_delta && NUPP_WALK_REPEAT_RUN(w))
		return 0;
	if (!w->pc_above && w->iter && !w->skip && NUPP_WALK_CFRAME_RUN(w, lo)) {
		NUPP_WALK_CACHED_RUN(w, lo); /* and the frames below it */
		return 0;
	}
	if (NUPP_WALK_CACHED_RUN(w, lo))
		return 0;
	frame = w->frame;
	skip = w->skip;
	first = w->iter == 0;
	if (w->result != NUPP_WALK_RUN)
		return 1;
	if (frame <= w->bot)
		return nupp_walk_chain(w, lo);
	w->skip = 0;
	/* FR2 frame header: [frame-8] function TValue, [frame] link (lj_frame.h:33-51). */
	if (nupp_walk_hdr(w, frame, hdr))
		NUPP_WALK_GOTO(fault);
	link = hdr[1];
	fn = hdr[0] & lo->gcvmask;
	w->rep_delta = 0;
	lt = (link & lo->frame_type) == lo->frame_lua ? (__u8)lo->frame_lua : (__u8)(link & lo->frame_typep);
	if (fn == w->L)
		goto step; /* dummy frame (lj_debug.c:30-31) */
	/* A vararg pseudo-frame repeats the call of the frame above it (lj_debug.c:40-42) and
	 * emits nothing: when it holds the function that frame validated (read in this walk
	 * or taken from the frame cache), reading it again would only find the same. */
	if (skip && fn == w->skip_fn)
		goto step;
	/* The PC a Lua frame would take from its caller's link or, for the leaf, from the
	 * first candidate: a cache hit means it lies inside the function's prototype, so the
	 * reads below would choose it too. */
	cand = first ? w->leaf_pc[0] : w->pc_above;
	if (w->fc_tag && !skip && cand) {
		c = nupp_walk_fc_find(w, w->fc_tag, fn, cand);
		if (c) {
			if (nupp_walk_emit(w, NUPP_SMP_LUA, c->proto, c->chunk, c->firstline, c->sizebc, c->pos,
					   lt))
				return 1;
			nupp_walk_gen_add(w, c->gen);
			if (!(c->pg_ins & 1) && w->ins_pc == cand) {
				c->ins = w->ins_val; /* the CALL before it, read since */
				c->pg_ins |= 1;
			}
			pc = cand;
			hit = 1;
			w->fc_hits++;
			goto step;
		}
	}
	if (w->fc_tag && !skip && first && w->mode == NUPP_WALK_TRACE) {
		/* A trace's start frame: keyed by its bytecode, from the function's facts (kept
		 * in the cache, else read with its prototype and kept: see NUPP_WALK_FC). */
		struct nupp_walk_fn *m = 0;

		cand = NUPP_WALK_FUNC(w, lo, fn, &m) || !m || m->ffid != lo->ff_lua ? 0 : m->ptr;
		cand = cand ? nupp_walk_fc_start_key(cand) : 0;
		c = cand ? nupp_walk_fc_look(w, w->fc_tag, fn, cand, 0) : 0;
		if (c) {
			if (nupp_walk_emit(w, NUPP_SMP_LUA, c->proto, c->chunk, c->firstline, c->sizebc, c->pos,
					   lt))
				return 1;
			nupp_walk_gen_add(w, c->gen);
			hit = 1;
			w->fc_hits++;
			goto step;
		}
	}
	e = NUPP_WALK_FUNC(w, lo, fn, &f);
	if (e == 1)
		NUPP_WALK_GOTO(window); /* unreadable or not a function */
	if (e || !f)
		NUPP_WALK_GOTO(fault); /* its GCproto unreadable */
	ffid = (__u8)f->ffid;
	if (ffid == lo->ff_lua) {
		bc = f->ptr;
		sizebc = f->sizebc;
		if (nupp_walk_pc_in(w->pc_above, bc, sizebc))
			pc = w->pc_above;
		else if (first && w->leaf_pc[0] == bc && w->mode == NUPP_WALK_REGS)
			pc = bc + lo->bcins_size; /* ins_call just loaded fn->pc: at FUNCF, pos 0 */
		else if (first && nupp_walk_pc_in(w->leaf_pc[0], bc, sizebc))
			pc = w->leaf_pc[0];
		else if (first && w->mode == NUPP_WALK_MEM && (!w->strict || w->helper_ra) &&
			 nupp_walk_pc_in(w->leaf_pc[1], bc, sizebc)) {
			pc = w->leaf_pc[1];
			if (w->strict)
				nupp_walk_helper(w);
		}
		if (!pc && !skip) {
			/* Registers mode, leaf: rbx outside the function = call/return window. */
			if (first && w->mode == NUPP_WALK_REGS)
				NUPP_WALK_GOTO(window);
			/* INTERP in a C helper: a base whose leaf does not hold rbx (or SAVE_PC,
			 * below a helper's call site) is stale; below a helper's call site it is
			 * the leaf's if that call stored L->base, with no position unless it
			 * stored SAVE_PC too (lj_dispatch_ins, vm_x64.dasc:2236-2242, stores
			 * SAVE_PC itself, lj_dispatch.c:406): userspace checks which it was. */
			if (first && w->strict && !w->helper_ra)
				NUPP_WALK_GOTO(bad);
			if (first && w->strict) {
				nupp_walk_helper(w);
				w->st.flags |= NUPP_SMP_F_NOPC;
				w->hash = nupp_walk_mix(w->hash, NUPP_SMP_F_NOPC);
			}
			/* A Lua caller reached through a Lua or continuation link must contain
			 * the return PC: a stale or garbage link is refused, never guessed. */
			if (!first && w->pc_above)
				NUPP_WALK_GOTO(bad);
			/* Leaf in memory mode without a PC, a trace's start frame (the PC
			 * comes from the snapshot), or a frame called from C: no position. */
		}
		if (!skip) {
			if (pc)
				pos = (__s32)((pc - bc) / 4) - 1;
			if (nupp_walk_emit(w, NUPP_SMP_LUA, bc - lo->pt_size, f->chunk, f->firstline, sizebc,
					   pos, lt))
				return 1;
			/* Read once: the key's, and a fill's (no prototype of this VM is freed
			 * during its walk). */
			pgn = nupp_walk_pgen(w, bc - lo->pt_size);
			nupp_walk_gen_add(w, pgn);
#ifdef NUPP_WALK_WATCH
			/* Noted for the includer, who watches the prototypes of a walk that gave
			 * a stack (a frame of a failed walk is not proven genuine) and drops the
			 * cache entries a failed walk filled. A frame from the cache was noted
			 * when its entry was filled; its entry dies with its prototype. */
			if (w->nmet < NUPP_WALK_MET) {
				struct nupp_walk_met *m = &w->met[w->nmet & (NUPP_WALK_MET - 1)];

				m->pt = bc - lo->pt_size;
				m->fn = fn;
				m->key = 0;
				m->gen = pgn;
				w->nmet++;
			} else {
				w->unwatched = 1; /* more than can be noted: no stack, no fill */
			}
#endif
		}
	} else if (!skip) {
		/* In registers mode an ASM fast function runs with rbx = &GG->bcff[i]+4 and a
		 * C function's PC is inside global_State (vm_x64.dasc:232-239); in vm_call's
		 * entry (lua_call from a C function) rdx is the synced L->base of that C
		 * function and rbx the typed C link being built (not a bytecode address); in
		 * the continuation dispatch after a builtin returned through a continuation
		 * (cont_dispatch, `and PC, -8`: a stitched call's return), rbx is this frame's
		 * own typed link with its type bits cleared while L->base is still this frame's
		 * (a delta, never a PC or a pointer: no other state gives it): anything else
		 * means [rdx-16] is a result in a return window. */
		if (first && (w->mode == NUPP_WALK_REGS || w->strict) && !(w->rbx >= gg && w->rbx < gg + lo->gg_size) &&
		    !(w->mode == NUPP_WALK_REGS && w->lbase == frame + tvsz &&
		      (w->rbx & lo->frame_type) != lo->frame_lua) &&
		    !(w->lbase == frame + tvsz && (link & lo->frame_type) != lo->frame_lua &&
		      w->rbx == (link & ~(__u64)lo->frame_typep))) {
			__u64 spc = 0;

			/* An ASM fast function that calls out of the VM's code (coroutine.wrap's
			 * and coroutine.resume's function, around vm_resume) stores its link as
			 * SAVE_PC and L->base first, then takes PC as a scratch register (and
			 * BASE too, across the call): with the IP in the VM's code and L->base at
			 * this frame, SAVE_PC equal to its link (a return PC, or a continuation's
			 * typed delta when the call was stitched) proves the frame. */
			if (w->in_vm && w->lbase == frame + tvsz && ffid != lo->ff_c && link && w->cf &&
			    !NUPP_WALK_RD(&spc, 8, w->cf + lo->cframe_ofs_pc) && spc == link)
				;
			/* A fast function's C helper (its fallback handler syncs L->base). */
			else if (w->mode != NUPP_WALK_MEM || !w->helper_ra)
				NUPP_WALK_GOTO(window);
			else
				nupp_walk_helper(w);
		}
		if (ffid == lo->ff_c) {
			if (nupp_walk_emit(w, NUPP_SMP_C, f->ptr, 0, 0, 0, -1, lt))
				return 1;
		} else if (nupp_walk_emit(w, NUPP_SMP_FF, ffid, 0, 0, 0, -1, lt)) {
			return 1;
		}
	}
	goto step;

window:
	/* In a BC_CALL/BC_RET window of the leaf, rbx is the caller's return
	 * PC: use it as the link; the caller must contain it (checked at the next frame). */
	if (!(first && w->mode == NUPP_WALK_REGS))
		NUPP_WALK_GOTO(bad);
	/* In vm_call_dispatch_f (ins_call) rbx is the typed C/CP link about to be stored. */
	link = w->rbx;
	if (!link)
		NUPP_WALK_GOTO(bad);
	skip = 0;
	f = 0; /* this frame was not emitted */

step:
	if ((link & lo->frame_type) == lo->frame_lua) {
		/* frame_prevl: below by 1 + LJ_FR2 + A of the CALL before the return PC
		 * (lj_frame.h:108), cached with the caller's frame at that PC. */
		if (w->fc_tag && NUPP_WALK_FC_CALL_INS(w, w->fc_tag, link, &ins))
			; /* from the cache */
		else if (NUPP_WALK_CALL_INS(w, lo, link, &ins))
			NUPP_WALK_GOTO(fault);
		next = frame - tvsz * (1 + lo->fr2 + ((ins >> lo->bc_a_shift) & 0xff));
		/* A Lua frame emitted with the PC given by this same link: repeatable. */
		if ((hit || (f && ffid == lo->ff_lua)) && !skip && !first && pc && pc == link) {
			w->rep_fn = fn;
			w->rep_gcv = lo->gcvmask;
			w->rep_link = link;
			w->rep_delta = frame - next;
		}
		w->pc_above = link;
		if (skip)
			nupp_walk_relink(w, (__u8)lo->frame_lua);
	} else {
		t = (__u32)(link & lo->frame_typep);
		w->pc_above = 0;
		if (t == lo->frame_cont && nupp_walk_slot64(w, frame - 2 * tvsz, &w->pc_above))
			NUPP_WALK_GOTO(fault); /* frame_contpc (lj_frame.h:87-106) */
		if (t == lo->frame_varg) {
			w->skip = 1; /* the pseudo-frame below repeats the call (lj_debug.c:40-42) */
			w->skip_fn = hit || f ? fn : 0;
		}
		else if (skip)
			nupp_walk_relink(w, (__u8)t);
		next = frame - (link & ~(__u64)lo->frame_typep); /* frame_prevd (lj_frame.h:85) */
	}
	if (next >= frame || (next & 7))
		NUPP_WALK_GOTO(bad); /* links only go down the stack: a cycle or garbage */
	/* A Lua frame whose PC was validated inside its prototype, or a trace's start frame
	 * (no PC: cand is its start key): keep it. */
	if (!hit && w->fc_tag && f && ffid == lo->ff_lua && !skip && cand && !w->unwatched &&
	    (pc == cand || (!pc && first && w->mode == NUPP_WALK_TRACE && cand == nupp_walk_fc_start_key(bc)))) {
		c = nupp_walk_fc_way(w, w->fc_tag, fn, cand);
		if (!c)
			goto filled;
		c->tag = w->fc_tag;
		c->fn = fn;
		c->pc = cand;
		c->proto = bc - lo->pt_size;
		c->chunk = f->chunk;
		c->sizebc = sizebc;
		c->firstline = f->firstline;
		c->pos = pos;
		/* The CALL before cand, read (or cached) by the step of the frame above. */
		c->ins = w->ins_pc == cand ? w->ins_val : 0;
		/* A process that freed no prototype since (fc_pg the same) needs no check of
		 * the generation. */
		c->pg_ins = ((__u32)w->fc_pg << 1) | (w->ins_pc == cand);
		/* No prototype of this VM is freed during its walk: the facts read are of this
		 * generation. */
		c->gen = pgn;
		w->fc_fills++;
#ifdef NUPP_WALK_WATCH
		w->met[(w->nmet - 1) & (NUPP_WALK_MET - 1)].key = cand; /* this frame's note */
#endif
	}
filled:
	/* The CALL before a Lua link, for the frame below (whose PC that link is). */
	w->ins_pc = (link & lo->frame_type) == lo->frame_lua ? link : 0;
	w->ins_val = ins;
	w->frame = next;
	w->iter++;
	return 0;
bad:
	w->result = NUPP_WALK_BAD_FRAME;
	return 1;
fault:
	w->result = NUPP_WALK_READ_FAULT;
	return 1;
}

/* Walks the whole stack with a plain bounded loop (host C; BPF uses bpf_loop). */
NUPP_WALK_INLINE int nupp_walk_run(struct nupp_walk *w, const struct nupp_lj_layout *lo)
{
	int i;

	for (i = 0; i < NUPP_WALK_MAX_ITER(NUPP_SMP_MAX_DEPTH); i++)
		if (i >= (int)NUPP_WALK_MAX_ITER(w->max_depth) || nupp_walk_step(w, lo))
			break;
	if (w->result == NUPP_WALK_RUN)
		nupp_walk_cut(w); /* out of iterations: the frames emitted are the leaf-most */
	if (w->result == NUPP_WALK_DONE && !w->st.depth)
		w->result = NUPP_WALK_BAD_FRAME; /* no frame at all is not a stack */
	return w->result;
}

#endif /* NUPP_WALK_FRAME_H */
