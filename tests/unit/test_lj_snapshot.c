/* Trace samples to source positions: the rightmost snapshot search, and the decoding of
 * a real trace compiled in-process (leaf PC from the snapshot, inlined frames from the
 * FR2 link slots), each incarnation of a trace named by its serial. */
#include <check.h>

#include "nupp_check.h"
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"
#include "lj_obj.h"
#include "lj_bc.h"
#include "lj_frame.h"
#include "lj_jit.h"
#include "lj_dispatch.h"
#include "lj_debug.h"
#include "lj_ir.h"

#include "core/sampler_internal.h"
#include "lj_snapshot_test.h"

START_TEST(snap_search_is_rightmost_le)
{
	const __u16 mcofs[] = { 0, 10, 20, 40 };

	ck_assert_int_eq(nupp_snap_search(mcofs, 4, 0), 0);
	ck_assert_int_eq(nupp_snap_search(mcofs, 4, 9), 0);
	ck_assert_int_eq(nupp_snap_search(mcofs, 4, 10), 1);
	ck_assert_int_eq(nupp_snap_search(mcofs, 4, 39), 2);
	ck_assert_int_eq(nupp_snap_search(mcofs, 4, 40), 3);
	ck_assert_int_eq(nupp_snap_search(mcofs, 4, 5000), 3);
	ck_assert_int_eq(nupp_snap_search(mcofs, 1, 7), 0);
	ck_assert_int_eq(nupp_snap_search(mcofs, 0, 7), -1);
}
END_TEST

/* A loop whose header (line 8) and body (lines 9-10) are on different lines, with inner()
 * (lines 1-5) inlined into its trace. */
static const char *chunk =
	"local function inner(t, i)\n"         /* 1 */
	"  local v = t[i % 64 + 1]\n"          /* 2 */
	"  if v > 1e9 then v = 0 end\n"        /* 3 */
	"  return v * 2\n"                     /* 4 */
	"end\n"                                /* 5 */
	"local function hot(n, t)\n"           /* 6 */
	"  local s = 0\n"                      /* 7 */
	"  for i = 1, n do\n"                  /* 8 */
	"    local x = inner(t, i)\n"          /* 9 */
	"    s = s + x\n"                      /* 10 */
	"  end\n"                              /* 11 */
	"  return s\n"                         /* 12 */
	"end\n"                                /* 13 */
	"local t = {}; for i = 1, 64 do t[i] = i end\n"
	"hot(200000, t)\n"
	"return hot, inner\n";

START_TEST(trace_snapshots_give_lines_and_inlined_frames)
{
	lua_State *L = luaL_newstate();
	GCproto *phot, *pinner;
	jit_State *J;
	GCtrace *T = NULL;
	struct nupp_traces *tc;
	struct nupp_smp_stack st;
	struct nupp_smp_frame out[NUPP_SMP_MAX_DEPTH + 16];
	TraceNo i;
	SnapNo s;
	BCOp op;
	int n, line, with_inner = 0, checked = 0, loophead = 0, forl = 0, comp = 0;

	luaL_openlibs(L);
	ck_assert_int_eq(luaL_loadbuffer(L, chunk, strlen(chunk), "=snaptest"), 0);
	ck_assert_int_eq(lua_pcall(L, 0, 2, 0), 0);
	phot = funcproto((GCfunc *)lua_topointer(L, 1));
	pinner = funcproto((GCfunc *)lua_topointer(L, 2));
	J = G2J(G(L));
	for (i = 1; i < J->sizetrace; i++) {
		GCtrace *t = traceref(J, i);

		if (t && gcref(t->startpt) == obj2gco(phot) && t->linktype == LJ_TRLINK_LOOP)
			T = t;
	}
	ck_assert_msg(T != NULL, "no loop trace for hot()");
	tc = nupp_traces_new(&luajit_bpf_layout, self_read, NULL);
	ck_assert_uint_ne(T->serial, 0);
	ck_assert_int_eq(nupp_traces_add(tc, vm_g(L), (__u64)(uintptr_t)T, T->traceno, T->serial, 0), 0);
	trace_sample(&st, vm_g(L), T, phot, 2);
	st.frames[1] = lua_frame(phot, 3); /* stands for the caller chain */
	for (s = 0; s < T->nsnap; s++) {
		/* LuaJIT's own view of the snapshot: its PC (where the interpreter resumes)
		 * and the depth of its innermost frame (lj_snap.c, snapshot_framelinks). */
		SnapEntry *map = &T->snapmap[T->snap[s].mapofs];
		uint64_t pcbase;
		const BCIns *spc;

		memcpy(&pcbase, &map[T->snap[s].nent], sizeof(pcbase));
		spc = (const BCIns *)(uintptr_t)(pcbase >> 8);
		/* a sample in the code of snapshot s (before the next one starts) */
		st.mcofs = T->snap[s].mcofs;
		if (s + 1 < T->nsnap && T->snap[s + 1].mcofs == st.mcofs)
			continue;
		n = nupp_traces_expand(tc, &st, out, (int)(sizeof(out) / sizeof(out[0])));
		ck_assert_int_ge(n, 2);
		if (n == 3) {
			/* inner() inlined: its own frame at the snapshot's PC, exactly, on one of
			 * its lines that run on the trace; hot() at the CALL on line 9 */
			ck_assert_uint_ne(pcbase & 0xff, 0); /* an inlined frame */
			ck_assert_uint_eq(out[0].ptr, (__u64)(uintptr_t)pinner);
			line = lj_debug_line(pinner, (BCPos)out[0].pos);
			if (bc_op(*spc) == BC_KSHORT) {
				/* `v = 0`, the branch the trace does not take: the snapshot of the
				 * comparison `v > 1e9`, whose code executes the comparison */
				ck_assert_int_eq(out[0].pos, (int)proto_bcpos(pinner, spc) - 2);
				ck_assert_int_eq(bc_op(proto_bc(pinner)[out[0].pos]), BC_ISGE);
				comp++;
			} else {
				ck_assert_int_eq(out[0].pos, (int)proto_bcpos(pinner, spc));
			}
			ck_assert_msg(line == 3 || line == 4, "snapshot %d: inner line %d", s, line);
			ck_assert_uint_eq(out[1].ptr, (__u64)(uintptr_t)phot);
			ck_assert_int_eq(bc_op(proto_bc(phot)[out[1].pos]), BC_CALL);
			ck_assert_int_eq(lj_debug_line(phot, (BCPos)out[1].pos), 9);
			with_inner++;
		} else {
			ck_assert_int_eq(n, 2);
			ck_assert_uint_eq(pcbase & 0xff, 0); /* the start frame */
			ck_assert_uint_eq(out[0].ptr, (__u64)(uintptr_t)phot);
			line = lj_debug_line(phot, (BCPos)out[0].pos);
			if (spc == mref(T->startpc, BCIns) + 1) {
				/* the exit guard of the trace's FORL: LuaJIT resumes after the loop
				 * (line 12); the code executes the FORL, on the for line */
				ck_assert_int_eq(out[0].pos, (int)proto_bcpos(phot, mref(T->startpc, BCIns)));
				ck_assert_int_eq(bc_op(T->startins), BC_FORL);
				ck_assert_int_eq(line, 8);
				forl++;
			} else {
				/* the bytecode at the snapshot's PC, exactly: a body line */
				ck_assert_int_eq(out[0].pos, (int)proto_bcpos(phot, spc));
				ck_assert_msg(line == 9 || line == 10, "snapshot %d: hot line %d", s, line);
			}
			/* the loop part starts at the body's first bytecode (line 9), not at the
			 * FORI before it (line 8) */
			if (T->snap[s].mcofs == T->mcloop) {
				ck_assert_int_eq(line, 9);
				op = bc_op(proto_bc(phot)[out[0].pos - 1]);
				ck_assert(op == BC_FORI || op == BC_JFORI); /* JFORI once compiled */
				loophead++;
			}
		}
		ck_assert_int_eq(out[n - 1].pos, 3); /* the caller chain is kept */
		checked++;
	}
	ck_assert_int_gt(checked, 1);
	ck_assert_int_gt(with_inner, 0);
	ck_assert_int_eq(loophead, 1);
	ck_assert_int_eq(forl, 2); /* the pre-roll's FORL and the loop's */
	ck_assert_int_eq(comp, 2); /* the pre-roll's comparison and the loop's */

	/* a snapshot PC outside the innermost frame's bytecode is not decoded */
	st.frames[0].sizebc = 1;
	st.mcofs = T->mcloop;
	ck_assert_int_eq(nupp_traces_expand(tc, &st, out, NUPP_SMP_MAX_DEPTH), -ENOENT);
	st.frames[0] = lua_frame(phot, -1);

	/* a sample in a C helper called from the trace: frames kept, no leaf position */
	st.flags = NUPP_SMP_F_TRACE;
	ck_assert_int_eq(nupp_traces_expand(tc, &st, out, NUPP_SMP_MAX_DEPTH), 2);
	ck_assert_int_eq(out[0].pos, -1);

	/* another incarnation at the same address, number and machine code (another
	 * serial): not named by this one's entry, and refused when read from the target,
	 * where the trace has this serial */
	st.flags = NUPP_SMP_F_TRACE | NUPP_SMP_F_MCODE;
	ck_assert_int_ge(nupp_traces_expand(tc, &st, out, NUPP_SMP_MAX_DEPTH), 2);
	st.tserial = T->serial + 1;
	ck_assert_int_eq(nupp_traces_expand(tc, &st, out, NUPP_SMP_MAX_DEPTH), -ENOENT);
	st.tserial = T->serial;
	/* named within the idle time, dropped after it; then read from the target again
	 * while it lives (not when it cannot be read) */
	nupp_traces_purge(tc, 1000000);
	fail_reads = 1;
	ck_assert_int_ge(nupp_traces_expand(tc, &st, out, NUPP_SMP_MAX_DEPTH), 2);
	nupp_traces_purge(tc, 1000000 + 30000001);
	ck_assert_int_eq(nupp_traces_expand(tc, &st, out, NUPP_SMP_MAX_DEPTH), -ENOENT);
	fail_reads = 0;
	ck_assert_int_ge(nupp_traces_expand(tc, &st, out, NUPP_SMP_MAX_DEPTH), 2);
	/* another trace at the same address (different number): not confused */
	st.traceno = T->traceno + 1;
	ck_assert_int_lt(nupp_traces_expand(tc, &st, out, NUPP_SMP_MAX_DEPTH), 0);
	nupp_traces_free(tc);
	lua_close(L);
}
END_TEST

/* Runs chunk in L and returns hot()'s root loop trace (*phot: hot's prototype, *pinner:
 * the inlined function's). */
static GCtrace *hot_loop_trace(lua_State *L, GCproto **phot, GCproto **pinner)
{
	jit_State *J;
	GCtrace *T = NULL;
	TraceNo i;

	luaL_openlibs(L);
	ck_assert_int_eq(luaL_loadbuffer(L, chunk, strlen(chunk), "=snaptest"), 0);
	ck_assert_int_eq(lua_pcall(L, 0, 2, 0), 0);
	*phot = funcproto((GCfunc *)lua_topointer(L, 1));
	*pinner = funcproto((GCfunc *)lua_topointer(L, 2));
	J = G2J(G(L));
	for (i = 1; i < J->sizetrace; i++) {
		GCtrace *t = traceref(J, i);

		if (t && gcref(t->startpt) == obj2gco(*phot) && t->linktype == LJ_TRLINK_LOOP)
			T = t;
	}
	ck_assert_msg(T != NULL, "no loop trace for hot()");
	return T;
}

/* A trace kept from its BPF copy names its samples as one read from the live trace does,
 * with no read of the trace or its functions (they may be gone): only the bytecode of a
 * prototype a comparison snapshot needs, checked against its fingerprint. */
START_TEST(trace_copy_names_as_the_live_trace)
{
	lua_State *L = luaL_newstate();
	static struct nupp_smp_trace_event ev;
	GCproto *phot, *pinner;
	GCtrace *T = hot_loop_trace(L, &phot, &pinner);
	struct nupp_traces *live, *copy;
	struct nupp_smp_stack st;
	struct nupp_smp_frame a[NUPP_SMP_MAX_DEPTH + 16], b[NUPP_SMP_MAX_DEPTH + 16];
	size_t size;
	SnapNo s;
	int na, nb, inlined = 0;

	size = make_event(vm_g(L), T, &ev);
	live = nupp_traces_new(&luajit_bpf_layout, self_read, NULL);
	copy = nupp_traces_new(&luajit_bpf_layout, self_read, NULL);
	ck_assert_int_eq(nupp_traces_add(live, vm_g(L), (__u64)(uintptr_t)T, T->traceno, T->serial, 0), 0);
	ck_assert_int_eq(nupp_traces_add_copy(copy, &ev, size), 0);
	trace_sample(&st, vm_g(L), T, phot, 1);
	/* The first sample decodes the copy; afterwards no read is needed at all. */
	st.mcofs = T->snap[0].mcofs;
	ck_assert_int_ge(nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH), 1);
	fail_reads = 1;
	for (s = 0; s < T->nsnap; s++) {
		st.mcofs = T->snap[s].mcofs;
		fail_reads = 0;
		na = nupp_traces_expand(live, &st, a, NUPP_SMP_MAX_DEPTH);
		fail_reads = 1;
		nb = nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH);
		ck_assert_int_eq(na, nb);
		ck_assert_int_ge(nb, 1);
		ck_assert_mem_eq(a, b, sizeof(a[0]) * nb);
		inlined += nb == 2 && b[0].ptr == (__u64)(uintptr_t)pinner;
	}
	fail_reads = 0;
	ck_assert_int_gt(inlined, 0);
	/* The same copy again (another CPU's, or after BPF forgot it) changes nothing; an
	 * event whose copy does not hold the trace's number or serial is refused. */
	ck_assert_int_eq(nupp_traces_add_copy(copy, &ev, size), 0);
	ev.h.traceno++;
	ck_assert_int_eq(nupp_traces_add_copy(copy, &ev, size), -ESTALE);
	ev.h.traceno--;
	ev.h.serial++;
	ck_assert_int_eq(nupp_traces_add_copy(copy, &ev, size), -ESTALE);
	nupp_traces_free(live);
	nupp_traces_free(copy);
	lua_close(L);
}
END_TEST

/* A copy not decoded yet when its trace is freed names the samples taken while it
 * lived (decoded then, nothing read). An entry no sample names for the idle time is
 * dropped and its block goes back to the pool; the next incarnation copied into that
 * block names its own samples exactly as before, and a sample of the dropped one (not
 * readable any more) is refused, never named by the new one. */
START_TEST(trace_copy_freed_before_decode_and_pooled)
{
	lua_State *L = luaL_newstate();
	static struct nupp_smp_trace_event ev;
	GCproto *phot, *pinner;
	GCtrace *T = hot_loop_trace(L, &phot, &pinner);
	struct nupp_traces *live, *copy;
	struct nupp_smp_stack st;
	struct nupp_smp_frame a[NUPP_SMP_MAX_DEPTH + 16], b[NUPP_SMP_MAX_DEPTH + 16];
	size_t size;
	__u64 now = 5000000000ull; /* monotonic microseconds since boot */
	int na, k;

	size = make_event(vm_g(L), T, &ev);
	live = nupp_traces_new(&luajit_bpf_layout, self_read, NULL);
	copy = nupp_traces_new(&luajit_bpf_layout, self_read, NULL);
	ck_assert_int_eq(nupp_traces_add(live, vm_g(L), (__u64)(uintptr_t)T, T->traceno, T->serial, 0), 0);
	trace_sample(&st, vm_g(L), T, phot, 1);
	st.mcofs = T->snap[T->nsnap - 1].mcofs;
	na = nupp_traces_expand(live, &st, a, NUPP_SMP_MAX_DEPTH);
	ck_assert_int_ge(na, 1);
	fail_reads = 1; /* from here on the target cannot be read: only copies name */
	for (k = 0; k < 2; k++) {
		/* Incarnation k (the second in the pooled block of the first): its copy kept,
		 * not decoded, then its samples named from it. */
		ev.h.serial = T->serial + 10 * (__u32)k;
		memcpy(ev.data + luajit_bpf_layout.T_serial, &ev.h.serial, 4);
		st.tserial = ev.h.serial;
		ck_assert_int_eq(nupp_traces_add_copy(copy, &ev, size), 0);
		/* (The first time, the drain clock's first value: a copy kept before it was
		 * set is not dropped.) */
		nupp_traces_purge(copy, now);
		ck_assert_int_eq(nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH), na);
		ck_assert_mem_eq(a, b, sizeof(a[0]) * na);
		/* Named within the idle time: kept; idle past it: dropped, then refused. */
		now += 20000000;
		nupp_traces_purge(copy, now);
		ck_assert_int_eq(nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH), na);
		now += 31000000;
		nupp_traces_purge(copy, now);
		ck_assert_int_eq(nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH), -ENOENT);
	}
	/* Two incarnations at once: each names only its own samples. */
	ck_assert_int_eq(nupp_traces_add_copy(copy, &ev, size), 0);
	ev.h.serial = T->serial + 20;
	memcpy(ev.data + luajit_bpf_layout.T_serial, &ev.h.serial, 4);
	ck_assert_int_eq(nupp_traces_add_copy(copy, &ev, size), 0);
	st.tserial = T->serial + 10;
	ck_assert_int_eq(nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH), na);
	st.tserial = T->serial + 20;
	ck_assert_int_eq(nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH), na);
	ck_assert_mem_eq(a, b, sizeof(a[0]) * na);
	st.tserial = T->serial + 15;
	ck_assert_int_eq(nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH), -ENOENT);
	caches_done(live, copy, L);
}
END_TEST

/* Multi-line `if`s taken either way, `while` and `repeat` loops: a comparison's snapshot
 * resumes at the branch the trace does not take; its code executes the comparison. */
static const char *chunk_if =
	"local function hot(n, t)\n"          /* 1 */
	"  local s, m = 0, 0\n"               /* 2 */
	"  for i = 1, n do\n"                 /* 3 */
	"    local v = t[i % 64 + 1]\n"       /* 4 */
	"    if v > 1e9 then\n"               /* 5: never true */
	"      s = 0\n"                       /* 6 */
	"    end\n"                           /* 7 */
	"    if v >= 0 then\n"                /* 8: always true */
	"      m = m + v\n"                   /* 9 */
	"    end\n"                           /* 10 */
	"    s = s + v\n"                     /* 11 */
	"  end\n"                             /* 12 */
	"  local j = 0\n"                     /* 13 */
	"  while j < n do\n"                  /* 14 */
	"    j = j + t[j % 64 + 1]\n"         /* 15 */
	"  end\n"                             /* 16 */
	"  local k = 0\n"                     /* 17 */
	"  repeat\n"                          /* 18 */
	"    k = k + t[k % 64 + 1]\n"         /* 19 */
	"  until k >= n\n"                    /* 20 */
	"  return s + m + j + k\n"            /* 21 */
	"end\n"
	"local t = {}; for i = 1, 64 do t[i] = i end\n"
	"for k = 1, 100 do hot(3000, t) end\n"
	"return hot\n";

/* The lines of the snapshots of hot()'s root loop trace starting at line `start`, in
 * snapshot order (snapshots without code skipped), as a string "4 5 8 ...". */
static void loop_lines(lua_State *L, struct nupp_traces *tc, GCproto *pt, int start, char *buf, size_t size)
{
	jit_State *J = G2J(G(L));
	struct nupp_smp_stack st;
	struct nupp_smp_frame out[NUPP_SMP_MAX_DEPTH + 16];
	GCtrace *T = NULL;
	size_t len = 0;
	TraceNo i;
	SnapNo s;
	int n;

	buf[0] = 0;
	for (i = 1; i < J->sizetrace; i++) {
		GCtrace *t = traceref(J, i);

		if (t && gcref(t->startpt) == obj2gco(pt) && t->linktype == LJ_TRLINK_LOOP && !t->root &&
		    lj_debug_line(pt, proto_bcpos(pt, mref(t->startpc, BCIns))) == start)
			T = t;
	}
	ck_assert_msg(T != NULL, "no loop trace at line %d", start);
	ck_assert_int_eq(nupp_traces_add(tc, vm_g(L), (__u64)(uintptr_t)T, T->traceno, T->serial, 0), 0);
	trace_sample(&st, vm_g(L), T, pt, 1);
	for (s = 0; s < T->nsnap; s++) {
		st.mcofs = T->snap[s].mcofs;
		if (s + 1 < T->nsnap && T->snap[s + 1].mcofs == st.mcofs)
			continue;
		n = nupp_traces_expand(tc, &st, out, (int)(sizeof(out) / sizeof(out[0])));
		ck_assert_int_eq(n, 1);
		len += snprintf(buf + len, size - len, "%s%d", len ? " " : "",
				(int)lj_debug_line(pt, (BCPos)out[0].pos));
	}
}

START_TEST(comparison_snapshots_name_the_comparison)
{
	lua_State *L = luaL_newstate();
	struct nupp_traces *tc;
	GCproto *pt;
	char lines[256];

	luaL_openlibs(L);
	ck_assert_int_eq(luaL_loadbuffer(L, chunk_if, strlen(chunk_if), "=snapif"), 0);
	ck_assert_int_eq(lua_pcall(L, 0, 1, 0), 0);
	pt = funcproto((GCfunc *)lua_topointer(L, 1));
	tc = nupp_traces_new(&luajit_bpf_layout, self_read, NULL);
	/* The for loop (pre-roll, then loop part): line 4's loads; the never-true `if` on
	 * line 5 (it resumes at line 6, which the trace never runs); the always-true `if` on
	 * line 8 (it resumes at line 11, after its `end`); line 9, where the trace follows
	 * the branch; the FORL's exit guard on the for line 3 (it resumes at line 13). */
	loop_lines(L, tc, pt, 3, lines, sizeof(lines));
	ck_assert_str_eq(lines, "4 5 8 9 3 4 5 8 3");
	/* The while loop: line 15's work and the `j < n` comparison on line 14 (it resumes
	 * at line 17, after the loop). */
	loop_lines(L, tc, pt, 14, lines, sizeof(lines));
	ck_assert_str_eq(lines, "15 14 15 14");
	/* The repeat loop: line 19's work and the `until` comparison on line 20 (it resumes
	 * at line 21, after the loop). */
	loop_lines(L, tc, pt, 18, lines, sizeof(lines));
	ck_assert_str_eq(lines, "19 20 19 20");
	nupp_traces_free(tc);
	lua_close(L);
}
END_TEST

/* Each incarnation of a trace is named by its own copy, told apart by its serial (no
 * probe marks a trace's end): at the same address, number and machine code (after a
 * flush), a sample of incarnation k is named by k's copy, never by k+1's, whichever came
 * last, and a sample of an incarnation with no copy is refused unless the target still
 * runs that one. Another VM's copy with the same serial elsewhere changes nothing. */
START_TEST(trace_serial_names_each_incarnation)
{
	lua_State *L = luaL_newstate();
	static struct nupp_smp_trace_event ev, ev2, ev3;
	GCproto *phot, *pinner;
	GCtrace *T = hot_loop_trace(L, &phot, &pinner);
	struct nupp_traces *live, *copy;
	struct nupp_smp_stack st;
	struct nupp_smp_frame a[NUPP_SMP_MAX_DEPTH + 16], b[NUPP_SMP_MAX_DEPTH + 16];
	struct nupp_smp_trace_fn *fns;
	const __u64 g = vm_g(L);
	size_t size;
	__u32 i, s1 = T->serial + 100, s2 = T->serial + 101;
	int na, moved = 0;

	size = make_event(g, T, &ev);
	live = nupp_traces_new(&luajit_bpf_layout, self_read, NULL);
	copy = nupp_traces_new(&luajit_bpf_layout, self_read, NULL);
	ck_assert_int_eq(nupp_traces_add(live, g, (__u64)(uintptr_t)T, T->traceno, T->serial, 0), 0);
	trace_sample(&st, g, T, phot, 1);
	/* A snapshot inside the inlined inner(): its frame is named from the copy's table. */
	na = 0;
	for (i = 0; i < T->nsnap && na != 2; i++) {
		st.mcofs = T->snap[i].mcofs;
		na = nupp_traces_expand(live, &st, a, NUPP_SMP_MAX_DEPTH);
	}
	ck_assert_int_eq(na, 2);
	ck_assert_uint_eq(a[0].ptr, (__u64)(uintptr_t)pinner);
	/* Incarnations s1 and s2: same address, number and machine code, told apart by
	 * their serials; s2's copy could not name inner(). */
	ev.h.serial = s1;
	memcpy(ev.data + luajit_bpf_layout.T_serial, &s1, 4);
	memcpy(&ev2, &ev, sizeof(ev));
	ev2.h.serial = s2;
	memcpy(ev2.data + luajit_bpf_layout.T_serial, &s2, 4);
	fns = (struct nupp_smp_trace_fn *)(ev2.data + NUPP_SMP_TRACE_FN_OFS(ev2.size));
	for (i = 0; i < ev2.nfn; i++)
		if (fns[i].ptr == (__u64)(uintptr_t)pinner) {
			fns[i].kind = 0;
			moved++;
		}
	ck_assert_int_eq(moved, 1);
	for (i = 0; i < 2; i++) {
		/* In either order of arrival. */
		ck_assert_int_eq(nupp_traces_add_copy(copy, i ? &ev2 : &ev, size), 0);
		ck_assert_int_eq(nupp_traces_add_copy(copy, i ? &ev : &ev2, size), 0);
		ck_assert_int_eq(nupp_traces_add_copy(copy, &ev2, size), 0); /* again: no change */
		st.tserial = s1;
		ck_assert_int_eq(nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH), na);
		ck_assert_mem_eq(a, b, sizeof(a[0]) * na);
		st.tserial = s2;
		ck_assert_int_eq(nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH), -ENOENT);
		/* s1 + 2: no copy, and not readable: refused; readable, still refused (the
		 * target's trace there is another incarnation). */
		st.tserial = s1 + 2;
		fail_reads = 1;
		ck_assert_int_eq(nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH), -ENOENT);
		fail_reads = 0;
		ck_assert_int_eq(nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH), -ENOENT);
		nupp_traces_purge(copy, 100000000ull * (i + 1));
	}
	/* The incarnation the target runs is read and named. */
	st.tserial = T->serial;
	ck_assert_int_eq(nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH), na);
	ck_assert_mem_eq(a, b, sizeof(a[0]) * na);
	/* Another VM's trace elsewhere with s1's serial: s1 is still named by its own. */
	ck_assert_int_eq(nupp_traces_add_copy(copy, &ev, size), 0);
	memcpy(&ev3, &ev, sizeof(ev));
	ev3.h.trace += 0x100000;
	ev3.h.g = g + 0x1000;
	ck_assert_int_eq(nupp_traces_add_copy(copy, &ev3, size), 0);
	st.tserial = s1;
	ck_assert_int_eq(nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH), na);
	fail_reads = 1;
	ck_assert_int_eq(nupp_traces_expand(copy, &st, b, NUPP_SMP_MAX_DEPTH), na);
	ck_assert_mem_eq(a, b, sizeof(a[0]) * na);
	caches_done(live, copy, L);
}
END_TEST

NUPP_CHECK_MAIN("snapshot", 0, false, false, snap_search_is_rightmost_le,
		trace_snapshots_give_lines_and_inlined_frames, trace_copy_names_as_the_live_trace,
		trace_copy_freed_before_decode_and_pooled, comparison_snapshots_name_the_comparison,
		trace_serial_names_each_incarnation)
