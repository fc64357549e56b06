/* The frame walker (include/nupp/walk.h) on fake VM memory built with the real layout:
 * every frame kind, nupp_walk_start's rules, call/return windows, vararg pseudo-frames,
 * continuation and pcall frames, traces, coroutines, and bounded, counted failures. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "nupp/lj_layout.h"
#include "core/sampler_internal.h"

/* -- Fake memory: reads succeed only inside the arena ------------------------- */

#define ARENA_SIZE (1 << 20)
static unsigned char *arena;
static int reads;
static __u64 fail_lo, fail_hi; /* reads of more than 16 bytes starting here fail (a page out) */

/* The walker's reader: memcpy inside the arena, else zero + -EFAULT like the helper. */
static int fake_read(void *dst, unsigned long sz, __u64 addr)
{
	reads++;
	if (addr < (__u64)(uintptr_t)arena || addr + sz > (__u64)(uintptr_t)arena + ARENA_SIZE ||
	    (sz > 16 && addr >= fail_lo && addr < fail_hi)) {
		memset(dst, 0, sz);
		return -EFAULT;
	}
	memcpy(dst, (void *)(uintptr_t)addr, sz);
	return 0;
}

#define NUPP_WALK_READ(dst, sz, addr) fake_read((dst), (sz), (__u64)(addr))
/* As the sampler includes it: the prototypes of frames read are noted. */
#define NUPP_WALK_WATCH 1
/* Every walk of these tests checks nupp_walk_cframe against the full step (cframe_checked). */
struct nupp_walk;
struct nupp_lj_layout;
static int cframe_checked(struct nupp_walk *w, const struct nupp_lj_layout *l);
#define NUPP_WALK_CFRAME_RUN(w, l) cframe_checked((w), (l))
/* ... and nupp_walk_cached against as many full steps (cached_checked). */
static __u32 cached_checked(struct nupp_walk *w, const struct nupp_lj_layout *l);
#define NUPP_WALK_CACHED_RUN(w, l) cached_checked((w), (l))
static __u32 repeat_unless_ref(struct nupp_walk *w);
#define NUPP_WALK_REPEAT_RUN(w) repeat_unless_ref(w)
#include "nupp/walk.h"

/* Set while a reference walk takes full steps only: no repeat, cframe or cache run. */
static int cframe_in_ref;

static __u32 repeat_unless_ref(struct nupp_walk *w)
{
	return cframe_in_ref ? 0 : nupp_walk_repeat(w);
}

/* nupp_walk_cached, checked: a run that took frames leaves the walk as the full step,
 * taken as many times (one per frame and per pseudo-frame stepped over) on a copy made
 * before, leaves it: the same stack and key, and the same state for what comes next
 * (skip_fn when skip is set, ins_val when ins_pc is, rep_fn and rep_link when rep_delta
 * is: the walk reads them only then). Counted: pseudo-frames the runs stepped over, runs
 * that ended above a pseudo-frame (skip set) for the full step, and differences, which
 * the checked fixture fails a test on. */
static unsigned long cached_runs, cached_pseudo, cached_skip_left, cached_differ;
static struct nupp_walk cached_pre, cached_ref;

static int cached_same(const struct nupp_walk *a, const struct nupp_walk *b)
{
	return a->frame == b->frame && a->pc_above == b->pc_above && a->skip == b->skip &&
	       (!a->skip || a->skip_fn == b->skip_fn) && a->ins_pc == b->ins_pc &&
	       (!a->ins_pc || a->ins_val == b->ins_val) && a->rep_delta == b->rep_delta &&
	       (!a->rep_delta || (a->rep_fn == b->rep_fn && a->rep_link == b->rep_link)) && a->iter == b->iter &&
	       a->hash == b->hash && a->gmix == b->gmix && a->last_gen == b->last_gen && a->result == b->result &&
	       a->fc_hits == b->fc_hits && !memcmp(&a->st, &b->st, sizeof(a->st));
}

static __u32 cached_checked(struct nupp_walk *w, const struct nupp_lj_layout *l)
{
	__u32 k, n, i;

	if (cframe_in_ref)
		return 0;
	cached_pre = *w;
	k = nupp_walk_cached(w, l);
	if (!k)
		return 0;
	n = w->iter - cached_pre.iter;
	cached_runs++;
	cached_pseudo += n - k;
	cached_skip_left += w->skip;
	cached_ref = cached_pre;
	cframe_in_ref = 1;
	for (i = 0; i < n; i++)
		if (nupp_walk_step(&cached_ref, l))
			break;
	/* a run that stops at the depth cuts the stack: the step of the next frame would */
	if (w->result != NUPP_WALK_RUN && cached_ref.result == NUPP_WALK_RUN)
		nupp_walk_step(&cached_ref, l);
	cframe_in_ref = 0;
	if (!cached_same(&cached_ref, w))
		cached_differ++;
	return k;
}

/* nupp_walk_cframe, checked: when it takes a frame, the walk it leaves is byte for byte
 * the one the full step leaves on a copy taken before (fc_looks apart); when it refuses,
 * the walk is as it was but for what the full step then does anyway (the memo, fc_fns,
 * and the frame cache entries checked for this count of frees). Counted per test (each
 * runs in a process of its own); the checked fixture fails a test with a difference. */
static unsigned long cframe_taken, cframe_refused, cframe_differ;
static struct nupp_walk cframe_pre, cframe_ref;

static int cframe_checked(struct nupp_walk *wk, const struct nupp_lj_layout *l)
{
	int k;

	if (cframe_in_ref)
		return 0;
	cframe_pre = *wk;
	k = nupp_walk_cframe(wk, l);
	if (k) {
		cframe_ref = cframe_pre;
		cframe_in_ref = 1;
		nupp_walk_step(&cframe_ref, l);
		cframe_in_ref = 0;
		cframe_ref.fc_looks = wk->fc_looks;
		cframe_taken++;
		if (memcmp(&cframe_ref, wk, sizeof(*wk)))
			cframe_differ++;
	} else {
		cframe_ref = *wk;
		memcpy(cframe_ref.fns, cframe_pre.fns, sizeof(cframe_ref.fns));
		memcpy(cframe_ref.fc, cframe_pre.fc, sizeof(cframe_ref.fc));
		cframe_ref.fc_fns = cframe_pre.fc_fns;
		cframe_ref.fc_looks = cframe_pre.fc_looks;
		cframe_ref.fc_pgreads = cframe_pre.fc_pgreads;
		cframe_ref.fc_stale = cframe_pre.fc_stale;
		cframe_refused++;
		if (memcmp(&cframe_ref, &cframe_pre, sizeof(*wk)))
			cframe_differ++;
	}
	return k;
}

/* The checked fixture after each test: no walk of it saw nupp_walk_cframe or
 * nupp_walk_cached differ from the full step. */
static void cframe_none_differ(void)
{
	ck_assert_msg(!cframe_differ, "nupp_walk_cframe differed from the full step %lu times (%lu taken, %lu refused)",
		      cframe_differ, cframe_taken, cframe_refused);
	ck_assert_msg(!cached_differ, "nupp_walk_cached differed from the full steps %lu times of %lu runs",
		      cached_differ, cached_runs);
}

extern const struct nupp_lj_layout luajit_bpf_layout;
static const struct nupp_lj_layout *lo = &luajit_bpf_layout;

/* Arena layout (offsets): GG at 0x1000, stacks at 0x10000 (main) and 0x20000 (coroutine),
 * objects from 0x40000, C stack (cframes) at 0x80000, trace mcode at 0xc0000. */
static __u64 A(__u64 ofs) { return (__u64)(uintptr_t)arena + ofs; }
static void put64(__u64 addr, __u64 v) { memcpy((void *)(uintptr_t)addr, &v, 8); }
static void put32(__u64 addr, __u32 v) { memcpy((void *)(uintptr_t)addr, &v, 4); }
static void put8(__u64 addr, __u8 v) { *(__u8 *)(uintptr_t)addr = v; }

static __u64 g, mainL, coL, stack0, costack, objs;

/* Allocates zeroed object memory, 16-byte aligned. */
static __u64 alloc_obj(__u32 size)
{
	__u64 p = objs;

	objs += (size + 15) & ~15u;
	return p;
}

/* A string object for chunk names. */
static __u64 new_str(const char *s)
{
	__u64 p = alloc_obj(lo->str_size + strlen(s) + 1);

	put32(p + lo->str_len, (__u32)strlen(s));
	memcpy((void *)(uintptr_t)(p + lo->str_size), s, strlen(s) + 1);
	return p;
}

/* A Lua prototype with sizebc CALL instructions (A = 3 each) and its closure. */
static __u64 new_lua_fn(__u32 sizebc, __s32 firstline, __u64 *pt_out)
{
	__u64 pt = alloc_obj(lo->pt_size + 4 * sizebc), fn = alloc_obj(64);
	__u32 i;

	put8(pt + lo->pt_gct, lo->gct_proto);
	put32(pt + lo->pt_sizebc, sizebc);
	put64(pt + lo->pt_chunkname, new_str("@test.lua"));
	put32(pt + lo->pt_firstline, (__u32)firstline);
	put32(pt + lo->pt_sizept, lo->pt_size + 4 * sizebc);
	for (i = 0; i < sizebc; i++)
		put32(pt + lo->pt_size + 4 * i, 0x41u /* some op */ | (3u << lo->bc_a_shift));
	put8(fn + lo->fn_gct, lo->gct_func);
	put8(fn + lo->fn_ffid, lo->ff_lua);
	put64(fn + lo->fn_pc, pt + lo->pt_size);
	if (pt_out)
		*pt_out = pt;
	return fn;
}

/* A fast function (ffid > 1) or C function (ffid 1, with address cf). */
static __u64 new_c_fn(__u8 ffid, __u64 cf)
{
	__u64 fn = alloc_obj(64);

	put8(fn + lo->fn_gct, lo->gct_func);
	put8(fn + lo->fn_ffid, ffid);
	put64(fn + lo->fn_cf, cf);
	return fn;
}

/* Return PC after instruction pos of the closure fn. */
static __u64 ret_pc(__u64 fn, __u32 pos)
{
	__u64 bc;

	memcpy(&bc, (void *)(uintptr_t)(fn + lo->fn_pc), 8);
	return bc + 4ull * (pos + 1);
}

/* Writes a frame header at base: function (tagged TValue) and link. */
static void frame(__u64 base, __u64 fn, __u64 link)
{
	put64(base - 16, ((__u64)lo->itype_func << lo->itype_shift) | fn);
	put64(base - 8, link);
}

/* The base of a Lua callee called at slot 3 by a caller frame at base b. */
static __u64 callee(__u64 b) { return b + 8 * (3 + 2); }

/* Fresh VM state: g, main thread, stack bottom, interpreter range. */
static void setup(void)
{
	/* At a fixed address when free, so frame cache slots (hashes of addresses) are the
	 * same in every run. */
	if (!arena) {
		void *p = mmap((void *)0x200000000000ull, ARENA_SIZE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

		arena = p == MAP_FAILED ? aligned_alloc(4096, ARENA_SIZE) : p;
	}
	memset(arena, 0, ARENA_SIZE);
	g = A(0x1000) - (__s64)lo->gg_g2l; /* GG_State (main lua_State first) at 0x1000 */
	mainL = g + (__s64)lo->gg_g2l;
	stack0 = A(0x10000);
	costack = A(0x20000);
	objs = A(0x40000);
	put64(mainL + lo->L_stack, stack0);
	put32(mainL + lo->L_stacksize, 1024);
	put64(mainL + lo->L_glref, g);
	put64(g + lo->g_cur_L, mainL);
	put32(g + lo->g_vmstate, (__u32)lo->vmst_interp);
	/* stack[0] = the thread, stack[1] = nil: bottom (lj_state.c:134-136). */
	put64(stack0, ((__u64)lo->itype_thread << lo->itype_shift) | mainL);
	reads = 0;
	fail_lo = fail_hi = 0;
}

static struct nupp_walk w;
/* The stack of the last walk, for comparisons. */
static struct nupp_smp_stack saved;

/* Registers for an interpreter sample (REGS mode) with BASE and PC. */
static struct nupp_walk_regs regs_interp(__u64 base, __u64 pc)
{
	struct nupp_walk_regs r = { .ip = lo->vm_begin, .rbx = pc, .rdx = base, .rbp = 0 };

	r.r14 = g - (__s64)lo->gg_disp2g;
	return r;
}

/* The sampled thread's stack in these tests: [THREAD_SP, THREAD_TOP), the VM's C frame
 * (L->cframe) at THREAD_CF on it. */
#define THREAD_SP A(0x70000)
#define THREAD_CF A(0x80000)
#define THREAD_TOP A(0x90000)

/* Registers of a sample outside the interpreter's code on the thread running the VM
 * (its C frame, set to THREAD_CF if none, lies above its SP). */
static void on_vm_thread(struct nupp_walk_regs *r)
{
	__u64 L;

	memcpy(&L, (void *)(uintptr_t)(g + lo->g_cur_L), 8);
	if (!(r->ip >= lo->vm_begin && r->ip < lo->vm_end && r->r14 == g - (__s64)lo->gg_disp2g)) {
		__u64 cf;

		memcpy(&cf, (void *)(uintptr_t)(L + lo->L_cframe), 8);
		if (!cf)
			put64(L + lo->L_cframe, THREAD_CF);
	}
	if (!r->sp && !r->stk_top) {
		r->sp = THREAD_SP;
		r->stk_top = THREAD_TOP;
	}
}

/* Starts and runs a walk of the thread that runs the VM; returns the result. */
static int walk(const struct nupp_walk_regs *r0, __u32 depth)
{
	struct nupp_walk_regs rr = *r0, *r = &rr;
	__s32 vms;
	int err;

	on_vm_thread(r);
	err = nupp_walk_start(&w, lo, g, r, depth, NUPP_WALK_BASE_AUTO, &vms);
	if (err)
		return err;
	if (w.mode == NUPP_WALK_TRACE)
		nupp_walk_trace(&w, lo, vms, r->ip);
	return nupp_walk_run(&w, lo);
}

/* A chain main(Lua) -> f(Lua) -> leaf; returns leaf's base. Bases in *b0, *b1. */
static __u64 chain3(__u64 *fmain, __u64 *ff, __u64 leaf, __u64 *b0, __u64 *b1)
{
	__u64 base0 = stack0 + 32; /* main chunk: stack+2 slots is its frame header */

	*fmain = new_lua_fn(20, 0, NULL);
	*ff = new_lua_fn(20, 10, NULL);
	/* the main chunk is called from C (lua_pcall): a C-typed link at the bottom */
	frame(base0, *fmain, 0x18 | lo->frame_cp);
	*b0 = base0;
	*b1 = callee(base0);
	frame(*b1, *ff, ret_pc(*fmain, 4));
	frame(callee(*b1), leaf, ret_pc(*ff, 7));
	return callee(*b1);
}

/* The VM runs trace 3 (0x200 bytes of machine code at mcode, in J->trace of 8, serial 7,
 * the VM's newest), entered with jit_base = base; returns its GCtrace, the trace array
 * in *arr. */
static __u64 on_trace3(__u64 base, __u64 mcode, __u64 *arr)
{
	__u64 J = g + (__s64)lo->gg_g2j, T;

	*arr = alloc_obj(8 * 8);
	T = alloc_obj(lo->T_size);
	put64(J + lo->J_trace, *arr);
	put32(J + lo->J_sizetrace, 8);
	put64(*arr + 8 * 3, T);
	put64(T + lo->T_mcode, mcode);
	put32(T + lo->T_szmcode, 0x200);
	put32(T + lo->T_serial, 7);
	put32(g + lo->g_tserial, 7);
	put64(g + lo->g_jit_base, base);
	put32(g + lo->g_vmstate, 3);
	return T;
}

START_TEST(walk_registers_three_lua_frames)
{
	__u64 fm, ff, b0, b1, pt, leaf, b2;

	setup();
	leaf = new_lua_fn(30, 20, &pt);
	b2 = chain3(&fm, &ff, leaf, &b0, &b1);
	{
		struct nupp_walk_regs r = regs_interp(b2, ret_pc(leaf, 11));

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	}
	ck_assert_int_eq(w.mode, NUPP_WALK_REGS);
	ck_assert_uint_eq(w.st.depth, 3);
	ck_assert_uint_eq(w.st.frames[0].kind, NUPP_SMP_LUA);
	ck_assert_uint_eq(w.st.frames[0].ptr, pt);
	ck_assert_int_eq(w.st.frames[0].pos, 11);
	ck_assert_int_eq(w.st.frames[0].firstline, 20);
	ck_assert_uint_eq(w.st.frames[0].sizebc, 30);
	ck_assert_uint_eq(w.st.frames[0].link, lo->frame_lua);
	ck_assert_int_eq(w.st.frames[1].pos, 7);
	ck_assert_int_eq(w.st.frames[2].pos, 4);
	ck_assert_uint_eq(w.st.frames[2].link, lo->frame_cp);
}
END_TEST

START_TEST(walk_fast_and_c_functions)
{
	__u64 fm, ff, b0, b1, b2, pcallf, cf;

	setup();
	pcallf = new_c_fn(20, 0);
	b2 = chain3(&fm, &ff, pcallf, &b0, &b1);
	{
		/* inside an ASM fast function rbx points into GG->bcff */
		struct nupp_walk_regs r = regs_interp(b2, A(0x1000) + lo->gg_size - 64);

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	}
	ck_assert_uint_eq(w.st.depth, 3);
	ck_assert_uint_eq(w.st.frames[0].kind, NUPP_SMP_FF);
	ck_assert_uint_eq(w.st.frames[0].ptr, 20);

	/* a lua_pushcfunction function in vmstate C: memory mode from L->base */
	setup();
	cf = new_c_fn(lo->ff_c, 0x401234);
	b2 = chain3(&fm, &ff, cf, &b0, &b1);
	put64(mainL + lo->L_base, b2);
	put32(g + lo->g_vmstate, (__u32)lo->vmst_c);
	{
		struct nupp_walk_regs r = { .ip = 0x401240, .rbx = 0, .rdx = 0, .r14 = 0 };

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	}
	ck_assert_int_eq(w.mode, NUPP_WALK_MEM);
	ck_assert_uint_eq(w.st.depth, 3);
	ck_assert_uint_eq(w.st.frames[0].kind, NUPP_SMP_C);
	ck_assert_uint_eq(w.st.frames[0].ptr, 0x401234);
	ck_assert_int_eq(w.st.frames[1].pos, 7);
}
END_TEST

START_TEST(walk_memory_mode_leaf_pc_from_save_pc)
{
	__u64 fm, ff, b0, b1, b2, pt, leaf, cf;

	setup();
	cf = A(0x80000);
	leaf = new_lua_fn(30, 20, &pt);
	b2 = chain3(&fm, &ff, leaf, &b0, &b1);
	/* GC state: L->base synced, leaf PC from SAVE_PC of the C frame */
	put32(g + lo->g_vmstate, (__u32)lo->vmst_gc);
	put64(mainL + lo->L_base, b2);
	put64(mainL + lo->L_cframe, cf);
	put64(cf + lo->cframe_ofs_pc, ret_pc(leaf, 5));
	{
		struct nupp_walk_regs r = { .ip = 0x500000, .rbx = 0x1234, .rdx = 0, .r14 = 0 };

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	}
	ck_assert_uint_eq(w.st.depth, 3);
	ck_assert_int_eq(w.st.frames[0].pos, 5);
	ck_assert_uint_eq(nupp_walk_state(lo, lo->vmst_gc), NUPP_SMP_COLLECTING);
}
END_TEST

START_TEST(walk_call_window_uses_rbx_as_link)
{
	__u64 fm, ff, b0, b1, b2, leaf;

	setup();
	leaf = new_lua_fn(30, 20, NULL);
	b2 = chain3(&fm, &ff, leaf, &b0, &b1);
	/* BC_CALL window: BASE already moved, the link not yet written (stale garbage) and
	 * the function slot holds a number; rbx is still the caller's return PC. */
	put64(b2 - 16, 0x4045000000000000ull);
	put64(b2 - 8, 0xdead0);
	{
		struct nupp_walk_regs r = regs_interp(b2, ret_pc(ff, 7));

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	}
	ck_assert_uint_eq(w.st.depth, 2); /* the callee is not known yet: caller is the leaf */
	ck_assert_int_eq(w.st.frames[0].pos, 7);
	ck_assert_int_eq(w.st.frames[1].pos, 4);
}
END_TEST

START_TEST(walk_return_window_and_stale_link)
{
	__u64 fm, ff, b0, b1, b2, leaf;

	setup();
	leaf = new_lua_fn(30, 20, NULL);
	b2 = chain3(&fm, &ff, leaf, &b0, &b1);
	/* BC_RET window: rbx is already the caller's return PC, outside the leaf */
	{
		struct nupp_walk_regs r = regs_interp(b2, ret_pc(ff, 7));

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	}
	ck_assert_uint_eq(w.st.depth, 2);
	ck_assert_int_eq(w.st.frames[0].pos, 7);

	/* a stale link: the return PC does not lie in the caller -> refused, counted */
	setup();
	leaf = new_lua_fn(30, 20, NULL);
	b2 = chain3(&fm, &ff, leaf, &b0, &b1);
	put64(b2 - 8, ret_pc(fm, 7)); /* link into main, but the frame below is f */
	{
		struct nupp_walk_regs r = regs_interp(b2, ret_pc(leaf, 3));

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_BAD_FRAME);
	}
}
END_TEST

START_TEST(walk_vararg_pseudo_frame_is_skipped)
{
	__u64 fm, ff, b0, b1, b2, vf, pt, pseudo, real;

	setup();
	vf = new_lua_fn(30, 40, &pt);
	b2 = chain3(&fm, &ff, vf, &b0, &b1); /* pseudo-frame: the original call */
	pseudo = b2;
	/* BC_IFUNCV copies the function above the args: real frame 4 slots higher with a
	 * FRAME_VARG link whose delta points back to the pseudo-frame */
	real = pseudo + 8 * 4;
	frame(real, vf, (real - pseudo) | lo->frame_varg);
	{
		struct nupp_walk_regs r = regs_interp(real, ret_pc(vf, 2));

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	}
	ck_assert_uint_eq(w.st.depth, 3); /* vf once, then f, main */
	ck_assert_uint_eq(w.st.frames[0].ptr, pt);
	ck_assert_int_eq(w.st.frames[0].pos, 2);
	ck_assert_uint_eq(w.st.frames[0].link, lo->frame_lua); /* relinked to the real call */
	ck_assert_int_eq(w.st.frames[1].pos, 7);
}
END_TEST

START_TEST(walk_vararg_pseudo_frame_of_a_cached_frame_is_not_read)
{
	__u64 fm, ff, b0, b1, b2, vf, pt, real, hash;
	int pass;

	setup();
	vf = new_lua_fn(30, 40, &pt);
	b2 = chain3(&fm, &ff, vf, &b0, &b1);
	real = b2 + 8 * 4;
	frame(real, vf, (real - b2) | lo->frame_varg);
	{
		struct nupp_walk_regs r = regs_interp(real, ret_pc(vf, 2));

		w.fc_tag = 0;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		hash = w.hash;
		saved = w.st;
		/* filled, then hit: vf, f and main from the cache; the pseudo-frame holds vf,
		 * which the cache hit above it stands for, and its link's CALL is held by
		 * f's entry (f's PC is that link): nothing of them is read */
		w.fc_tag = (400ull << 22) | 9;
		for (pass = 0; pass < 2; pass++) {
			reads = 0;
			ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
			ck_assert_uint_eq(w.hash, hash);
			ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
		}
		ck_assert_uint_eq(w.fc_hits, 3);
		ck_assert_int_eq(reads, 2); /* VM state, stack window */

		/* a pseudo-frame holding something else is read and refused, cache or not */
		put64(b2 - 16, ((__u64)lo->itype_func << lo->itype_shift) | new_str("not a function"));
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_BAD_FRAME);
		w.fc_tag = 0;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_BAD_FRAME);
	}
}
END_TEST

/* A stack main -> [m ->] v -> f -> leaf on a fresh VM: v a vararg function, its
 * pseudo-frame at the original call (holding v) and its own frame `slots` slots above,
 * linked down to it (BC_IFUNCV copies the function above its fixed arguments); m (a
 * middle frame) when with_m. Returns the registers of a sample in the leaf. */
struct vstack {
	__u64 fm, m, vf, ff, leaf, b1, pseudo, pt_v;
};

static struct nupp_walk_regs vararg_stack(struct vstack *v, int with_m, __u32 slots)
{
	__u64 b0, real, bf, bl, below;

	setup();
	v->fm = new_lua_fn(20, 0, NULL);
	v->m = with_m ? new_lua_fn(20, 5, NULL) : 0;
	v->vf = new_lua_fn(20, 30, &v->pt_v);
	v->ff = new_lua_fn(20, 10, NULL);
	v->leaf = new_lua_fn(30, 40, NULL);
	b0 = stack0 + 32;
	frame(b0, v->fm, 0x18 | lo->frame_cp);
	below = b0;
	v->b1 = 0;
	if (with_m) {
		v->b1 = callee(b0);
		frame(v->b1, v->m, ret_pc(v->fm, 2));
		below = v->b1;
	}
	v->pseudo = callee(below);
	frame(v->pseudo, v->vf, ret_pc(with_m ? v->m : v->fm, 4));
	real = v->pseudo + 8ull * slots;
	frame(real, v->vf, (real - v->pseudo) | lo->frame_varg);
	bf = callee(real);
	frame(bf, v->ff, ret_pc(v->vf, 5));
	bl = callee(bf);
	frame(bl, v->leaf, ret_pc(v->ff, 7));
	return regs_interp(bl, ret_pc(v->leaf, 11));
}

/* A vararg function in the middle of a stack: main -> v (vararg: its pseudo-frame, the
 * original call, then its frame with a vararg link down to it) -> f -> leaf. Warm, one
 * cache run takes f, v and v's pseudo-frame: the same stack and key as a walk without the
 * cache, in 4 steps (the leaf's, that run, main's run, the end) where full steps for v
 * and for its pseudo-frame made it 6. A pseudo-frame whose original call's CALL the cache
 * does not hold, or that holds another function, is left to the full step. */
START_TEST(walk_vararg_frame_below_the_leaf_is_taken_in_the_cache_run)
{
	struct vstack v;
	struct nupp_walk_regs r;
	int steps, pass;
	__u64 hash;
	__s32 vms;

	r = vararg_stack(&v, 0, 4);
	w.fc_tag = 0;
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	ck_assert_uint_eq(w.st.depth, 4);
	ck_assert_uint_eq(w.st.frames[2].ptr, v.pt_v);
	ck_assert_int_eq(w.st.frames[2].pos, 5);
	ck_assert_uint_eq(w.st.frames[2].link, lo->frame_lua); /* relinked to the original call */
	saved = w.st;
	hash = w.hash;

	w.fc_tag = (401ull << 22) | 9;
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE); /* cold: fills f, v, main */
	for (pass = 0; pass < 2; pass++) {
		on_vm_thread(&r);
		ck_assert_int_eq(nupp_walk_start(&w, lo, g, &r, 64, NUPP_WALK_BASE_AUTO, &vms), 0);
		reads = 0;
		for (steps = 1; !nupp_walk_step(&w, lo) && steps < 64; steps++)
			;
		ck_assert_int_eq(w.result, NUPP_WALK_DONE);
		ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
		ck_assert_uint_eq(w.hash, hash);
		ck_assert_int_eq(steps, 4);
		ck_assert_uint_eq(w.fc_hits, 4); /* the leaf, f, v, main */
	}

	/* the original call's CALL not in the cache: the run stops above the pseudo-frame,
	 * and the full step reads it */
	memset(w.fc, 0, sizeof(w.fc));
	w.fc_tag = (402ull << 22) | 9;
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	{
		struct nupp_walk_fc *c = nupp_walk_fc_call(&w, w.fc_tag, ret_pc(v.fm, 4));

		ck_assert_ptr_nonnull(c);
		c->pg_ins &= ~1u; /* its CALL unknown */
	}
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
	ck_assert_uint_eq(w.hash, hash);

	/* a pseudo-frame below the stack window (a vararg call with 300 arguments, over
	 * 2 KB): the run stops above it, and the full step reads the window holding it */
	r = vararg_stack(&v, 0, 302);
	w.fc_tag = 0;
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	ck_assert_uint_eq(w.st.depth, 4);
	saved = w.st;
	hash = w.hash;
	w.fc_tag = (404ull << 22) | 9;
	for (pass = 0; pass < 3; pass++) {
		unsigned long left = cached_skip_left;

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
		ck_assert_uint_eq(w.hash, hash);
		if (pass)
			ck_assert_uint_eq(cached_skip_left, left + 1); /* warm: left to the full step */
	}

	/* a pseudo-frame holding another function is read by the full step: the same
	 * result with the cache as without */
	r = vararg_stack(&v, 0, 4);
	frame(v.pseudo, v.ff, ret_pc(v.fm, 4));
	w.fc_tag = 0;
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	saved = w.st;
	w.fc_tag = (403ull << 22) | 9;
	for (pass = 0; pass < 3; pass++) {
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
	}
	/* ... and one holding no function is refused, cache or not */
	put64(v.pseudo - 16, ((__u64)lo->itype_func << lo->itype_shift) | new_str("not a function"));
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_BAD_FRAME);
	w.fc_tag = 0;
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_BAD_FRAME);
}
END_TEST

/* The CALL of a pseudo-frame's original call comes from whichever closure's entry holds
 * it at that PC, and is handed to the frame below, whose own entry keeps it: with the
 * frame below a second closure of that prototype, a run taking the pseudo-frame must
 * hand on that CALL, or the new entry would place the frames below it wrongly. */
START_TEST(walk_pseudo_frame_hands_its_call_to_the_frame_below)
{
	struct vstack v;
	struct nupp_walk_regs r;
	__u64 mb, hash;
	int pass;

	r = vararg_stack(&v, 1, 4);
	mb = alloc_obj(64);
	memcpy((void *)(uintptr_t)mb, (void *)(uintptr_t)v.m, 64); /* another closure of m's prototype */
	w.fc_tag = (501ull << 22) | 9;
	for (pass = 0; pass < 3; pass++)
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE); /* m's entries, CALLs known */
	frame(v.b1, mb, ret_pc(v.fm, 2));
	w.fc_tag = 0;
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	saved = w.st;
	hash = w.hash;
	w.fc_tag = (501ull << 22) | 9;
	for (pass = 0; pass < 3; pass++) {
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
		ck_assert_uint_eq(w.hash, hash);
	}
}
END_TEST

/* A builtin called through a continuation (a stitched call) returns into the
 * continuation dispatch: rbx holds the builtin frame's typed link with its type bits
 * cleared, L->base is still the builtin's, and BASE (rdx) is the builtin's or, a few
 * instructions on, already the caller's. The builtin is the leaf, its caller at the
 * continuation's PC; an rbx that is not that link is not taken. */
static int walk_retried(const struct nupp_walk_regs *r, __u32 *attempts);

START_TEST(walk_continuation_dispatch_keeps_the_returning_builtin)
{
	__u64 fm, ff, b0, b1, cb, bi, delta;
	__u32 attempts;
	int rdx_at_caller;

	for (rdx_at_caller = 0; rdx_at_caller < 2; rdx_at_caller++) {
		setup();
		bi = new_c_fn(40, 0x401234); /* a builtin with its own ffid */
		chain3(&fm, &ff, new_lua_fn(5, 1, NULL), &b0, &b1);
		cb = b1 + 8 * 8;
		delta = cb - b1;
		frame(cb, bi, delta | lo->frame_cont);
		put64(cb - 24, ret_pc(ff, 9)); /* contpc: the call's next instruction in f */
		put64(mainL + lo->L_base, cb);
		{
			struct nupp_walk_regs r = regs_interp(rdx_at_caller ? b1 : cb, delta);

			on_vm_thread(&r);
			ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_DONE);
			ck_assert_uint_eq(attempts, rdx_at_caller); /* BASE at the caller: from L->base */
		}
		ck_assert_uint_eq(w.st.depth, 3);
		ck_assert_uint_eq(w.st.frames[0].kind, NUPP_SMP_FF);
		ck_assert_uint_eq(w.st.frames[0].ptr, 40);
		ck_assert_uint_eq(w.st.frames[0].link, lo->frame_cont);
		ck_assert_int_eq(w.st.frames[1].pos, 9); /* from contpc */
		ck_assert_int_eq(w.st.frames[2].pos, 4);

		/* rbx another value: not this frame's link, refused */
		{
			struct nupp_walk_regs r = regs_interp(rdx_at_caller ? b1 : cb, delta + 8);

			on_vm_thread(&r);
			ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_BAD_FRAME);
		}
	}
}
END_TEST

/* coroutine.wrap's function around its call of vm_resume: L->base at its frame, its
 * link stored as SAVE_PC, PC (rbx) a scratch pointer, and BASE (rdx) its base before the
 * call or garbage right after it (then the second attempt, from L->base). The builtin is
 * the leaf; with SAVE_PC another value it is not taken. */
START_TEST(walk_fast_function_calling_out_is_proven_by_save_pc)
{
	__u64 fm, ff, b0, b1, b2, wrap;
	__u32 attempts;
	int proven, k;

	for (k = 0; k < 4; k++) {
		int after_call = k >= 2;

		proven = !(k & 1);
		setup();
		wrap = new_c_fn(41, 0);
		b2 = chain3(&fm, &ff, wrap, &b0, &b1);
		put64(mainL + lo->L_base, b2);
		put64(mainL + lo->L_cframe, THREAD_CF);
		put64(THREAD_CF + lo->cframe_ofs_pc, proven ? ret_pc(ff, 7) : ret_pc(ff, 6));
		{
			struct nupp_walk_regs r = regs_interp(after_call ? 0x1234 : b2, costack + 0x100);

			r.sp = THREAD_CF;
			r.stk_top = THREAD_TOP;
			on_vm_thread(&r);
			ck_assert_int_eq(walk_retried(&r, &attempts), proven ? NUPP_WALK_DONE : NUPP_WALK_BAD_FRAME);
		}
		if (!proven)
			continue;
		ck_assert_int_eq(w.mode, after_call ? NUPP_WALK_MEM : NUPP_WALK_REGS);
		ck_assert_uint_eq(attempts, after_call);
		ck_assert_uint_eq(w.st.depth, 3);
		ck_assert_uint_eq(w.st.frames[0].kind, NUPP_SMP_FF);
		ck_assert_uint_eq(w.st.frames[0].ptr, 41);
		ck_assert_int_eq(w.st.frames[1].pos, 7);
		ck_assert_int_eq(w.st.frames[2].pos, 4);
	}
}
END_TEST

START_TEST(walk_continuation_and_pcall_frames)
{
	__u64 fm, ff, b0, b1, b2, mm, pcallf, callee_fn, pb, cb;

	setup();
	mm = new_lua_fn(10, 50, NULL);
	b2 = chain3(&fm, &ff, new_lua_fn(5, 1, NULL), &b0, &b1);
	/* an __index function called by the interpreter from f: a continuation frame 4 slots
	 * above f's base, contpc = the instruction after the TGETS in f */
	cb = b1 + 8 * 8;
	frame(cb, mm, (cb - b1) | lo->frame_cont);
	put64(cb - 24, ret_pc(ff, 9)); /* [frame-2] = contpc (link slot is cb-8) */
	{
		struct nupp_walk_regs r = regs_interp(cb, ret_pc(mm, 4));

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	}
	ck_assert_uint_eq(w.st.depth, 3);
	ck_assert_uint_eq(w.st.frames[0].link, lo->frame_cont);
	ck_assert_int_eq(w.st.frames[1].pos, 9); /* from contpc */

	/* pcall(fn): fn's link is FRAME_PCALL with a delta to the pcall frame */
	setup();
	pcallf = new_c_fn(20, 0);
	callee_fn = new_lua_fn(10, 60, NULL);
	b2 = chain3(&fm, &ff, pcallf, &b0, &b1);
	pb = b2 + 16;
	frame(pb, callee_fn, (pb - b2) | lo->frame_pcall);
	{
		struct nupp_walk_regs r = regs_interp(pb, ret_pc(callee_fn, 1));

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	}
	ck_assert_uint_eq(w.st.depth, 4);
	ck_assert_int_eq(w.st.frames[0].link, lo->frame_pcall);
	ck_assert_uint_eq(w.st.frames[1].kind, NUPP_SMP_FF);
	ck_assert_int_eq(w.st.frames[2].pos, 7);
}
END_TEST

START_TEST(walk_trace_start_frame_and_mcode_offset)
{
	__u64 fm, ff, b0, b1, b2, leaf, arr, T, mcode;

	setup();
	mcode = A(0xc0000);
	leaf = new_lua_fn(30, 20, NULL);
	b2 = chain3(&fm, &ff, leaf, &b0, &b1);
	T = on_trace3(b2, mcode, &arr);
	{
		struct nupp_walk_regs r = { .ip = mcode + 0x42, .rbx = 0x99, .rdx = 0x98, .r14 = 0 };

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	}
	ck_assert_int_eq(w.mode, NUPP_WALK_TRACE);
	ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_TRACE | NUPP_SMP_F_MCODE);
	ck_assert_uint_eq(w.st.traceno, 3);
	ck_assert_uint_eq(w.st.trace, T);
	ck_assert_uint_eq(w.st.tserial, 7);
	ck_assert_uint_eq(w.st.g, g);
	ck_assert_uint_eq(w.st.mcofs, 0x42);
	ck_assert_uint_eq(w.st.depth, 3);
	ck_assert_int_eq(w.st.frames[0].pos, -1); /* from the snapshot, in userspace */
	ck_assert_int_eq(w.st.frames[1].pos, 7);
	ck_assert_uint_eq(nupp_walk_state(lo, 3), NUPP_SMP_COMPILED);

	/* a C function called from the trace, no return address into the trace below
	 * its C frame: no mcode offset */
	{
		struct nupp_walk_regs r = { .ip = 0x7000, .rbx = 0, .rdx = 0, .r14 = 0 };

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	}
	ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_TRACE);

	/* ... called by `call rel32` at mcode+0x7b, the trace's rsp spadjust 0x30 below
	 * the rsp it was entered with (CFRAME_SIZE_JIT - CFRAME_SIZE below the C frame):
	 * the call site (inside the call) is the mcode offset */
	put8(T + lo->T_spadjust, 0x30);
	put8(T + lo->T_spadjust + 1, 0);
	put64(THREAD_CF - 0x30 - (lo->cframe_size_jit - lo->cframe_size) - 8, mcode + 0x80);
	put64(mcode + 0x78, 0xe8ull << 24);
	{
		struct nupp_walk_regs r = { .ip = 0x7000, .rbx = 0, .rdx = 0, .r14 = 0 };

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_TRACE | NUPP_SMP_F_MCODE | NUPP_SMP_F_MCALL);
		ck_assert_uint_eq(w.st.mcofs, 0x7f);
		ck_assert_uint_eq(w.st.depth, 3);
		/* call r11 (41 FF D3) */
		put64(mcode + 0x78, 0xd3ff41ull << 40);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_TRACE | NUPP_SMP_F_MCODE | NUPP_SMP_F_MCALL);
		/* not after a call instruction (a stale word): refused */
		put64(mcode + 0x78, 0x9090909090909090ull);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_TRACE);
		/* a return address outside this trace's code: refused */
		put64(mcode + 0x78, 0xe8ull << 24);
		put64(THREAD_CF - 0x30 - (lo->cframe_size_jit - lo->cframe_size) - 8, mcode + 0x400);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_TRACE);
		/* at the slot of another rsp (spadjust 0): not read as one */
		put64(THREAD_CF - 0x30 - (lo->cframe_size_jit - lo->cframe_size) - 8, mcode + 0x80);
		put8(T + lo->T_spadjust, 0);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_TRACE);
	}
}
END_TEST

START_TEST(walk_trace_caches_give_the_same_stack_with_fewer_reads)
{
	__u64 fm, ff, b0, b1, b2, leaf, pt_leaf, pt2, arr, T, T2, mcode, hash, key;
	int pass;

	setup();
	mcode = A(0xc0000);
	leaf = new_lua_fn(30, 20, &pt_leaf);
	b2 = chain3(&fm, &ff, leaf, &b0, &b1);
	T = on_trace3(b2, mcode, &arr);
	{
		struct nupp_walk_regs r = { .ip = mcode + 0x42, .rbx = 0x99, .rdx = 0x98, .r14 = 0 };

		w.fc_tag = w.tc_tag = 0;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		hash = w.hash;
		key = nupp_walk_key(&w);
		saved = w.st;
		/* filled, then hit: the trace from the trace cache, the start frame (no PC)
		 * from the frame cache after its GCfunc is read again, its callers hit */
		w.fc_tag = (500ull << 22) | 3;
		w.tc_tag = (600ull << 22) | 3;
		for (pass = 0; pass < 2; pass++) {
			reads = 0;
			ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
			ck_assert_uint_eq(w.hash, hash);
			ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
		}
		ck_assert_uint_eq(w.fc_hits, 3);
		ck_assert_int_eq(reads, 2); /* VM state, stack window (the start frame's function's
					     * facts kept) */

		/* another trace made (the VM's newest serial moves), trace 3 the same: read
		 * again, the same stack */
		put32(g + lo->g_tserial, 8);
		reads = 0;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.hash, hash);
		ck_assert_int_eq(reads, 2 + 3); /* + J->trace and its size, the slot, the header */
		reads = 0;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_int_eq(reads, 2);

		/* trace 3 is freed and another trace takes its address, number and machine
		 * code (after a flush): it has the VM's newest serial, so it is read, and its
		 * stack is another, told apart by the serial alone (part of its hash) */
		put32(T + lo->T_serial, 9);
		put32(g + lo->g_tserial, 9);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.trace, T);
		ck_assert_uint_eq(w.st.tserial, 9);
		ck_assert_uint_eq(w.st.mcofs, saved.mcofs);
		ck_assert_uint_ne(w.hash, hash);
		ck_assert_uint_ne(nupp_walk_key(&w), key);
		/* ... at another address and machine code: ip is not in its code */
		T2 = alloc_obj(lo->T_size);
		put64(arr + 8 * 3, T2);
		put32(T2 + lo->T_szmcode, 0x200);
		put64(T2 + lo->T_mcode, mcode + 0x1000);
		put32(T2 + lo->T_serial, 10);
		put32(g + lo->g_tserial, 10);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.trace, T2);
		ck_assert_uint_eq(w.st.mcode, mcode + 0x1000);
		ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_TRACE); /* ip is not in its mcode */

		/* the start frame's GCfunc now runs another prototype (a closure freed by a GC
		 * sweep and its memory reused, same slot and link): the function read shows it */
		new_lua_fn(12, 70, &pt2);
		put64(leaf + lo->fn_pc, pt2 + lo->pt_size);
		put32(g + lo->g_sweepno, 1);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.frames[0].ptr, pt2);
		ck_assert_uint_eq(w.st.frames[0].sizebc, 12);
		ck_assert_int_eq(w.st.frames[0].firstline, 70);
		ck_assert_int_eq(w.st.frames[0].pos, -1);
		ck_assert_mem_eq(&w.st.frames[1], &saved.frames[1], 2 * sizeof(saved.frames[1]));
		ck_assert_uint_ne(pt2, pt_leaf);
	}
	w.fc_tag = w.tc_tag = 0;
}
END_TEST

START_TEST(walk_trace_start_entry_is_not_the_leaf_at_its_first_instruction)
{
	__u64 fm, ff, b0, b1, b2, leaf, pt, arr, mcode, bc;

	setup();
	mcode = A(0xc0000);
	leaf = new_lua_fn(30, 20, &pt);
	b2 = chain3(&fm, &ff, leaf, &b0, &b1);
	bc = pt + lo->pt_size;
	on_trace3(b2, mcode, &arr);
	w.fc_tag = (700ull << 22) | 5;
	w.tc_tag = (701ull << 22) | 5;
	{
		struct nupp_walk_regs r = { .ip = mcode + 0x42, .rbx = 0x99, .rdx = 0x98, .r14 = 0 };

		/* leaf is a trace's start frame: its entry (no PC) is filled, then hit */
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.fc_hits, 3);
		ck_assert_int_eq(w.st.frames[0].pos, -1);
	}
	/* Then in the interpreter, right after ins_call loaded leaf's PC (rbx = its
	 * bytecode, registers mode): at its first instruction, pos 0, cached or not. */
	put64(g + lo->g_jit_base, 0);
	put32(g + lo->g_vmstate, (__u32)lo->vmst_interp);
	{
		struct nupp_walk_regs r = regs_interp(b2, bc);

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_int_eq(w.mode, NUPP_WALK_REGS);
		ck_assert_uint_eq(w.st.depth, 3);
		ck_assert_uint_eq(w.st.frames[0].ptr, pt);
		ck_assert_int_eq(w.st.frames[0].pos, 0);
		ck_assert_int_eq(w.st.frames[1].pos, 7);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_int_eq(w.st.frames[0].pos, 0);
		w.fc_tag = 0;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_int_eq(w.st.frames[0].pos, 0);
	}
	w.fc_tag = w.tc_tag = 0;
}
END_TEST

START_TEST(walk_coroutine_chains_to_resumer)
{
	__u64 fm, ff, b0, b1, b2, wrapf, body, cb, cf_co, pcf;

	setup();
	cf_co = A(0x80000);
	/* main: main -> f -> coroutine.wrap_aux (ff 36), running the coroutine */
	wrapf = new_c_fn(36, 0);
	b2 = chain3(&fm, &ff, wrapf, &b0, &b1);
	pcf = cf_co + lo->cframe_size;
	put64(mainL + lo->L_base, b2);
	put64(mainL + lo->L_cframe, pcf);
	put64(pcf + lo->cframe_ofs_pc, 0);
	/* the coroutine: its own stack; body at the bottom, cframe with CFRAME_RESUME */
	coL = alloc_obj(lo->L_size);
	put64(coL + lo->L_stack, costack);
	put32(coL + lo->L_stacksize, 256);
	put64(coL + lo->L_glref, g);
	put64(coL + lo->L_cframe, cf_co | lo->cframe_resume);
	put64(cf_co + lo->cframe_ofs_prev, 0);
	put64(pcf + lo->cframe_ofs_L, mainL);
	body = new_lua_fn(10, 54, NULL);
	cb = costack + 32;
	frame(cb, body, 0x18 | lo->frame_cp);
	put64(g + lo->g_cur_L, coL);
	{
		struct nupp_walk_regs r = regs_interp(cb, ret_pc(body, 2));

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	}
	ck_assert_uint_eq(w.st.depth, 5);
	ck_assert_uint_eq(w.st.frames[0].kind, NUPP_SMP_LUA);
	ck_assert_uint_eq(w.st.frames[1].kind, NUPP_SMP_CORO);
	ck_assert_uint_eq(w.st.frames[2].kind, NUPP_SMP_FF);
	ck_assert_uint_eq(w.st.frames[2].ptr, 36);
	ck_assert_int_eq(w.st.frames[3].pos, 7);

	/* resumer not validated (its cframe is not ours): the separator ends the stack */
	put64(mainL + lo->L_cframe, 0);
	{
		struct nupp_walk_regs r = regs_interp(cb, ret_pc(body, 2));

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	}
	ck_assert_uint_eq(w.st.depth, 2);
	ck_assert_uint_eq(w.st.frames[1].kind, NUPP_SMP_CORO);
}
END_TEST

START_TEST(walk_cycle_and_bad_pointer_end_bounded)
{
	__u64 fm, ff, b0, b1, b2, leaf;

	/* a link that points up the stack (a cycle): refused after one step */
	setup();
	leaf = new_lua_fn(30, 20, NULL);
	b2 = chain3(&fm, &ff, leaf, &b0, &b1);
	put64(b1 - 8, ((__u64)-64 & ~(__u64)7) | lo->frame_c); /* a "negative" delta: up */
	{
		struct nupp_walk_regs r = regs_interp(b2, ret_pc(leaf, 3));

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_BAD_FRAME);
	}
	ck_assert_int_lt(reads, 40);

	/* a function pointer outside readable memory: a counted read fault */
	setup();
	leaf = new_lua_fn(30, 20, NULL);
	b2 = chain3(&fm, &ff, leaf, &b0, &b1);
	put64(b1 - 16, ((__u64)lo->itype_func << lo->itype_shift) | 0x10000);
	{
		struct nupp_walk_regs r = regs_interp(b2, ret_pc(leaf, 3));

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_BAD_FRAME);
	}
	put64(b1 - 16, ((__u64)lo->itype_func << lo->itype_shift) | 0);
	{
		struct nupp_walk_regs r = regs_interp(b2, ret_pc(leaf, 3));

		ck_assert_int_ne(walk(&r, 64), NUPP_WALK_DONE);
	}
	/* the VM state itself unreadable */
	{
		struct nupp_walk_regs r = regs_interp(b2, ret_pc(leaf, 3));
		__s32 vms;

		ck_assert_int_eq(nupp_walk_start(&w, lo, 0x1000, &r, 64, NUPP_WALK_BASE_AUTO, &vms),
				 NUPP_WALK_READ_FAULT);
	}
}
END_TEST

START_TEST(walk_deep_stack_keeps_its_leaf_most_frames)
{
	__u64 fn = 0, base, prev_fn = 0;
	int i;

	setup();
	base = stack0 + 32;
	for (i = 0; i < 100; i++) {
		fn = new_lua_fn(20, i, NULL);
		frame(base, fn, i == 0 ? (0x18 | lo->frame_cp) : ret_pc(prev_fn, 4));
		prev_fn = fn;
		if (i < 99)
			base = callee(base);
	}
	{
		struct nupp_walk_regs r = regs_interp(base, ret_pc(fn, 1));

		/* Cut, not dropped: the 16 leaf-most frames, flagged. */
		ck_assert_int_eq(walk(&r, 16), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.depth, 16);
		ck_assert(w.st.flags & NUPP_SMP_F_CUT);
		ck_assert_int_eq(w.st.frames[0].pos, 1);
		ck_assert_int_eq(w.st.frames[0].firstline, 99);
		ck_assert_int_eq(w.st.frames[15].firstline, 84);
		ck_assert_int_eq(w.st.frames[15].pos, 4);
		/* The whole stack fits in 256: not cut. */
		ck_assert_int_eq(walk(&r, NUPP_SMP_MAX_DEPTH), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.depth, 100);
		ck_assert(!(w.st.flags & NUPP_SMP_F_CUT));
	}
}
END_TEST

START_TEST(walk_interp_in_c_helper_uses_rbp_then_l_base)
{
	__u64 fm, ff, b0, b1, b2, mathf;
	__s32 vms;

	setup();
	mathf = new_c_fn(44, 0);
	b2 = chain3(&fm, &ff, mathf, &b0, &b1);
	put64(mainL + lo->L_base, b1); /* stale: f's base */
	{
		/* libm called from an ASM fast function: INTERP, IP outside the VM, BASE in rbp,
		 * rbx = &GG->bcff[i]+4 */
		struct nupp_walk_regs r = { .ip = 0x7f0000001000ull, .rbx = A(0x1000) + lo->gg_size - 64,
					    .rdx = 0, .rbp = b2, .r14 = 0 };

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_RBP | NUPP_SMP_F_STRICT);
		ck_assert_uint_eq(w.st.frames[0].kind, NUPP_SMP_FF);
		ck_assert_uint_eq(w.st.depth, 3);

		/* rbp clobbered: the strict leaf check refuses the stale L->base (f is a Lua
		 * function whose bytecode does not hold rbx) instead of misattributing */
		r.rbp = 0x1234;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_BAD_FRAME);
		ck_assert_uint_eq(nupp_walk_retry(&w, lo, lo->vmst_interp, 0, r.ip), NUPP_WALK_BASE_L);
		on_vm_thread(&r);
		ck_assert_int_eq(nupp_walk_start(&w, lo, g, &r, 64, NUPP_WALK_BASE_L, &vms), 0);
		ck_assert_int_eq(nupp_walk_run(&w, lo), NUPP_WALK_BAD_FRAME);
		/* (SAVE_PC is not tried: no return address into the interpreter below its C frame) */
		ck_assert_uint_eq(nupp_walk_retry(&w, lo, lo->vmst_interp, 1, r.ip), 0);
	}
}
END_TEST

START_TEST(walk_thread_not_running_the_vm_is_host_code)
{
	__u64 fm, ff, b0, b1, b2, leaf;
	__s32 vms;

	setup();
	leaf = new_lua_fn(30, 20, NULL);
	b2 = chain3(&fm, &ff, leaf, &b0, &b1);
	put64(mainL + lo->L_base, b2);
	put32(g + lo->g_vmstate, (__u32)lo->vmst_c);
	put64(mainL + lo->L_cframe, THREAD_CF);
	{
		/* Another thread: in C code, its stack elsewhere (the VM's C frame is not on it). */
		struct nupp_walk_regs r = { .ip = 0x401240, .sp = A(0x200000), .stk_top = A(0x210000) };

		ck_assert_int_eq(nupp_walk_start(&w, lo, g, &r, 64, NUPP_WALK_BASE_AUTO, &vms), NUPP_WALK_NOT_RUNNING);
		ck_assert_uint_eq(nupp_walk_retry(&w, lo, vms, 0, r.ip), 0);
		/* ... its stack unknown (bpf_find_vma refused): not proven either. */
		r.sp = THREAD_SP;
		r.stk_top = 0;
		ck_assert_int_eq(nupp_walk_start(&w, lo, g, &r, 64, NUPP_WALK_BASE_AUTO, &vms), NUPP_WALK_NOT_RUNNING);
		/* ... in the interpreter's code, but r14 is not this VM's DISPATCH. */
		r.ip = lo->vm_begin + 16;
		r.r14 = 0x1234;
		ck_assert_int_eq(nupp_walk_start(&w, lo, g, &r, 64, NUPP_WALK_BASE_AUTO, &vms), NUPP_WALK_NOT_RUNNING);
		/* The VM's own thread (its C frame above its SP): walked. */
		r.ip = 0x401240;
		r.stk_top = THREAD_TOP;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.depth, 3);
		/* Host code between two lua_call: no C frame of the VM at all. */
		put64(mainL + lo->L_cframe, 0);
		ck_assert_int_eq(nupp_walk_start(&w, lo, g, &r, 64, NUPP_WALK_BASE_AUTO, &vms), NUPP_WALK_NOT_RUNNING);
	}
}
END_TEST

START_TEST(walk_interp_in_a_synced_helper_uses_save_pc)
{
	__u64 fm, ff, b0, b1, b2, leaf, ra = 0, saved_hash;
	__s32 vms = 0;
	__u32 how, attempt;
	int res = NUPP_WALK_RUN;

	setup();
	leaf = new_lua_fn(30, 20, NULL);
	b2 = chain3(&fm, &ff, leaf, &b0, &b1);
	/* lj_tab_newkey (deep in it, lj_alloc_malloc): INTERP, L->base and SAVE_PC synced,
	 * rbx and rbp reused by the C code; the return address into the interpreter lies
	 * just below its C frame. */
	put64(mainL + lo->L_base, b2);
	put64(mainL + lo->L_cframe, THREAD_CF);
	put64(THREAD_CF + lo->cframe_ofs_pc, ret_pc(leaf, 6));
	ra = lo->vm_begin + 0x321;
	put64(THREAD_CF - 8, ra);
	{
		struct nupp_walk_regs r = { .ip = 0x401240, .rbx = 0x55, .rbp = 0x77, .sp = THREAD_SP, .stk_top = THREAD_TOP };

		for (attempt = 0, how = NUPP_WALK_BASE_AUTO; attempt < 2; attempt++) {
			res = nupp_walk_start(&w, lo, g, &r, 64, how, &vms);
			if (!res)
				res = nupp_walk_run(&w, lo);
			if (res == NUPP_WALK_DONE)
				break;
			w.result = res;
			how = nupp_walk_retry(&w, lo, vms, attempt, r.ip);
			if (!how)
				break;
		}
		ck_assert_int_eq(res, NUPP_WALK_DONE);
		ck_assert_uint_eq(attempt, 1);
		ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_LBASE | NUPP_SMP_F_STRICT | NUPP_SMP_F_HELPER);
		ck_assert_uint_eq(w.st.callsite, ra);
		ck_assert_uint_eq(w.st.depth, 3);
		ck_assert_int_eq(w.st.frames[0].pos, 6);
		ck_assert_int_eq(w.st.frames[1].pos, 7);
		saved_hash = w.hash;
		/* SAVE_PC outside the leaf: the leaf at L->base without a position, flagged
		 * for userspace (a stack only if that call site stored L->base and not
		 * SAVE_PC, as vm_inshook's call of lj_dispatch_ins). */
		put64(THREAD_CF + lo->cframe_ofs_pc, ret_pc(ff, 2));
		ck_assert_int_eq(nupp_walk_start(&w, lo, g, &r, 64, NUPP_WALK_BASE_L, &vms), 0);
		ck_assert_int_eq(nupp_walk_run(&w, lo), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.flags,
				  NUPP_SMP_F_LBASE | NUPP_SMP_F_STRICT | NUPP_SMP_F_HELPER | NUPP_SMP_F_NOPC);
		ck_assert_uint_eq(w.st.callsite, ra);
		ck_assert_uint_eq(w.st.depth, 3);
		ck_assert_int_eq(w.st.frames[0].pos, -1);
		ck_assert_int_eq(w.st.frames[1].pos, 7);
		/* ... and its stack apart from the one with a position. */
		ck_assert_uint_ne(w.hash, saved_hash);
		/* SAVE_PC 0 (vm_hotcall clears it after lj_dispatch_call): the same. */
		put64(THREAD_CF + lo->cframe_ofs_pc, 0);
		ck_assert_int_eq(nupp_walk_start(&w, lo, g, &r, 64, NUPP_WALK_BASE_L, &vms), 0);
		ck_assert_int_eq(nupp_walk_run(&w, lo), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.flags,
				  NUPP_SMP_F_LBASE | NUPP_SMP_F_STRICT | NUPP_SMP_F_HELPER | NUPP_SMP_F_NOPC);
		ck_assert_int_eq(w.st.frames[0].pos, -1);
		/* No return address into the interpreter below its C frame: not a helper. */
		put64(THREAD_CF + lo->cframe_ofs_pc, ret_pc(leaf, 6));
		put64(THREAD_CF - 8, 0x401000);
		ck_assert_int_eq(nupp_walk_start(&w, lo, g, &r, 64, NUPP_WALK_BASE_L, &vms), 0);
		ck_assert_int_eq(nupp_walk_run(&w, lo), NUPP_WALK_BAD_FRAME);
	}
}
END_TEST

/* Walks as the sampler does: the start rules, then one retry from the base
 * nupp_walk_retry gives; returns the result, the attempts made in *attempts. */
static int walk_retried(const struct nupp_walk_regs *r, __u32 *attempts)
{
	__u32 how = NUPP_WALK_BASE_AUTO, attempt;
	__s32 vms = 0;
	int res = NUPP_WALK_RUN;

	for (attempt = 0; attempt < 2; attempt++) {
		res = nupp_walk_start(&w, lo, g, r, 64, how, &vms);
		if (!res)
			res = nupp_walk_run(&w, lo);
		if (res == NUPP_WALK_DONE)
			break;
		w.result = res;
		how = nupp_walk_retry(&w, lo, vms, attempt, r->ip);
		if (!how)
			break;
	}
	*attempts = attempt;
	return res;
}

/* A C frame at cf made by lj_vm_cpcall on top of the C frame prev: SAVE_NRES < 0 (no Lua
 * frame), SAVE_PC = L, SAVE_CFRAME = prev, and the return address of its `call CARG4`. */
static void cpcall_frame(__u64 cf, __u64 prev)
{
	put32(cf + lo->cframe_ofs_nres, (__u32)-0x40);
	put64(cf + lo->cframe_ofs_pc, mainL);
	put64(cf + lo->cframe_ofs_prev, prev);
	put64(cf - 8, lo->vm_begin + 0x40);
}

START_TEST(walk_interp_under_the_jit_compilers_protected_call_uses_the_helpers_frame)
{
	__u64 fm, ff, b0, b1, b2, leaf, ra = lo->vm_begin + 0x321, cp1, cp2;
	__u32 attempts;

	setup();
	cp1 = THREAD_CF - 0x100;
	cp2 = THREAD_CF - 0x200;
	leaf = new_lua_fn(30, 20, NULL);
	b2 = chain3(&fm, &ff, leaf, &b0, &b1);
	/* vm_hotloop synced L->base and SAVE_PC and called lj_trace_hot, which started the
	 * JIT compiler in lj_vm_cpcall (trace_start, lj_dispatch_update: vmstate INTERP). */
	put64(mainL + lo->L_base, b2);
	put64(THREAD_CF + lo->cframe_ofs_pc, ret_pc(leaf, 6));
	put64(THREAD_CF - 8, ra);
	cpcall_frame(cp1, THREAD_CF);
	put64(mainL + lo->L_cframe, cp1);
	{
		struct nupp_walk_regs r = { .ip = 0x401240, .rbx = 0x55, .rbp = 0x77, .sp = THREAD_SP, .stk_top = THREAD_TOP };

		ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_DONE);
		ck_assert_uint_eq(attempts, 1);
		ck_assert_uint_eq(w.st.flags,
				  NUPP_SMP_F_LBASE | NUPP_SMP_F_STRICT | NUPP_SMP_F_HELPER | NUPP_SMP_F_CPCALL);
		ck_assert_uint_eq(w.st.callsite, ra); /* the interpreter's call, not lj_vm_cpcall's */
		ck_assert_uint_eq(w.st.depth, 3);
		ck_assert_int_eq(w.st.frames[0].pos, 6);
		ck_assert_int_eq(w.st.frames[1].pos, 7);
		/* A protected call inside another (two C frames without a Lua frame). */
		cpcall_frame(cp2, cp1);
		put64(mainL + lo->L_cframe, cp2);
		ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.callsite, ra);
		ck_assert_int_eq(w.st.frames[0].pos, 6);
		/* The interpreter's SAVE_PC outside the leaf: no position, flagged. */
		put64(THREAD_CF + lo->cframe_ofs_pc, ret_pc(ff, 2));
		ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_LBASE | NUPP_SMP_F_STRICT | NUPP_SMP_F_HELPER |
						  NUPP_SMP_F_CPCALL | NUPP_SMP_F_NOPC);
		ck_assert_int_eq(w.st.frames[0].pos, -1);
		put64(THREAD_CF + lo->cframe_ofs_pc, ret_pc(leaf, 6));
		/* No return address into the interpreter below the frame the helper ran on
		 * (the protected call came from host code): refused. */
		put64(THREAD_CF - 8, 0x401000);
		ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_BAD_FRAME);
		put64(THREAD_CF - 8, ra);
		/* A protected call's frame with no C frame below it, or with one below it on
		 * the C stack (garbage: links go up the C stack): refused. */
		put64(cp1 + lo->cframe_ofs_prev, 0);
		ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_BAD_FRAME);
		put64(cp1 + lo->cframe_ofs_prev, cp2 - 0x100);
		ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_BAD_FRAME);
		/* Three in a row: more than the walker follows, refused. */
		cpcall_frame(cp1, THREAD_CF - 0x80);
		cpcall_frame(THREAD_CF - 0x80, THREAD_CF);
		ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_BAD_FRAME);
		/* The interpreter's own C frame (SAVE_NRES >= 0: vm_pcall's nres1): as before,
		 * its SAVE_PC and return address, no protected call. */
		put64(mainL + lo->L_cframe, THREAD_CF);
		ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_LBASE | NUPP_SMP_F_STRICT | NUPP_SMP_F_HELPER);
		ck_assert_uint_eq(w.st.callsite, ra);
	}
	{
		/* In the VM's own code below the interpreter's C frame: lj_vm_cpcall's entry
		 * (saveregs done, L->cframe not yet linked) or vm_leave_cp (unlinked): a callee
		 * of the interpreter's call at ra, as a C helper. */
		struct nupp_walk_regs r = { .ip = lo->vm_begin + 0x80, .rbx = 0x55, .rdx = 0x99, .rbp = 0x77,
					    .sp = cp1 - 0x40, .stk_top = THREAD_TOP };

		r.r14 = g - (__s64)lo->gg_disp2g;
		put64(mainL + lo->L_cframe, THREAD_CF);
		ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_LBASE | NUPP_SMP_F_STRICT | NUPP_SMP_F_HELPER);
		ck_assert_uint_eq(w.st.callsite, ra);
		ck_assert_int_eq(w.st.frames[0].pos, 6);
		/* vm_leave_cp before it unlinks: on the protected call's frame, below the
		 * interpreter's. */
		cpcall_frame(cp1, THREAD_CF);
		put64(mainL + lo->L_cframe, cp1);
		r.sp = cp1;
		ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.flags,
				  NUPP_SMP_F_LBASE | NUPP_SMP_F_STRICT | NUPP_SMP_F_HELPER | NUPP_SMP_F_CPCALL);
		ck_assert_uint_eq(w.st.callsite, ra);
		/* The interpreter itself on its C frame (rsp == cframe): [cframe-8] is the
		 * return address of a call that returned, the leaf is unproven. */
		put64(mainL + lo->L_cframe, THREAD_CF);
		r.sp = THREAD_CF;
		ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_BAD_FRAME);
	}
}
END_TEST

START_TEST(walk_while_recording_a_trace)
{
	__u64 fm, ff, b0, b1, b2, leaf, ra = lo->vm_begin + 0x321, cp1;
	__u32 attempts;

	setup();
	cp1 = THREAD_CF - 0x100;
	leaf = new_lua_fn(30, 20, NULL);
	b2 = chain3(&fm, &ff, leaf, &b0, &b1);
	put32(g + lo->g_vmstate, (__u32)lo->vmst_record);
	put64(mainL + lo->L_base, b1); /* synced before f's CALL, stale since */
	put64(THREAD_CF + lo->cframe_ofs_pc, ret_pc(ff, 7));
	put64(mainL + lo->L_cframe, THREAD_CF);
	{
		/* The interpreter runs the recorded instruction with vmstate RECORD: its
		 * registers are the frame (L->base would give f, not the leaf). */
		struct nupp_walk_regs r = regs_interp(b2, ret_pc(leaf, 5));

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_REGS);
		ck_assert_uint_eq(w.st.depth, 3);
		ck_assert_int_eq(w.st.frames[0].pos, 5);
		ck_assert_int_eq(w.st.frames[1].pos, 7);
	}
	{
		/* A C helper of the interpreter while recording (lj_tab_getinth: rbp clobbered,
		 * L->base stale, no synced call site): as with INTERP, the stale base is
		 * refused, not walked as f's stack. */
		struct nupp_walk_regs r = { .ip = 0x401240, .rbx = 0x55, .rbp = 0x77, .sp = THREAD_SP, .stk_top = THREAD_TOP };

		ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_BAD_FRAME);
		/* The recorder itself (lj_record_ins under lj_trace_ins's protected call, after
		 * lj_dispatch_ins synced L->base): walked from L->base. */
		put64(mainL + lo->L_base, b2);
		put64(THREAD_CF + lo->cframe_ofs_pc, ret_pc(leaf, 6));
		put64(THREAD_CF - 8, ra);
		cpcall_frame(cp1, THREAD_CF);
		put64(mainL + lo->L_cframe, cp1);
		ck_assert_int_eq(walk_retried(&r, &attempts), NUPP_WALK_DONE);
		ck_assert_uint_eq(attempts, 0);
		ck_assert_uint_eq(w.st.flags, NUPP_SMP_F_LBASE);
		ck_assert_uint_eq(w.st.depth, 3);
		ck_assert_int_eq(w.st.frames[1].pos, 7);
	}
}
END_TEST

START_TEST(helper_samples_are_kept_by_what_their_call_site_stored)
{
	struct nupp_smp_stack st;

	/* Call sites of the interpreter (vm_x64.dasc) by their callee. */
	ck_assert_int_eq(nupp_smp_sync_of("lj_tab_newkey", false), NUPP_SMP_SYNC_BOTH);
	ck_assert_int_eq(nupp_smp_sync_of("lj_trace_hot", false), NUPP_SMP_SYNC_BOTH);
	ck_assert_int_eq(nupp_smp_sync_of("lj_tab_getinth", false), NUPP_SMP_SYNC_NONE);
	ck_assert_int_eq(nupp_smp_sync_of("lj_tab_getinth", true), NUPP_SMP_SYNC_NONE);
	ck_assert_int_eq(nupp_smp_sync_of("lj_ccallback_leave", false), NUPP_SMP_SYNC_NONE);
	ck_assert_int_eq(nupp_smp_sync_of("lj_trace_exit", true), NUPP_SMP_SYNC_NONE);
	/* vm_inshook stores L->base, lj_dispatch_ins stores SAVE_PC itself, before any
	 * protected call it makes (lj_trace_ins). */
	ck_assert_int_eq(nupp_smp_sync_of("lj_dispatch_ins", false), NUPP_SMP_SYNC_BASE);
	ck_assert_int_eq(nupp_smp_sync_of("lj_dispatch_ins", true), NUPP_SMP_SYNC_BOTH);
	ck_assert_int_eq(nupp_smp_sync_of("lj_dispatch_stitch", true), NUPP_SMP_SYNC_BOTH);
	ck_assert_int_eq(nupp_smp_sync_of("lj_func_closeuv", false), NUPP_SMP_SYNC_BASE);
	ck_assert_int_eq(nupp_smp_sync_of("lj_func_closeuv", true), NUPP_SMP_SYNC_BASE);

	memset(&st, 0, sizeof(st));
	st.depth = 2;
	st.frames[0].kind = NUPP_SMP_LUA;
	st.frames[0].pos = 6;
	st.frames[1].kind = NUPP_SMP_LUA;
	st.frames[1].pos = 7;
	st.flags = NUPP_SMP_F_HELPER;
	ck_assert(!nupp_smp_helper_keep(&st, NUPP_SMP_SYNC_NONE));
	ck_assert(nupp_smp_helper_keep(&st, NUPP_SMP_SYNC_BOTH));
	ck_assert_int_eq(st.frames[0].pos, 6);
	/* L->base only: the leaf, without the position SAVE_PC gave. */
	ck_assert(nupp_smp_helper_keep(&st, NUPP_SMP_SYNC_BASE));
	ck_assert_int_eq(st.frames[0].pos, -1);
	ck_assert_int_eq(st.frames[1].pos, 7);
	/* SAVE_PC outside the leaf (NOPC): a stack only if SAVE_PC was not stored. */
	st.flags |= NUPP_SMP_F_NOPC;
	ck_assert(!nupp_smp_helper_keep(&st, NUPP_SMP_SYNC_BOTH));
	ck_assert(nupp_smp_helper_keep(&st, NUPP_SMP_SYNC_BASE));
	/* A fast function's leaf has no position to drop. */
	st.frames[0].kind = NUPP_SMP_FF;
	st.frames[0].ptr = 44;
	ck_assert(nupp_smp_helper_keep(&st, NUPP_SMP_SYNC_BASE));
	ck_assert_uint_eq(st.frames[0].ptr, 44);
}
END_TEST

START_TEST(walk_vm_call_entry_and_returned_function_value)
{
	__u64 fm, ff, b0, b1, b2, sortf;

	/* lua_call from a C function (table.sort calling its comparator): in vm_call's entry
	 * rdx is the synced L->base of the C function and rbx the typed link being built */
	setup();
	sortf = new_c_fn(93, 0);
	b2 = chain3(&fm, &ff, sortf, &b0, &b1);
	put64(mainL + lo->L_base, b2);
	{
		struct nupp_walk_regs r = regs_interp(b2, 0x28 | lo->frame_c);

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.depth, 3);
		ck_assert_uint_eq(w.st.frames[0].kind, NUPP_SMP_FF);
		ck_assert_uint_eq(w.st.frames[0].ptr, 93);
	}
	/* BC_RET window of a function returning table.sort itself: the result copied over
	 * the function slot is not taken for a frame (rbx is a bytecode return PC) */
	{
		struct nupp_walk_regs r = regs_interp(b2, ret_pc(ff, 7));

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.depth, 2);
		ck_assert_uint_eq(w.st.frames[0].kind, NUPP_SMP_LUA);
		ck_assert_int_eq(w.st.frames[0].pos, 7);
	}
}
END_TEST

/* A recursion main -> rec x n -> leaf (rec calls itself at pos 9, leaf at pos 7); returns
 * the leaf's base. */
static __u64 recursion(__u32 n, __u64 *fm, __u64 *rec, __u64 *pt_rec, __u64 leaf)
{
	__u64 base = stack0 + 32, link;
	__u32 i;

	*fm = new_lua_fn(20, 1, NULL);
	*rec = new_lua_fn(40, 100, pt_rec);
	frame(base, *fm, 0x18 | lo->frame_cp);
	link = ret_pc(*fm, 4);
	for (i = 0; i < n; i++) {
		base = callee(base);
		frame(base, *rec, link);
		link = ret_pc(*rec, 9);
	}
	base = callee(base);
	frame(base, leaf, ret_pc(*rec, 7));
	return base;
}

/* Checks the frames of recursion(n): leaf, rec x n, main. */
static void check_recursion(__u32 n, __u64 pt_leaf, __u64 pt_rec)
{
	__u32 i;

	ck_assert_uint_eq(w.st.depth, n + 2);
	ck_assert_uint_eq(w.st.frames[0].ptr, pt_leaf);
	ck_assert_int_eq(w.st.frames[0].pos, 11);
	for (i = 1; i <= n; i++) {
		ck_assert_uint_eq(w.st.frames[i].kind, NUPP_SMP_LUA);
		ck_assert_uint_eq(w.st.frames[i].ptr, pt_rec);
		ck_assert_int_eq(w.st.frames[i].pos, i == 1 ? 7 : 9);
		ck_assert_int_eq(w.st.frames[i].firstline, 100);
		ck_assert_uint_eq(w.st.frames[i].sizebc, 40);
		ck_assert_uint_eq(w.st.frames[i].link, lo->frame_lua);
	}
	ck_assert_int_eq(w.st.frames[n + 1].pos, 4);
	ck_assert_int_eq(w.st.frames[n + 1].firstline, 1);
	ck_assert_uint_eq(w.st.frames[n + 1].sizebc, 20);
	ck_assert_uint_eq(w.st.frames[n + 1].link, lo->frame_cp);
}

START_TEST(walk_deep_recursion_reads_each_thing_once)
{
	__u64 fm, rec, pt_rec, pt_leaf, leaf, b;
	__u64 hash;

	/* 60 frames of one function: 2400 bytes of stack, more than one window */
	setup();
	leaf = new_lua_fn(30, 20, &pt_leaf);
	b = recursion(60, &fm, &rec, &pt_rec, leaf);
	{
		struct nupp_walk_regs r = regs_interp(b, ret_pc(leaf, 11));

		reads = 0;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		check_recursion(60, pt_leaf, pt_rec);
		/* vm state, 2 stack windows, 3 GCfuncs and up to 3 GCprotos, 3 call sites:
		 * not 4 reads per frame */
		ck_assert_int_le(reads, 12);
		hash = w.hash;

		/* the same walk with every stack window read failing (an unreadable page):
		 * frame headers are read one by one, and the stack is the same */
		fail_lo = stack0;
		fail_hi = stack0 + 0x10000;
		reads = 0;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		check_recursion(60, pt_leaf, pt_rec);
		ck_assert_uint_eq(w.hash, hash);
		ck_assert_int_gt(reads, 60);
	}
}
END_TEST

START_TEST(walk_memo_and_windows_do_not_outlive_a_walk)
{
	__u64 fm, rec, pt_rec, pt_leaf, leaf, b, pt2, f2;

	setup();
	leaf = new_lua_fn(30, 20, &pt_leaf);
	b = recursion(3, &fm, &rec, &pt_rec, leaf);
	{
		struct nupp_walk_regs r = regs_interp(b, ret_pc(leaf, 11));

		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		check_recursion(3, pt_leaf, pt_rec);

		/* the GCfunc at the same address now runs another prototype (freed and
		 * reused between two samples): the return PCs are not in it, so the next
		 * walk refuses the frames instead of reusing what the last walk read */
		f2 = new_lua_fn(40, 300, &pt2);
		put64(rec + lo->fn_pc, pt2 + lo->pt_size);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_BAD_FRAME);
		(void)f2;

		/* the prototype's fingerprint changed between samples: the new one is read */
		put64(rec + lo->fn_pc, pt_rec + lo->pt_size);
		put32(pt_rec + lo->pt_firstline, 300);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.frames[2].ptr, pt_rec);
		ck_assert_int_eq(w.st.frames[2].firstline, 300);

		/* a frame header rewritten between samples: the new link is followed */
		put64(rec + lo->fn_pc, pt_rec + lo->pt_size);
		put64(b - 8, 0x28 | lo->frame_c); /* leaf now called from C (lua_call) */
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.frames[0].link, lo->frame_c);
		ck_assert_uint_eq(w.st.frames[1].ptr, pt_rec);
		ck_assert_int_eq(w.st.frames[1].pos, -1); /* called from C: no position */
	}
}
END_TEST

/* Frame cache keys (function, PC, link) of the Lua frames of a chain, main first. */
static __u64 key_fn[512], key_pc[512], key_link[512];
static __u32 nkeys;

/* A chain main -> f[0] -> ... -> f[n-1] -> leaf of distinct prototypes (each calls the
 * next at pos 5 + i % 7), with a C function between f[c-1] and f[c] when c > 0 (f[c] then
 * called by lua_call: C link, no position). Returns the leaf's base; the keys of its Lua
 * frames for a leaf PC leaf_pc are in key_*. */
static __u64 chain_cfn; /* the C function of the last distinct_chain (0: none) */

static __u64 distinct_chain(__u32 n, __u32 c, __u64 fns[], __u64 pts[], __u64 leaf, __u64 leaf_pc)
{
	__u64 base = stack0 + 32, link, fm = new_lua_fn(20, 1, NULL), lk = 0x18 | lo->frame_cp;
	__u32 i;

	frame(base, fm, lk);
	link = ret_pc(fm, 4);
	nkeys = 0;
	chain_cfn = 0;
	key_fn[nkeys] = fm, key_pc[nkeys] = link, key_link[nkeys++] = lk;
	for (i = 0; i < n; i++) {
		fns[i] = new_lua_fn(30 + i, 200 + 10 * (__s32)i, &pts[i]);
		if (i == c && c > 0) {
			base = callee(base);
			chain_cfn = new_c_fn(lo->ff_c, 0x402000);
			frame(base, chain_cfn, link);
			link = 0x28 | lo->frame_c; /* 5 slots down to the C function's frame */
		}
		base = callee(base);
		frame(base, fns[i], link);
		lk = link;
		link = ret_pc(fns[i], 5 + i % 7);
		key_fn[nkeys] = fns[i], key_pc[nkeys] = link, key_link[nkeys++] = lk;
	}
	base = callee(base);
	frame(base, leaf, link);
	key_fn[nkeys] = leaf, key_pc[nkeys] = leaf_pc, key_link[nkeys++] = link;
	return base;
}

/* Free generation slots bumped by free_proto since the last walk that filled the cache. */
static int freed_slot[NUPP_WALK_PGEN];

/* A prototype freed, as luajit:proto_free counts it in the sampler: one more on the free
 * generation of the block of its GCproto. */
static void free_proto(__u64 pt)
{
	__u32 sweeps;

	w.pgen[nupp_walk_pgen_slot(pt)]++;
	w.fc_pg++; /* the process's count of frees */
	freed_slot[nupp_walk_pgen_slot(pt)] = 1;
	/* A prototype (and any closure of it) is freed by a GC sweep, which the VM counts
	 * as it begins. */
	memcpy(&sweeps, (void *)(uintptr_t)(g + lo->g_sweepno), 4);
	put32(g + lo->g_sweepno, sweeps + 1);
}

/* The GCproto of Lua function fn (in fake memory). */
static __u64 proto_of(__u64 fn)
{
	__u64 bc;

	memcpy(&bc, (void *)(uintptr_t)(fn + lo->fn_pc), 8);
	return bc - lo->pt_size;
}

/* The hits a 2-way cache of NUPP_WALK_FC entries should give on a walk of the chain's
 * keys (leaf first, main last) after a walk that filled them: a model of the cache, for
 * set collisions (a miss fills way 0 and moves its key to way 1, which may evict a later
 * key) and for the prototypes freed since (free_proto: a key whose GCproto lies in a block
 * counted is a miss, refilled in place). Forgets the frees. */
static __u32 hits_expected(void)
{
	static int way_key[NUPP_WALK_FC];
	__u32 i, hits = 0, pass, set;

	for (i = 0; i < NUPP_WALK_FC; i++)
		way_key[i] = -1;
	for (pass = 0; pass < 2; pass++)
		for (i = nkeys; i-- > 0;) {
			set = nupp_walk_fc_set(key_pc[i]);
			if (way_key[set] == (int)i || way_key[set + 1] == (int)i) {
				if (!freed_slot[nupp_walk_pgen_slot(proto_of(key_fn[i]))])
					hits += pass;
				continue;
			}
			way_key[set + 1] = way_key[set];
			way_key[set] = (int)i;
		}
	memset(freed_slot, 0, sizeof(freed_slot));
	return hits;
}

START_TEST(walk_frame_cache_gives_the_same_stacks_with_fewer_reads)
{
	__u64 fns[40], pts[40], pt_leaf, leaf, b, hash;
	int reads_off;
	__u32 i;

	setup();
	leaf = new_lua_fn(30, 20, &pt_leaf);
	b = distinct_chain(40, 17, fns, pts, leaf, ret_pc(leaf, 11));
	ck_assert_uint_eq(nkeys, 42);
	{
		struct nupp_walk_regs r = regs_interp(b, ret_pc(leaf, 11));

		/* without the cache: the reference stack */
		w.fc_tag = 0;
		reads = 0;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		reads_off = reads;
		hash = w.hash;
		saved = w.st;
		ck_assert_uint_eq(w.st.depth, 43); /* leaf, 40 Lua, C, main */
		ck_assert_uint_eq(w.fc_hits + w.fc_fills, 0);

		/* the first walk with the cache fills it: every Lua frame with a validated
		 * PC (the leaf, f[0..39], main; not the C function) */
		w.fc_tag = (7ull << 22) | 1234;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.fc_hits, 0);
		ck_assert_uint_eq(w.fc_fills, 42);
		ck_assert_uint_eq(w.hash, hash);
		ck_assert_mem_eq(&w.st, &saved, sizeof(saved));

		/* the next walk takes them from the cache: the same stack, byte for byte;
		 * only the VM state, the stack window, the C function, the call site before
		 * its link, and the frames whose slot another key took are read */
		reads = 0;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.fc_hits, hits_expected()); /* 42 but for slot collisions */
		ck_assert_uint_ge(w.fc_hits, 30);
		ck_assert_uint_eq(w.fc_fills, 42 - w.fc_hits); /* ... which it fills again */
		ck_assert_uint_eq(w.hash, hash);
		ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
		ck_assert_int_le(reads, 4 + 3 * (42 - (int)w.fc_hits)); /* a GCfunc, GCproto, call site per miss */
		ck_assert_int_lt(2 * reads, reads_off);
		ck_assert_int_gt(reads_off, 40);

		/* another tag (a VM opened or closed, or another process): nothing is hit */
		w.fc_tag = (8ull << 22) | 1234;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.fc_hits, 0);
		ck_assert_mem_eq(&w.st, &saved, sizeof(saved));

		/* a leaf at another PC: its frame is read again, the callers are hit */
		r = regs_interp(b, ret_pc(leaf, 12));
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_ge(w.fc_hits, 30);
		ck_assert_int_eq(w.st.frames[0].pos, 12);
		for (i = 1; i < 43; i++)
			ck_assert_mem_eq(&w.st.frames[i], &saved.frames[i], sizeof(saved.frames[i]));
	}
	w.fc_tag = 0;
}
END_TEST

/* An entry keeps 31 bits of the count of frees it was checked at: a walk 2^31 frees later,
 * after its prototype was freed and replaced, must not skip its check (the tag moves). */
START_TEST(walk_frame_cache_count_of_frees_does_not_wrap_into_a_skip)
{
	__u64 fns[8], pts[8], pt_leaf, leaf, b;
	struct nupp_walk_regs r;

	setup();
	leaf = new_lua_fn(30, 20, &pt_leaf);
	b = distinct_chain(8, 0, fns, pts, leaf, ret_pc(leaf, 11));
	r = regs_interp(b, ret_pc(leaf, 11));
	w.fc_pg = 5;
	w.fc_tag = nupp_walk_fc_tag(100, 1, w.fc_pg);
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	ck_assert_uint_eq(w.fc_hits, hits_expected());
	ck_assert_uint_gt(w.fc_hits, 0);

	/* f[3]'s prototype freed and replaced, then 2^31 - 1 more frees elsewhere: the
	 * count's low 31 bits are those f[3]'s entry was checked at */
	free_proto(pts[3]);
	put32(pts[3] + lo->pt_firstline, 900);
	w.fc_pg += (1ull << 31) - 1;
	ck_assert_uint_eq(w.fc_pg & 0x7fffffff, 5);
	ck_assert_uint_ne(nupp_walk_fc_tag(100, 1, w.fc_pg), nupp_walk_fc_tag(100, 1, 5));
	w.fc_tag = nupp_walk_fc_tag(100, 1, w.fc_pg);
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	ck_assert_uint_eq(w.fc_hits, 0); /* every entry is of the old tag */
	ck_assert_uint_eq(w.st.frames[5].ptr, pts[3]);
	ck_assert_int_eq(w.st.frames[5].firstline, 900);

	/* the tag keeps the process and the epoch apart as before, and is never 0 */
	ck_assert_uint_ne(nupp_walk_fc_tag(100, 1, 5), nupp_walk_fc_tag(100, 2, 5));
	ck_assert_uint_ne(nupp_walk_fc_tag(100, 1, 5), nupp_walk_fc_tag(101, 1, 5));
	ck_assert_uint_ne(nupp_walk_fc_tag(1, 0, 1ull << 31), 0);
	ck_assert_uint_eq(nupp_walk_fc_tag(100, 1, 5), (100ull << 42) | 1);
}
END_TEST

START_TEST(walk_frame_cache_follows_prototypes_freed_and_frames_changed)
{
	__u64 fns[8], pts[8], pt_leaf, leaf, b, pt_new, chunk2;
	__u32 hits;

	setup();
	leaf = new_lua_fn(30, 20, &pt_leaf);
	b = distinct_chain(8, 0, fns, pts, leaf, ret_pc(leaf, 11));
	{
		struct nupp_walk_regs r = regs_interp(b, ret_pc(leaf, 11));

		w.fc_tag = (100ull << 22) | 1;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.fc_hits, hits_expected()); /* leaf, f[0..7], main */

		/* f[3]'s prototype is freed and its memory holds another prototype (another
		 * chunk, first line, size) run by the same closure: luajit:proto_free counted
		 * the blocks of its allocation, so f[3]'s entry (its PC lies there) is a miss
		 * and the new facts are read (and the CALL before f[4]'s link, which f[3]'s
		 * entry held); the frames elsewhere are still hit */
		pt_new = pts[3];
		free_proto(pt_new);
		chunk2 = new_str("@other.lua");
		put64(pt_new + lo->pt_chunkname, chunk2);
		put32(pt_new + lo->pt_firstline, 900);
		put32(pt_new + lo->pt_sizebc, 33);
		hits = hits_expected();
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.fc_hits, hits);
		ck_assert_uint_le(w.fc_hits, 10 - 1);
		ck_assert_uint_ge(w.fc_hits, 4);
		ck_assert_uint_eq(w.fc_fills, 10 - w.fc_hits);
		ck_assert_uint_eq(w.st.frames[5].ptr, pt_new);
		ck_assert_uint_eq(w.st.frames[5].chunkname, chunk2);
		ck_assert_int_eq(w.st.frames[5].firstline, 900);
		ck_assert_uint_eq(w.st.frames[5].sizebc, 33);
		ck_assert_uint_ge(w.fc_stale, 1); /* per lookup of its entry */

		/* the entries filled before the free were checked against their generation,
		 * and took the count of frees they were checked at: the next walk reads none */
		ck_assert_uint_ge(w.fc_pgreads, w.fc_hits);
		hits = hits_expected();
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.fc_hits, hits);
		ck_assert_uint_eq(w.fc_pgreads, 0);
		ck_assert_uint_eq(w.fc_stale, 0);
		ck_assert_uint_eq(w.st.frames[5].firstline, 900);

		/* ... and one of them (f[6]'s, checked and brought forward) whose prototype is
		 * freed next is refused all the same: the new facts are read */
		free_proto(pts[6]);
		put32(pts[6] + lo->pt_firstline, 901);
		hits = hits_expected();
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.fc_hits, hits);
		ck_assert_uint_ge(w.fc_stale, 1); /* per lookup of its entry */
		ck_assert_uint_eq(w.st.frames[2].ptr, pts[6]);
		ck_assert_int_eq(w.st.frames[2].firstline, 901);
		ck_assert_int_eq(w.st.frames[5].firstline, 900);

		/* a frame header changed between samples (f[5] now called from C by
		 * lua_call): its entry (function, PC) still names it, and the walk follows the
		 * new link, read from the stack; the frames above and below are still hit */
		put64(b - 3 * 40 - 8, 0x28 | lo->frame_c); /* f[5]'s link: its base is b - 120 */
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.depth, 10);
		ck_assert_uint_eq(w.st.frames[3].ptr, pts[5]);
		ck_assert_uint_eq(w.st.frames[3].link, lo->frame_c);
		ck_assert_int_eq(w.st.frames[3].pos, 10); /* it called f[6] at 5 + 5 */
		ck_assert_uint_eq(w.st.frames[4].ptr, pts[4]);
		ck_assert_int_eq(w.st.frames[4].pos, -1); /* the C caller: no position */
		ck_assert_uint_eq(w.st.frames[5].ptr, pts[3]);
		ck_assert_int_eq(w.st.frames[5].firstline, 900);
		ck_assert_uint_eq(w.fc_hits, 9);  /* leaf, f[7], f[6], f[5], f[3..0], main */
		ck_assert_uint_eq(w.fc_fills, 0); /* f[4] has no PC (called from C) */
	}
	w.fc_tag = 0;
}
END_TEST

START_TEST(walk_frame_cache_and_recursion_give_the_same_stack)
{
	__u64 fm, rec, pt_rec, pt_leaf, leaf, b, hash, key;
	int pass;

	setup();
	leaf = new_lua_fn(30, 20, &pt_leaf);
	b = recursion(60, &fm, &rec, &pt_rec, leaf);
	{
		struct nupp_walk_regs r = regs_interp(b, ret_pc(leaf, 11));

		w.fc_tag = 0;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		hash = w.hash;
		key = nupp_walk_key(&w);
		saved = w.st;
		/* filled, then hit: cached frames hand the recursion over to the repeat path
		 * (the same stack key too) */
		w.fc_tag = (300ull << 22) | 5;
		for (pass = 0; pass < 2; pass++) {
			reads = 0;
			ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
			check_recursion(60, pt_leaf, pt_rec);
			ck_assert_uint_eq(w.hash, hash);
			ck_assert_uint_eq(nupp_walk_key(&w), key);
			ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
		}
		ck_assert_uint_gt(w.fc_hits, 0);
		ck_assert_int_le(reads, 4); /* VM state and stack windows only */
	}
	w.fc_tag = 0;
}
END_TEST

/* A function's facts read by a walk that was not refused (its kind, C function or
 * bytecode and prototype) are kept in the frame cache until the VM begins a GC sweep (no
 * object is freed before that): a C frame met again is not read again; after a sweep
 * began it is, and a function made at the address of one freed is named as it is now. */
START_TEST(walk_function_facts_are_kept_until_the_vm_begins_a_gc_sweep)
{
	__u64 fns[8], pts[8], pt_leaf, leaf, b;
	struct nupp_walk_regs r;
	__u32 i, ci = 0;

	setup();
	leaf = new_lua_fn(30, 20, &pt_leaf);
	b = distinct_chain(8, 3, fns, pts, leaf, ret_pc(leaf, 11));
	ck_assert_uint_ne(chain_cfn, 0);
	r = regs_interp(b, ret_pc(leaf, 11));
	w.fc_tag = 0;
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	saved = w.st;
	for (i = 0; i < w.st.depth; i++)
		if (w.st.frames[i].kind == NUPP_SMP_C)
			ci = i;
	ck_assert_uint_eq(w.st.frames[ci].kind, NUPP_SMP_C);
	ck_assert_uint_eq(w.st.frames[ci].ptr, 0x402000);
	ck_assert_uint_eq(w.fc_fns + w.fc_fnfills, 0); /* no cache, no facts kept */

	/* cold: every frame is read, the Lua frames fill frame entries, and every function
	 * read has its facts kept (the leaf, f[0..7], the C function, main) */
	w.fc_tag = (13ull << 22) | 5;
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
	ck_assert_uint_eq(w.fc_fns, 0);
	ck_assert_uint_eq(w.fc_fnfills, 11);

	/* warm: the same stack, the C function not read */
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
	ck_assert_uint_ge(w.fc_fns, 1);
	ck_assert_uint_eq(w.rd_fn, 2 * (10 - w.fc_hits - (w.fc_fns - 1))); /* a Lua miss: GCfunc and GCproto */

	/* ... and its frame taken from its facts (nupp_walk_cframe) in the step whose cache
	 * run goes on below it: the leaf's step, a run of f[7] .. f[3], the C function and a
	 * run of f[2] .. main, the end (4 steps; with a full step for the C function, 5) */
	{
		struct nupp_walk_regs rr = r;
		__s32 vms;
		int steps = 1;

		ck_assert_int_ge(NUPP_WALK_CACHED, 5);
		on_vm_thread(&rr);
		ck_assert_int_eq(nupp_walk_start(&w, lo, g, &rr, 64, NUPP_WALK_BASE_AUTO, &vms), 0);
		while (!nupp_walk_step(&w, lo) && steps < 64)
			steps++;
		ck_assert_int_eq(w.result, NUPP_WALK_DONE);
		ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
		ck_assert_int_eq(steps, 4);
	}

	/* the VM begins a GC sweep: its facts are read again, and kept again */
	put32(g + lo->g_sweepno, 1);
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
	ck_assert_uint_eq(w.fc_fns, 0);
	ck_assert_uint_ge(w.fc_fnfills, 1);
	ck_assert_uint_ge(w.rd_fn, 1);

	/* that sweep freed it and another C function was made at its address: named as
	 * it is now, then kept */
	put64(chain_cfn + lo->fn_cf, 0x403000);
	put32(g + lo->g_sweepno, 2);
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(w.st.frames[ci].kind, NUPP_SMP_C);
		ck_assert_uint_eq(w.st.frames[ci].ptr, 0x403000);
		ck_assert_uint_eq(w.st.depth, saved.depth);
	}
	ck_assert_uint_ge(w.fc_fns, 1);

	/* another VM of the process (whose count of sweeps is its own): not its entry */
	ck_assert_ptr_nonnull(nupp_walk_fc_fn(&w, w.fc_tag, chain_cfn));
	w.g ^= 0x100000;
	ck_assert_ptr_null(nupp_walk_fc_fn(&w, w.fc_tag, chain_cfn));
	w.g ^= 0x100000;

	/* another tag (another process, a VM opened or closed): nothing kept is used */
	w.fc_tag = (14ull << 22) | 5;
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	ck_assert_uint_eq(w.fc_fns, 0);
	ck_assert_uint_eq(w.st.frames[ci].ptr, 0x403000);
	w.fc_tag = 0;
}
END_TEST

/* The stack key (nupp_walk_key) names each Lua frame's prototype incarnation by the free
 * generation of its block: the same whatever path the walk took (cache off, filling,
 * hits, recursion), the same after a prototype freed elsewhere, another after a frame's
 * own prototype is freed and another made at its address with the same facts (the
 * frames then read the same, byte for byte). On a trace it holds the trace's serial
 * (walk_trace_caches_give_the_same_stack_with_fewer_reads). */
START_TEST(walk_stack_key_moves_only_with_the_frames_prototypes)
{
	__u64 fns[8], pts[8], pt_leaf, leaf, b, key, key2, other = 0, a;
	__u32 i, j;
	int clash;

	setup();
	leaf = new_lua_fn(30, 20, &pt_leaf);
	b = distinct_chain(8, 3, fns, pts, leaf, ret_pc(leaf, 11));
	/* an address whose free generation slot no frame's GCproto shares */
	for (a = A(0x300000); !other; a += NUPP_WALK_PGEN_BLOCK) {
		clash = nupp_walk_pgen_slot(a) == nupp_walk_pgen_slot(pt_leaf);
		for (j = 0; j < nkeys; j++)
			clash |= nupp_walk_pgen_slot(a) == nupp_walk_pgen_slot(proto_of(key_fn[j]));
		if (!clash)
			other = a;
	}
	{
		struct nupp_walk_regs r = regs_interp(b, ret_pc(leaf, 11));

		w.fc_tag = 0;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		key = nupp_walk_key(&w);
		saved = w.st;
		ck_assert_uint_eq(w.st.depth, 11); /* leaf, 8 Lua, C, main */
		ck_assert_uint_ne(key, w.hash);
		/* filled, then hit: the same key */
		w.fc_tag = (900ull << 22) | 2;
		for (i = 0; i < 2; i++) {
			ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
			ck_assert_uint_eq(nupp_walk_key(&w), key);
			ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
		}
		ck_assert_uint_gt(w.fc_hits, 0);

		/* a prototype freed elsewhere: the same key, from the cache */
		free_proto(other);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(nupp_walk_key(&w), key);
		ck_assert_uint_gt(w.fc_hits, 0);
		w.fc_tag = 0;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(nupp_walk_key(&w), key);

		/* f[5]'s prototype freed and remade at its address with the same facts: the
		 * same frames, another key, whether the frames come from the cache or not */
		w.fc_tag = (900ull << 22) | 2;
		free_proto(pts[5]);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_mem_eq(&w.st, &saved, sizeof(saved));
		key2 = nupp_walk_key(&w);
		ck_assert_uint_ne(key2, key);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_gt(w.fc_hits, 0);
		ck_assert_uint_eq(nupp_walk_key(&w), key2);
		w.fc_tag = 0;
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_eq(nupp_walk_key(&w), key2);

		/* the leaf's (the frame a sample starts from) likewise */
		free_proto(pt_leaf);
		ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
		ck_assert_uint_ne(nupp_walk_key(&w), key2);
		ck_assert_uint_ne(nupp_walk_key(&w), key);
	}
	w.fc_tag = 0;
}
END_TEST

/* Checks the notes of the last walk of a distinct_chain (NUPP_WALK_WATCH): one for each
 * Lua frame emitted without the frame cache, in frame order, with its function and the
 * key of the entry it filled (its PC: key_*), and one for each function's facts the walk
 * cached (no prototype, the key fn | 1; as many as it filled). Returns how many Lua
 * frames the stack has. */
static __u32 check_notes(__u32 nhits)
{
	__u32 i, j = 0, nlua = 0, nfn = 0;

	for (i = 0; i < w.st.depth; i++)
		nlua += w.st.frames[i].kind == NUPP_SMP_LUA;
	ck_assert_uint_eq(nlua, nkeys);
	for (i = 0; i < w.nmet; i++)
		if (w.met[i].key & 1) {
			ck_assert_uint_eq(w.met[i].pt, 0);
			ck_assert_uint_eq(w.met[i].key, nupp_walk_fc_fn_key(w.met[i].fn));
			nfn++;
		}
	ck_assert_uint_eq(nfn, w.fc_fnfills);
	ck_assert_uint_eq(w.nmet - nfn, nlua - nhits);
	for (i = 0, nlua = 0; i < w.st.depth && j < w.nmet; i++) {
		while (j < w.nmet && (w.met[j].key & 1))
			j++;
		if (j == w.nmet || w.st.frames[i].kind != NUPP_SMP_LUA)
			continue;
		nlua++;
		if (w.st.frames[i].ptr != w.met[j].pt)
			continue; /* taken from the cache */
		ck_assert_uint_eq(w.met[j].fn, key_fn[nkeys - nlua]);
		ck_assert_uint_eq(w.met[j].key, key_pc[nkeys - nlua]);
		j++;
	}
	while (j < w.nmet && (w.met[j].key & 1))
		j++;
	ck_assert_uint_eq(j, w.nmet); /* every note is of a frame, in order */
	return nkeys;
}

/* The sampler watches the prototypes of a walk's frames (their frees are reported only
 * then): the walk notes each Lua frame it read, none it took from the cache (noted when
 * its entry was filled), and has room for a note of every frame of the deepest stack,
 * however cold the cache (a frame not noted would lose the sample). */
START_TEST(walk_notes_the_prototypes_of_the_frames_it_read)
{
	__u64 fns[300], pts[300], pt_leaf, leaf, b;
	struct nupp_walk_regs r;

	setup();
	leaf = new_lua_fn(30, 20, &pt_leaf);
	b = distinct_chain(40, 17, fns, pts, leaf, ret_pc(leaf, 11));
	r = regs_interp(b, ret_pc(leaf, 11));
	w.fc_tag = (11ull << 22) | 77;
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	ck_assert_uint_eq(w.st.depth, 43);
	ck_assert_uint_eq(w.fc_fills, 42);
	ck_assert_uint_eq(check_notes(0), 42);
	ck_assert_uint_eq(w.met[0].key, nupp_walk_fc_fn_key(leaf)); /* the leaf's function's facts */
	ck_assert_uint_eq(w.met[1].pt, pt_leaf);                   /* ... then its prototype */
	ck_assert_uint_eq(w.unwatched, 0);

	/* warm: only the frames read again (set collisions) are noted */
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	ck_assert_uint_ge(w.fc_hits, 30);
	ck_assert_uint_eq(check_notes(w.fc_hits), 42);
	ck_assert_uint_eq(w.unwatched, 0);

	/* without the cache every Lua frame is noted, with no entry */
	w.fc_tag = 0;
	ck_assert_int_eq(walk(&r, 64), NUPP_WALK_DONE);
	ck_assert_uint_eq(w.nmet, 42);
	ck_assert_uint_eq(w.met[41].key, 0);

	/* 272 Lua frames, walked to the deepest stack with a cold cache: each of the
	 * NUPP_SMP_MAX_DEPTH frames kept is noted and filled, none unwatched */
	setup();
	put32(mainL + lo->L_stacksize, 2048); /* 5 slots a frame */
	leaf = new_lua_fn(30, 20, &pt_leaf);
	b = distinct_chain(270, 0, fns, pts, leaf, ret_pc(leaf, 11));
	r = regs_interp(b, ret_pc(leaf, 11));
	w.fc_tag = (12ull << 22) | 77;
	ck_assert_int_eq(walk(&r, NUPP_SMP_MAX_DEPTH), NUPP_WALK_DONE);
	ck_assert_uint_eq(w.st.depth, NUPP_SMP_MAX_DEPTH);
	ck_assert_uint_eq(w.nmet, NUPP_SMP_MAX_DEPTH);
	ck_assert_uint_eq(w.fc_fills, NUPP_SMP_MAX_DEPTH);
	ck_assert_uint_eq(w.unwatched, 0);
	/* the next walk starts afresh: its notes are its own */
	ck_assert_int_eq(walk(&r, NUPP_SMP_MAX_DEPTH), NUPP_WALK_DONE);
	ck_assert_uint_eq(w.fc_hits + w.nmet - w.fc_fnfills, NUPP_SMP_MAX_DEPTH); /* and its functions cached */
	ck_assert_uint_eq(w.unwatched, 0);
	w.fc_tag = 0;
}
END_TEST

/* Runs the suite. */
/* A small deterministic generator for the random stacks below. */
static __u64 rnd_state = 12345;

static __u32 rnd(__u32 n)
{
	rnd_state = rnd_state * 6364136223846793005ull + 1442695040888963407ull;
	return (__u32)(rnd_state >> 33) % n;
}

/* Random stacks of Lua, C and fast functions, dummy frames, vararg functions' frames
 * above their pseudo-frames, and every link type (Lua, C, pcall, cp, pcallh, vararg,
 * continuation, some with bad offsets), walked with a
 * small or the default depth: nupp_walk_cframe takes C and fast functions' frames as
 * the full step would (cframe_checked, on every step of every walk), refuses the rest,
 * and a warm walk gives the cold walk's stack. */
START_TEST(walk_cframe_is_the_full_step_on_random_stacks)
{
	static const int link_kind[] = { 1, 6, 5, 3, 2, 7 };
	struct nupp_smp_stack cold;
	__u64 lf[4], cf[2], ff[2], leaf, base, link, prev, fn, hash;
	__u32 it, n, i, j, k, depth, pass, t;
	int rc, prev_lua;

	for (it = 0; it < 3000; it++) {
		setup();
		for (i = 0; i < 4; i++)
			lf[i] = new_lua_fn(30, 100 + (__s32)i, NULL);
		for (i = 0; i < 2; i++)
			cf[i] = new_c_fn(lo->ff_c, 0x402000 + i);
		for (i = 0; i < 2; i++)
			ff[i] = new_c_fn((__u8)(20 + i), 0);
		leaf = new_lua_fn(30, 20, NULL);
		base = stack0 + 32;
		prev = lf[0];
		frame(base, prev, 0x18 | lo->frame_cp);
		n = 1 + rnd(30);
		for (i = 0; i < n; i++) {
			k = rnd(10);
			fn = k < 4 ? lf[rnd(4)] : k < 7 ? cf[rnd(2)] : k < 9 ? ff[rnd(2)] : rnd(3) ? mainL : lf[0];
			for (j = 0, prev_lua = 0; j < 4; j++)
				prev_lua |= prev == lf[j];
			k = rnd(12);
			if (prev_lua && k < 7) {
				link = ret_pc(prev, 1 + rnd(20));
			} else if (k < 8) {
				link = ret_pc(lf[rnd(4)], 1 + rnd(20));
			} else {
				j = (__u32)link_kind[rnd(6)];
				t = j == 1 ? lo->frame_c : j == 6 ? lo->frame_pcall : j == 5 ? lo->frame_cp :
				    j == 3 ? lo->frame_varg : j == 2 ? lo->frame_cont : lo->frame_pcallh;
				link = (rnd(20) ? 40 : 8 * rnd(8)) | t;
			}
			base = callee(base);
			frame(base, fn, link);
			if ((link & lo->frame_typep) == lo->frame_cont)
				put64(base - 24, rnd(2) ? ret_pc(lf[rnd(4)], 1 + rnd(20)) : 0);
			for (j = 0, prev_lua = 0; j < 4; j++)
				prev_lua |= fn == lf[j];
			if (prev_lua && !rnd(3)) {
				/* A vararg function: that frame is its pseudo-frame, its own frame is
				 * above the fixed arguments, linked down to it (now and then with
				 * another function in it). */
				__u64 real = base + 8 * (2 + rnd(3));

				frame(real, rnd(8) ? fn : lf[rnd(4)], (real - base) | lo->frame_varg);
				base = real;
			}
			prev = fn;
		}
		base = callee(base);
		for (j = 0, prev_lua = 0; j < 4; j++)
			prev_lua |= prev == lf[j];
		if (rnd(2))
			link = prev_lua ? ret_pc(prev, 1 + rnd(20)) : (40 | lo->frame_c);
		else
			link = 40 | (rnd(2) ? lo->frame_pcall : lo->frame_c);
		frame(base, leaf, link);
		depth = rnd(3) ? 64 : 1 + rnd(20);
		{
			struct nupp_walk_regs r = regs_interp(base, ret_pc(leaf, 11));

			w.fc_tag = 0;
			rc = walk(&r, depth);
			cold = w.st;
			hash = w.hash;
			w.fc_tag = ((__u64)(it + 1) << 22) | 5;
			for (pass = 0; pass < 3; pass++) {
				ck_assert_int_eq(walk(&r, depth), rc);
				ck_assert_mem_eq(&w.st, &cold, sizeof(cold));
				ck_assert_uint_eq(w.hash, hash);
			}
		}
	}
	w.fc_tag = 0;
	printf("nupp_walk_cframe: %lu frames taken, %lu refused; %lu cache runs: %lu pseudo-frames taken, %lu left\n",
	       cframe_taken, cframe_refused, cached_runs, cached_pseudo, cached_skip_left);
	ck_assert_uint_gt(cframe_taken, 1000);
	ck_assert_uint_gt(cframe_refused, 1000);
	ck_assert_uint_gt(cached_pseudo, 1000);
	ck_assert_uint_gt(cached_skip_left, 100);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("walk");
	TCase *tc = tcase_create("walk");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, walk_registers_three_lua_frames);
	tcase_add_test(tc, walk_fast_and_c_functions);
	tcase_add_test(tc, walk_memory_mode_leaf_pc_from_save_pc);
	tcase_add_test(tc, walk_call_window_uses_rbx_as_link);
	tcase_add_test(tc, walk_return_window_and_stale_link);
	tcase_add_test(tc, walk_vararg_pseudo_frame_is_skipped);
	tcase_add_test(tc, walk_vararg_pseudo_frame_of_a_cached_frame_is_not_read);
	tcase_add_test(tc, walk_vararg_frame_below_the_leaf_is_taken_in_the_cache_run);
	tcase_add_test(tc, walk_pseudo_frame_hands_its_call_to_the_frame_below);
	tcase_add_test(tc, walk_continuation_and_pcall_frames);
	tcase_add_test(tc, walk_continuation_dispatch_keeps_the_returning_builtin);
	tcase_add_test(tc, walk_fast_function_calling_out_is_proven_by_save_pc);
	tcase_add_test(tc, walk_trace_start_frame_and_mcode_offset);
	tcase_add_test(tc, walk_trace_caches_give_the_same_stack_with_fewer_reads);
	tcase_add_test(tc, walk_trace_start_entry_is_not_the_leaf_at_its_first_instruction);
	tcase_add_test(tc, walk_coroutine_chains_to_resumer);
	tcase_add_test(tc, walk_cycle_and_bad_pointer_end_bounded);
	tcase_add_test(tc, walk_deep_stack_keeps_its_leaf_most_frames);
	tcase_add_test(tc, walk_thread_not_running_the_vm_is_host_code);
	tcase_add_test(tc, walk_interp_in_a_synced_helper_uses_save_pc);
	tcase_add_test(tc, walk_interp_under_the_jit_compilers_protected_call_uses_the_helpers_frame);
	tcase_add_test(tc, walk_while_recording_a_trace);
	tcase_add_test(tc, helper_samples_are_kept_by_what_their_call_site_stored);
	tcase_add_test(tc, walk_interp_in_c_helper_uses_rbp_then_l_base);
	tcase_add_test(tc, walk_vm_call_entry_and_returned_function_value);
	tcase_add_test(tc, walk_deep_recursion_reads_each_thing_once);
	tcase_add_test(tc, walk_memo_and_windows_do_not_outlive_a_walk);
	tcase_add_test(tc, walk_frame_cache_gives_the_same_stacks_with_fewer_reads);
	tcase_add_test(tc, walk_frame_cache_follows_prototypes_freed_and_frames_changed);
	tcase_add_test(tc, walk_frame_cache_count_of_frees_does_not_wrap_into_a_skip);
	tcase_add_test(tc, walk_frame_cache_and_recursion_give_the_same_stack);
	tcase_add_test(tc, walk_function_facts_are_kept_until_the_vm_begins_a_gc_sweep);
	tcase_add_test(tc, walk_stack_key_moves_only_with_the_frames_prototypes);
	tcase_add_test(tc, walk_notes_the_prototypes_of_the_frames_it_read);
	tcase_add_test(tc, walk_cframe_is_the_full_step_on_random_stacks);
	tcase_add_checked_fixture(tc, NULL, cframe_none_differ);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
