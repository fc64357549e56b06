/* Helpers of the trace decoder's unit tests: reads of this process's memory (the traces
 * are ours), a trace sample, and the TRACE_COPY event BPF would make of a trace. Compiled
 * against LuaJIT's internal headers. */
#ifndef NUPP_LJ_SNAPSHOT_TEST_H
#define NUPP_LJ_SNAPSHOT_TEST_H

#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "lua.h"
#include "lauxlib.h"
#include "lj_obj.h"
#include "lj_frame.h"
#include "lj_jit.h"
#include "lj_ir.h"

#include "core/sampler_internal.h"

extern const struct nupp_lj_layout luajit_bpf_layout;

static int fail_reads;

/* Reads this process's memory (the trace is ours), or fails on demand. */
static int self_read(void *ctx, __u64 addr, void *buf, size_t len)
{
	if (fail_reads)
		return -EFAULT;
	memcpy(buf, (const void *)(uintptr_t)addr, len);
	return 0;
}

/* Ends a test of a live cache and a copy cache of VM L: reads work again, all freed. */
static void caches_done(struct nupp_traces *live, struct nupp_traces *copy, lua_State *L)
{
	fail_reads = 0;
	nupp_traces_free(live);
	nupp_traces_free(copy);
	lua_close(L);
}

/* Frame of a Lua proto. */
static struct nupp_smp_frame lua_frame(GCproto *pt, int pos)
{
	struct nupp_smp_frame f = { 0 };

	f.kind = NUPP_SMP_LUA;
	f.ptr = (__u64)(uintptr_t)pt;
	f.chunkname = (__u64)(uintptr_t)gcref(pt->chunkname);
	f.firstline = pt->firstline;
	f.sizebc = pt->sizebc;
	f.pos = pos;
	f.link = FRAME_LUA;
	return f;
}

/* The global_State of L, as a sample carries it. */
static __u64 vm_g(lua_State *L)
{
	return (__u64)(uintptr_t)G(L);
}

/* A sample in trace T of VM g whose innermost frame (jit_base's) runs pt, depth frames
 * deep. */
static void trace_sample(struct nupp_smp_stack *st, __u64 g, GCtrace *T, GCproto *pt, __u32 depth)
{
	memset(st, 0, sizeof(*st));
	st->depth = depth;
	st->flags = NUPP_SMP_F_TRACE | NUPP_SMP_F_MCODE;
	st->traceno = T->traceno;
	st->trace = (__u64)(uintptr_t)T;
	st->mcode = (__u64)(uintptr_t)T->mcode;
	st->tserial = T->serial;
	st->g = g;
	st->frames[0] = lua_frame(pt, -1);
}

/* A prototype's fingerprint in a trace copy's function table. */
static void proto_fn(struct nupp_smp_trace_fn *f, GCproto *pt)
{
	f->kind = NUPP_SMP_LUA;
	f->ptr = (__u64)(uintptr_t)pt;
	f->chunkname = (__u64)(uintptr_t)gcref(pt->chunkname);
	f->firstline = pt->firstline;
	f->sizebc = pt->sizebc;
	f->sizept = pt->sizept;
}

/* The TRACE_COPY event BPF makes at a trace's first sample (bpf/sampler/trace_copy.h
 * smp_trace_copy_all), made here from LuaJIT's own view of trace T of VM g: the block
 * from T to the end of its snapshot map, and its function and prototype constants (every
 * one of its frames' functions is one, or its prototype is) with their prototypes'
 * fingerprints, plus the start prototype. */
static size_t make_event(__u64 g, GCtrace *T, struct nupp_smp_trace_event *ev)
{
	char *end = (char *)(T->snapmap + T->nsnapmap);
	size_t size = (size_t)(end - (char *)T);
	struct nupp_smp_trace_fn fns[NUPP_SMP_TRACE_FNS + 1];
	IRRef ref;

	memset(ev, 0, sizeof(*ev));
	memset(fns, 0, sizeof(fns));
	ck_assert_uint_le(size, NUPP_SMP_TRACE_MAX);
	ev->h.kind = NUPP_SMP_EV_TRACE_COPY;
	ev->h.g = g;
	ev->h.trace = (__u64)(uintptr_t)T;
	ev->h.traceno = T->traceno;
	ev->h.serial = T->serial;
	ev->h.mcode = (__u64)(uintptr_t)T->mcode;
	ev->size = (__u32)size;
	memcpy(ev->data, T, size);
	/* The constants as the GC walks them (lj_gc.c gc_traverse_trace). */
	for (ref = T->nk; ref < REF_TRUE; ref++) {
		IRIns *ir = &T->ir[ref];

		if (ir->o == IR_KGC && irt_type(ir->t) == IRT_PROTO) {
			GCproto *pt = ir_kgc(ir) ? gco2pt(ir_kgc(ir)) : NULL;

			ck_assert_uint_lt(ev->nfn, NUPP_SMP_TRACE_FNS);
			fns[ev->nfn].fn = (__u64)(uintptr_t)pt | NUPP_SMP_TRACE_FN_PROTO;
			proto_fn(&fns[ev->nfn++], pt);
		} else if (ir->o == IR_KGC && irt_type(ir->t) == IRT_FUNC) {
			GCfunc *fn = ir_kfunc(ir);
			struct nupp_smp_trace_fn *f;

			ck_assert_uint_lt(ev->nfn, NUPP_SMP_TRACE_FNS);
			f = &fns[ev->nfn++];
			f->fn = (__u64)(uintptr_t)fn;
			if (isluafunc(fn)) {
				proto_fn(f, funcproto(fn));
			} else {
				f->kind = iscfunc(fn) ? NUPP_SMP_C : NUPP_SMP_FF;
				f->ptr = iscfunc(fn) ? (__u64)(uintptr_t)fn->c.f : fn->c.ffid;
			}
		}
		if (irt_is64(ir->t) && ir->o != IR_KNULL)
			ref++;
	}
	proto_fn(&fns[ev->nfn++], &gcref(T->startpt)->pt);
	/* The functions follow the trace (NUPP_SMP_TRACE_FN_OFS), only those used. */
	memcpy(ev->data + NUPP_SMP_TRACE_FN_OFS(size), fns, ev->nfn * sizeof(*fns));
	return offsetof(struct nupp_smp_trace_event, data) + NUPP_SMP_TRACE_FN_OFS(size) + ev->nfn * sizeof(*fns);
}

#endif
