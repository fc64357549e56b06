/* Snapshot shapes the trace decoder once refused, each from a real trace compiled
 * in-process: a call specialised to a closure's prototype (a closure created many times)
 * and one specialised to a builtin's ffid (coroutine.wrap's function), whose frames'
 * functions are computed values, not constants, the latter a stitched call whose caller's
 * position is in its continuation; a side trace that returns below its start frame; and a
 * chain of inlined calls deeper than the decoder once kept.
 * Each is named as LuaJIT's own view of the program says; the first two from the live
 * trace and from its BPF copy alike. */
#include <check.h>

#include "nupp_check.h"
#include <stdio.h>
#include <string.h>

#include "lualib.h"
#include "lj_debug.h"
#include "lj_snap.h"
#include "lj_ff.h"
#include "lj_dispatch.h"

#include "lj_snapshot_test.h"

/* A new VM with the standard libraries that has run chunk (len bytes) and holds its nret
 * results. */
static lua_State *run_chunk(const char *chunk, size_t len, int nret)
{
	lua_State *L = luaL_newstate();

	luaL_openlibs(L);
	ck_assert_int_eq(luaL_loadbuffer(L, chunk, len, "=shapes"), 0);
	ck_assert_int_eq(lua_pcall(L, 0, nret, 0), 0);
	return L;
}

/* Whether snapshot s of T has an inlined frame whose function slot is not a constant,
 * and the depth (frames above the start frame) of the topmost such frame. */
static int snap_spec_depth(GCtrace *T, SnapNo s)
{
	SnapShot *snap = &T->snap[s];
	SnapEntry *map = &T->snapmap[snap->mapofs];
	int depth = 0, found = 0;
	MSize n;

	for (n = 0; n < snap->nent; n++) {
		SnapEntry e = map[n];
		BCReg slot = snap_slot(e);

		if (!(e & SNAP_FRAME) || slot < 2)
			continue;
		depth++;
		/* The function's entry is the one of the slot below the link (FR2). */
		if (n > 0 && snap_slot(map[n - 1]) == slot - 1 && snap_ref(map[n - 1]) >= REF_BIAS)
			found = depth;
	}
	return found;
}

/* What a frame with a computed function must be named: kind LUA and want a prototype
 * (pt) at a line in [line_lo, line_hi], or kind FF and want an ffid; called from the start
 * frame's line call_line by bytecode call_op. */
struct spec_want {
	int kind;
	__u64 want;
	GCproto *pt;
	int line_lo, line_hi, call_line;
	BCOp call_op;
};

/* Expands a sample at every snapshot of every trace of L started in startpt whose
 * inlined frame has a computed function; each such frame must be as x says. Returns the
 * snapshots checked. */
static int check_spec_frames(lua_State *L, GCproto *startpt, const struct spec_want *x)
{
	static struct nupp_smp_trace_event ev;
	jit_State *J = G2J(G(L));
	struct nupp_smp_frame a[NUPP_SMP_MAX_DEPTH + 16], b[NUPP_SMP_MAX_DEPTH + 16];
	struct nupp_smp_stack st;
	struct nupp_smp_frame *f;
	int checked = 0, na, nb, d, line;
	TraceNo i;
	SnapNo s;

	for (i = 1; i < J->sizetrace; i++) {
		GCtrace *T = traceref(J, i);
		struct nupp_traces *live, *copy;
		size_t size;

		if (!T || gcref(T->startpt) != obj2gco(startpt))
			continue;
		live = nupp_traces_new(&luajit_bpf_layout, self_read, NULL);
		copy = nupp_traces_new(&luajit_bpf_layout, self_read, NULL);
		size = make_event(vm_g(L), T, &ev);
		ck_assert_int_eq(nupp_traces_add(live, vm_g(L), (__u64)(uintptr_t)T, T->traceno, T->serial, 0), 0);
		ck_assert_int_eq(nupp_traces_add_copy(copy, &ev, size), 0);
		trace_sample(&st, vm_g(L), T, startpt, 2);
		st.frames[1] = lua_frame(startpt, 0); /* stands for the caller chain */
		for (s = 0; s < T->nsnap; s++) {
			d = snap_spec_depth(T, s);
			if (!d || (s + 1 < T->nsnap && T->snap[s + 1].mcofs == T->snap[s].mcofs))
				continue;
			st.mcofs = T->snap[s].mcofs;
			na = nupp_traces_expand(live, &st, a, NUPP_SMP_MAX_DEPTH);
			ck_assert_msg(na > d, "trace %d snapshot %d: %d frames", i, s, na);
			/* The copy names it as the live trace does: decoded at its first sample
			 * (which may read a prototype's bytecode), then with no read at all. */
			nb = nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH);
			ck_assert_int_eq(na, nb);
			ck_assert_mem_eq(a, b, sizeof(a[0]) * nb);
			fail_reads = 1;
			nb = nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH);
			fail_reads = 0;
			ck_assert_int_eq(na, nb);
			ck_assert_mem_eq(a, b, sizeof(a[0]) * nb);
			/* The frame d levels above the start frame (out[na - 2]), at a line of
			 * its own (a builtin: none), called from the line and bytecode given. */
			f = &a[na - 2 - d];
			ck_assert_int_eq(f->kind, x->kind);
			ck_assert_uint_eq(f->ptr, x->want);
			if (x->kind == NUPP_SMP_LUA) {
				line = lj_debug_line(x->pt, (BCPos)f->pos);
				ck_assert_msg(line >= x->line_lo && line <= x->line_hi, "line %d", line);
			} else {
				ck_assert_int_eq(f->pos, -1);
			}
			ck_assert_uint_eq(f[1].ptr, (__u64)(uintptr_t)startpt);
			ck_assert_int_ge(f[1].pos, 0);
			ck_assert_int_eq(lj_debug_line(startpt, (BCPos)f[1].pos), x->call_line);
			ck_assert_int_eq(bc_op(proto_bc(startpt)[f[1].pos]), x->call_op);
			checked++;
		}
		nupp_traces_free(live);
		nupp_traces_free(copy);
	}
	return checked;
}

/* A closure created many times is called through a call specialised to its prototype
 * (EQ(FLOAD(fn, FUNC_PC), KPTR)): the inlined frame is the closure's prototype, at its
 * own line. */
static const char *chunk_closure =
	"local function mk(k)\n"                   /* 1 */
	"  return function(x)\n"                   /* 2 */
	"    local v = x * k\n"                    /* 3 */
	"    if v > 1e9 then v = 0 end\n"          /* 4 */
	"    return v + 1\n"                       /* 5 */
	"  end\n"                                  /* 6 */
	"end\n"                                    /* 7 */
	"local function hot(fs, n)\n"              /* 8 */
	"  local s = 0\n"                          /* 9 */
	"  for i = 1, n do\n"                      /* 10 */
	"    s = s + fs[i % 64 + 1](i)\n"          /* 11 */
	"  end\n"                                  /* 12 */
	"  return s\n"                             /* 13 */
	"end\n"                                    /* 14 */
	"local fs = {}; for i = 1, 64 do fs[i] = mk(i) end\n"
	"hot(fs, 200000)\n"
	"return hot, fs[1]\n";

START_TEST(closure_called_by_prototype_is_named)
{
	lua_State *L = run_chunk(chunk_closure, strlen(chunk_closure), 2);
	GCproto *phot, *pcl;
	/* Line 4's comparison or line 5's work, called by line 11's CALL. */
	struct spec_want x = { .kind = NUPP_SMP_LUA, .line_lo = 4, .line_hi = 5, .call_line = 11, .call_op = BC_CALL };

	phot = funcproto((GCfunc *)lua_topointer(L, 1));
	pcl = funcproto((GCfunc *)lua_topointer(L, 2));
	x.want = (__u64)(uintptr_t)pcl;
	x.pt = pcl;
	ck_assert_int_gt(check_spec_frames(L, phot, &x), 0);
	lua_close(L);
}
END_TEST

/* coroutine.wrap's function is one builtin whatever the coroutine: its call is
 * specialised to its ffid (EQ(FLOAD(fn, FUNC_FFID), KINT)), and the frame is that
 * builtin. */
static const char *chunk_wrap =
	"local function gen(n)\n"                                                      /* 1 */
	"  return coroutine.wrap(function() for i = 1, n do coroutine.yield(i) end end)\n" /* 2 */
	"end\n"                                                                        /* 3 */
	"local function hot(m)\n"                                                      /* 4 */
	"  local s = 0\n"                                                              /* 5 */
	"  for _ = 1, m do\n"                                                          /* 6 */
	"    for v in gen(8) do s = s + v end\n"                                       /* 7 */
	"  end\n"                                                                      /* 8 */
	"  return s\n"                                                                 /* 9 */
	"end\n"                                                                        /* 10 */
	"hot(20000)\n"
	"return hot\n";

START_TEST(builtin_called_by_ffid_is_named)
{
	lua_State *L = run_chunk(chunk_wrap, strlen(chunk_wrap), 1);
	GCproto *phot;
	/* Called by the for loop's ITERC on line 7. */
	struct spec_want x = { .kind = NUPP_SMP_FF, .want = FF_coroutine_wrap_aux, .call_line = 7, .call_op = BC_ITERC };

	phot = funcproto((GCfunc *)lua_topointer(L, 1));
	ck_assert_int_gt(check_spec_frames(L, phot, &x), 0);
	lua_close(L);
}
END_TEST

/* A side trace that leaves its start frame: inner()'s loop exit returns into outer()
 * (IR_RETF, which moves jit_base down to outer's frame) and runs outer's loop until it
 * calls inner() again. A snapshot before the return runs in inner(); one after it in
 * outer(), whose frame a sample then finds at jit_base, or in the inner() called again,
 * inlined above outer(). */
static const char *chunk_retf =
	"local function inner(n)\n"              /* 1 */
	"  local s = 0\n"                        /* 2 */
	"  for i = 1, n do s = s + i end\n"      /* 3 */
	"  return s\n"                           /* 4 */
	"end\n"                                  /* 5 */
	"local function outer(m)\n"              /* 6 */
	"  local t = 0\n"                        /* 7 */
	"  for j = 1, m do\n"                    /* 8 */
	"    t = t + inner(j % 7 + 3)\n"         /* 9 */
	"    t = t % 1e6\n"                      /* 10 */
	"  end\n"                                /* 11 */
	"  return t\n"                           /* 12 */
	"end\n"                                  /* 13 */
	"outer(100000)\n"
	"return outer, inner\n";

/* Checks each snapshot of side trace T of inner() whose IR_RETF is at retf; counts the
 * snapshots before the return, after it, and after it in inner() inlined again (n[3]). */
static void retf_check(lua_State *L, GCtrace *T, IRRef retf, GCproto *pout, GCproto *pin, int n[3])
{
	struct nupp_smp_frame out[NUPP_SMP_MAX_DEPTH + 16];
	struct nupp_traces *tc = nupp_traces_new(&luajit_bpf_layout, self_read, NULL);
	struct nupp_smp_stack st;
	SnapNo s;
	int k, line;

	ck_assert_int_eq(nupp_traces_add(tc, vm_g(L), (__u64)(uintptr_t)T, T->traceno, T->serial, 0), 0);
	for (s = 0; s < T->nsnap; s++) {
		bool below = T->snap[s].ref > retf;
		GCproto *base = below ? pout : pin;
		uint64_t pcbase;

		if (s + 1 < T->nsnap && T->snap[s + 1].mcofs == T->snap[s].mcofs)
			continue;
		memcpy(&pcbase, &T->snapmap[T->snap[s].mapofs + T->snap[s].nent], sizeof(pcbase));
		/* jit_base's frame: inner's before the return, outer's after it */
		trace_sample(&st, vm_g(L), T, base, 2);
		st.frames[1] = lua_frame(pout, 0); /* stands for the caller chain */
		st.mcofs = T->snap[s].mcofs;
		k = nupp_traces_expand(tc, &st, out, NUPP_SMP_MAX_DEPTH);
		ck_assert_msg(k >= 2, "snapshot %d: %d frames", s, k);
		if ((pcbase & 0xff) == 0) {
			/* In the frame at jit_base: inner's return on line 4 (or the loop's exit on
			 * line 3), or outer's loop on lines 8-10. */
			ck_assert_int_eq(k, 2);
			ck_assert_uint_eq(out[0].ptr, (__u64)(uintptr_t)base);
			line = lj_debug_line(base, (BCPos)out[0].pos);
			if (below)
				ck_assert_msg(line >= 8 && line <= 10, "snapshot %d: outer line %d", s, line);
			else
				ck_assert_msg(line == 3 || line == 4, "snapshot %d: inner line %d", s, line);
			n[below]++;
		} else {
			/* inner() called again, inlined above outer()'s CALL on line 9 */
			ck_assert(below);
			ck_assert_int_eq(k, 3);
			ck_assert_uint_eq(out[0].ptr, (__u64)(uintptr_t)pin);
			line = lj_debug_line(pin, (BCPos)out[0].pos);
			ck_assert_msg(line >= 1 && line <= 3, "snapshot %d: inner line %d", s, line);
			ck_assert_uint_eq(out[1].ptr, (__u64)(uintptr_t)pout);
			ck_assert_int_eq(lj_debug_line(pout, (BCPos)out[1].pos), 9);
			ck_assert_int_eq(bc_op(proto_bc(pout)[out[1].pos]), BC_CALL);
			n[2]++;
		}
	}
	nupp_traces_free(tc);
}

/* Which traces LuaJIT makes of the chunk depends on where its bytecode lies (hot
 * counters are shared by PC hash): the chunk runs in fresh VMs until their side traces
 * of inner() have shown all three kinds of snapshot, every one checked. */
START_TEST(return_below_the_start_frame_is_named)
{
	int n[3] = { 0, 0, 0 }, run, found = 0;

	for (run = 0; run < 40 && !(n[0] && n[1] && n[2]); run++) {
		lua_State *L = run_chunk(chunk_retf, strlen(chunk_retf), 2);
		GCproto *pout, *pin;
		jit_State *J;
		TraceNo i;
		IRRef ref;

		pout = funcproto((GCfunc *)lua_topointer(L, 1));
		pin = funcproto((GCfunc *)lua_topointer(L, 2));
		J = G2J(G(L));
		for (i = 1; i < J->sizetrace; i++) {
			GCtrace *T = traceref(J, i);

			if (!T || !T->root || gcref(T->startpt) != obj2gco(pin))
				continue;
			for (ref = REF_BIAS + 1; ref < T->nins; ref++)
				if (T->ir[ref].o == IR_RETF) {
					retf_check(L, T, ref, pout, pin, n);
					found++;
					break;
				}
		}
		lua_close(L);
	}
	ck_assert_msg(n[0] && n[1] && n[2], "%d side traces returning into outer() in %d VMs: %d/%d/%d snapshots",
		      found, run, n[0], n[1], n[2]);
}
END_TEST

/* A chain of DEEP functions inlined into one trace (f1 calls f2 ... calls fDEEP, each on
 * its own line, fDEEP's comparison taking a snapshot): more frames than the decoder once
 * kept (16). Loops get hot at once, so that the chain is recorded from hot()'s loop before
 * a function of it starts a trace of its own. */
#define DEEP 24

START_TEST(deep_inlined_chain_is_named)
{
	lua_State *L = luaL_newstate();
	struct nupp_smp_frame out[NUPP_SMP_MAX_DEPTH + 16];
	GCproto *pf[DEEP + 1], *phot;
	struct nupp_smp_stack st;
	struct nupp_traces *tc;
	char src[8192];
	GCtrace *T = NULL;
	jit_State *J;
	size_t len;
	int k, n, deep = 0;
	TraceNo i;
	SnapNo s;

	/* Line 1: the option; line 2: fDEEP; line 2 + DEEP - k: fk; then hot() and the call. */
	len = (size_t)snprintf(src, sizeof(src), "jit.opt.start('hotloop=1')\n"
				 "local f%d = function(x) local v = x * 2 if v > 1e9 then v = 0 end return v end\n",
			       DEEP);
	for (k = DEEP - 1; k >= 1; k--)
		len += (size_t)snprintf(src + len, sizeof(src) - len, "local f%d = function(x) return f%d(x) + 1 end\n",
					k, k + 1);
	len += (size_t)snprintf(src + len, sizeof(src) - len,
				"local function hot(n) local s = 0 for i = 1, n do s = s + f1(i) end return s end\n"
				"hot(100000)\nreturn hot, {");
	for (k = 1; k <= DEEP; k++)
		len += (size_t)snprintf(src + len, sizeof(src) - len, "f%d%s", k, k < DEEP ? ", " : "}\n");
	ck_assert_uint_lt(len, sizeof(src));
	luaL_openlibs(L);
	ck_assert_int_eq(luaL_loadbuffer(L, src, len, "=deep"), 0);
	ck_assert_int_eq(lua_pcall(L, 0, 2, 0), 0);
	phot = funcproto((GCfunc *)lua_topointer(L, 1));
	for (k = 1; k <= DEEP; k++) {
		lua_rawgeti(L, 2, k);
		pf[k] = funcproto((GCfunc *)lua_topointer(L, -1));
		lua_pop(L, 1);
	}
	J = G2J(G(L));
	for (i = 1; i < J->sizetrace; i++)
		if (traceref(J, i) && gcref(traceref(J, i)->startpt) == obj2gco(phot) &&
		    traceref(J, i)->linktype == LJ_TRLINK_LOOP)
			T = traceref(J, i);
	ck_assert_msg(T != NULL, "no loop trace for hot()");
	tc = nupp_traces_new(&luajit_bpf_layout, self_read, NULL);
	ck_assert_int_eq(nupp_traces_add(tc, vm_g(L), (__u64)(uintptr_t)T, T->traceno, T->serial, 0), 0);
	trace_sample(&st, vm_g(L), T, phot, 2);
	st.frames[1] = lua_frame(phot, 0); /* stands for the caller chain */
	for (s = 0; s < T->nsnap; s++) {
		if (s + 1 < T->nsnap && T->snap[s + 1].mcofs == T->snap[s].mcofs)
			continue;
		st.mcofs = T->snap[s].mcofs;
		n = nupp_traces_expand(tc, &st, out, NUPP_SMP_MAX_DEPTH);
		ck_assert_msg(n >= 2, "snapshot %d: %d frames", s, n);
		if (n != DEEP + 2)
			continue;
		/* fDEEP at its comparison or return (line 2), then each caller at its call
		 * (fk on line 2 + DEEP - k), then hot() (line 2 + DEEP). */
		for (k = 0; k < DEEP; k++) {
			ck_assert_uint_eq(out[k].ptr, (__u64)(uintptr_t)pf[DEEP - k]);
			ck_assert_int_eq(lj_debug_line(pf[DEEP - k], (BCPos)out[k].pos), 2 + k);
		}
		ck_assert_uint_eq(out[DEEP].ptr, (__u64)(uintptr_t)phot);
		ck_assert_int_eq(lj_debug_line(phot, (BCPos)out[DEEP].pos), 2 + DEEP);
		deep++;
	}
	ck_assert_int_gt(deep, 0);
	nupp_traces_free(tc);
	lua_close(L);
}
END_TEST

NUPP_CHECK_MAIN("snapshot shapes", 0, false, false, closure_called_by_prototype_is_named,
		builtin_called_by_ffid_is_named, return_below_the_start_frame_is_named, deep_inlined_chain_is_named)
