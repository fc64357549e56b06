/* Frame names as jit.p gives them (luajit -jp=F), derived from real prototypes of an
 * in-process LuaJIT: caller-bytecode names (local, global, field, method, metamethod),
 * firstline fallback, lines mode, builtins, C functions, modules, fingerprint checks;
 * and prototype incarnations: the proto_new/proto_free events decide which copy and
 * chunk name name a frame sampled at a given generation. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"
#include "lj_obj.h"
#include "lj_bc.h"
#include "lj_frame.h"
#include "lj_gc.h"

#include "core/sampler_internal.h"
#include "core/nupp_internal.h"
#include "nupp/proto_gen.h"

extern const struct nupp_lj_layout luajit_bpf_layout;

static const char *chunk =
	"local function foo() end\n"                       /* 1 */
	"function gfoo() end\n"                            /* 2 */
	"local t = { m = function() end }\n"               /* 3 */
	"local mt = { __index = function() end }\n"        /* 4 */
	"local o = setmetatable({}, mt)\n"                 /* 5 */
	"local function caller()\n"                        /* 6 */
	"  foo()\n"                                        /* 7 */
	"  gfoo()\n"                                       /* 8 */
	"  t.m()\n"                                        /* 9 */
	"  t:m()\n"                                        /* 10 */
	"  local x = o.y\n"                                /* 11 */
	"  return x\n"                                     /* 12 */
	"end\n"                                            /* 13 */
	"return caller, foo, gfoo, t.m, mt.__index\n";

static lua_State *L;
static GCproto *pcaller, *pfoo, *pgfoo, *pm, *pidx;
static struct nupp_sym *sym;

/* Reads this process's own memory: the target is us. */
static int self_read(void *ctx, __u64 addr, void *buf, size_t len)
{
	memcpy(buf, (const void *)(uintptr_t)addr, len);
	return 0;
}

/* A C function named by its ELF symbol. */
int test_cfunc_marker(lua_State *Ls)
{
	return 0;
}

/* The proto of the function at stack index i. */
static GCproto *proto_at(int i)
{
	return funcproto((GCfunc *)lua_topointer(L, i));
}

/* Frame of a Lua proto at bytecode position pos, called through link. */
static struct nupp_smp_frame lua_frame(GCproto *pt, int pos, int link)
{
	struct nupp_smp_frame f = { 0 };

	f.kind = NUPP_SMP_LUA;
	f.ptr = (__u64)(uintptr_t)pt;
	f.chunkname = (__u64)(uintptr_t)gcref(pt->chunkname);
	f.firstline = pt->firstline;
	f.sizebc = pt->sizebc;
	f.pos = pos;
	f.link = (__u8)link;
	return f;
}

/* Position of the n-th (0-based) instruction with opcode op in pt. */
static int nth_op(GCproto *pt, BCOp op, int n)
{
	MSize i;

	for (i = 0; i < pt->sizebc; i++)
		if (bc_op(proto_bc(pt)[i]) == op && n-- == 0)
			return (int)i;
	return -1;
}

/* Loads the chunk once. */
static void setup(void)
{
	L = luaL_newstate();
	luaL_openlibs(L);
	ck_assert_int_eq(luaL_loadbuffer(L, chunk, strlen(chunk), "=symtest"), 0);
	ck_assert_int_eq(lua_pcall(L, 0, 5, 0), 0);
	pcaller = proto_at(1);
	pfoo = proto_at(2);
	pgfoo = proto_at(3);
	pm = proto_at(4);
	pidx = proto_at(5);
	sym = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);
	ck_assert_ptr_nonnull(sym);
}

/* Frees it. */
static void teardown(void)
{
	nupp_sym_free(sym);
	lua_close(L);
}

/* Names callee called at caller position pos through link. */
static const char *name_of(GCproto *callee, int pos, int link, char *buf, size_t size)
{
	struct nupp_smp_frame f = lua_frame(callee, 0, link), c = lua_frame(pcaller, pos, FRAME_LUA);

	ck_assert_int_eq(nupp_sym_frame(sym, &f, &c, 0, buf, size), 0);
	return buf;
}

START_TEST(names_come_from_the_callers_bytecode)
{
	char b[256];

	ck_assert_str_eq(name_of(pfoo, nth_op(pcaller, BC_CALL, 0), FRAME_LUA, b, sizeof(b)), "symtest:foo");
	ck_assert_str_eq(name_of(pgfoo, nth_op(pcaller, BC_CALL, 1), FRAME_LUA, b, sizeof(b)), "symtest:gfoo");
	ck_assert_str_eq(name_of(pm, nth_op(pcaller, BC_CALL, 2), FRAME_LUA, b, sizeof(b)), "symtest:m");
	ck_assert_str_eq(name_of(pm, nth_op(pcaller, BC_CALL, 3), FRAME_LUA, b, sizeof(b)), "symtest:m");
	/* a metamethod called by the interpreter: a continuation link, named by the event */
	ck_assert_str_eq(name_of(pidx, nth_op(pcaller, BC_TGETS, 2), FRAME_CONT, b, sizeof(b)), "symtest:__index");
}
END_TEST

START_TEST(names_fall_back_to_firstline)
{
	char b[256];
	struct nupp_smp_frame f = lua_frame(pfoo, 0, FRAME_C);
	struct nupp_smp_frame c = lua_frame(pcaller, nth_op(pcaller, BC_CALL, 0), FRAME_LUA);

	/* no caller, or called from C (pcall, lua_call): module:firstline */
	ck_assert_int_eq(nupp_sym_frame(sym, &f, NULL, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:1");
	ck_assert_int_eq(nupp_sym_frame(sym, &f, &c, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:1");
	/* the main chunk */
	f = lua_frame(pcaller, -1, FRAME_LUA);
	ck_assert_int_eq(nupp_sym_frame(sym, &f, NULL, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:6");
}
END_TEST

START_TEST(lines_mode_names_the_current_line)
{
	char b[256];
	struct nupp_sym *ls = nupp_sym_new(getpid(), &luajit_bpf_layout, true, self_read, NULL);
	struct nupp_smp_frame c = lua_frame(pcaller, nth_op(pcaller, BC_CALL, 1), FRAME_LUA);

	ck_assert_int_eq(nupp_sym_frame(ls, &c, NULL, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:8");
	c.pos = nth_op(pcaller, BC_TGETS, 2);
	ck_assert_int_eq(nupp_sym_frame(ls, &c, NULL, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:11");
	c.pos = -1;
	ck_assert_int_eq(nupp_sym_frame(ls, &c, NULL, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:6");
	nupp_sym_free(ls);
}
END_TEST

START_TEST(builtins_c_functions_and_separators)
{
	char b[256];
	struct nupp_smp_frame f = { 0 };

	f.kind = NUPP_SMP_FF;
	f.ptr = 20;
	ck_assert_int_eq(nupp_sym_frame(sym, &f, NULL, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "pcall");
	f.ptr = 93;
	ck_assert_int_eq(nupp_sym_frame(sym, &f, NULL, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "table.sort");
	f.kind = NUPP_SMP_C;
	f.ptr = (__u64)(uintptr_t)test_cfunc_marker;
	ck_assert_int_eq(nupp_sym_frame(sym, &f, NULL, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "test_cfunc_marker");
	f.ptr = 0x10;
	ck_assert_int_eq(nupp_sym_frame(sym, &f, NULL, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "@0x10");
	f.kind = NUPP_SMP_CORO;
	ck_assert_int_eq(nupp_sym_frame(sym, &f, NULL, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "[coroutine]");
}
END_TEST

/* The frame table entry of name: exactly one, in file, on lines first..last. */
static void expect_frame(const struct nupp_frame_table *t, const char *name, const char *file, int first, int last)
{
	const struct nupp_frame_info *fi = nupp_frame_table_find(t, name, strlen(name));

	ck_assert_msg(fi != NULL, "no frame table entry for %s", name);
	ck_assert_str_eq(fi->file, file);
	ck_assert_int_eq(fi->first_line, first);
	ck_assert_int_eq(fi->last_line, last);
	ck_assert_ptr_null(nupp_frame_table_next(t, fi));
}

START_TEST(named_lua_frames_record_their_functions_lines)
{
	struct nupp_frame_table t = { 0 };
	struct nupp_sym *ls = nupp_sym_new(getpid(), &luajit_bpf_layout, true, self_read, NULL);
	struct nupp_smp_frame f = { 0 }, c = lua_frame(pcaller, nth_op(pcaller, BC_CALL, 1), FRAME_LUA);
	char b[256];

	nupp_sym_set_frames(sym, &t);
	name_of(pfoo, nth_op(pcaller, BC_CALL, 0), FRAME_LUA, b, sizeof(b));
	name_of(pm, nth_op(pcaller, BC_CALL, 2), FRAME_LUA, b, sizeof(b));
	name_of(pm, nth_op(pcaller, BC_CALL, 3), FRAME_LUA, b, sizeof(b)); /* the same entry again */
	f = lua_frame(pcaller, -1, FRAME_LUA);
	ck_assert_int_eq(nupp_sym_frame(sym, &f, NULL, 0, b, sizeof(b)), 0);
	/* builtins and C functions have no lines */
	f.kind = NUPP_SMP_FF;
	f.ptr = 20;
	ck_assert_int_eq(nupp_sym_frame(sym, &f, NULL, 0, b, sizeof(b)), 0);
	f.kind = NUPP_SMP_C;
	f.ptr = (__u64)(uintptr_t)test_cfunc_marker;
	ck_assert_int_eq(nupp_sym_frame(sym, &f, NULL, 0, b, sizeof(b)), 0);
	ck_assert_int_eq(nupp_sym_set_frames(sym, NULL), 0);
	/* the chunk's lines: foo on 1, t.m on 3, caller from 6 to its "end" on 13 */
	ck_assert_uint_eq(t.n, 3);
	expect_frame(&t, "symtest:foo", "symtest", 1, 1);
	expect_frame(&t, "symtest:m", "symtest", 3, 3);
	expect_frame(&t, "symtest:6", "symtest", 6, 13);
	/* in lines mode, a frame named by its current line: the function holding it */
	nupp_sym_set_frames(ls, &t);
	ck_assert_int_eq(nupp_sym_frame(ls, &c, NULL, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:8");
	nupp_sym_set_frames(ls, NULL);
	expect_frame(&t, "symtest:8", "symtest", 6, 13);
	/* not recording: nothing added */
	name_of(pgfoo, nth_op(pcaller, BC_CALL, 1), FRAME_LUA, b, sizeof(b));
	ck_assert_uint_eq(t.n, 4);
	nupp_frame_table_free(&t);
	/* Every table given gets its frames, even one at the same address as the last
	 * (a drain's table on the stack): named twice, recorded once; under a second name
	 * (another call site), recorded again. */
	for (int round = 0; round < 2; round++) {
		memset(&t, 0, sizeof(t));
		nupp_sym_set_frames(sym, &t);
		name_of(pm, nth_op(pcaller, BC_CALL, 2), FRAME_LUA, b, sizeof(b));
		name_of(pm, nth_op(pcaller, BC_CALL, 2), FRAME_LUA, b, sizeof(b));
		name_of(pfoo, nth_op(pcaller, BC_CALL, 0), FRAME_LUA, b, sizeof(b));
		ck_assert_int_eq(nupp_sym_set_frames(sym, NULL), 0);
		ck_assert_uint_eq(t.n, 2);
		expect_frame(&t, "symtest:m", "symtest", 3, 3);
		expect_frame(&t, "symtest:foo", "symtest", 1, 1);
		nupp_frame_table_free(&t);
	}
	memset(&t, 0, sizeof(t));
	nupp_sym_set_frames(sym, &t);
	ck_assert_str_eq(name_of(pfoo, nth_op(pcaller, BC_CALL, 0), FRAME_LUA, b, sizeof(b)), "symtest:foo");
	ck_assert_str_eq(name_of(pfoo, nth_op(pcaller, BC_CALL, 0), FRAME_C, b, sizeof(b)), "symtest:1");
	ck_assert_str_eq(name_of(pfoo, nth_op(pcaller, BC_CALL, 0), FRAME_LUA, b, sizeof(b)), "symtest:foo");
	ck_assert_int_eq(nupp_sym_set_frames(sym, NULL), 0);
	ck_assert_uint_eq(t.n, 2);
	expect_frame(&t, "symtest:foo", "symtest", 1, 1);
	expect_frame(&t, "symtest:1", "symtest", 1, 1);
	nupp_frame_table_free(&t);
	nupp_sym_free(ls);
}
END_TEST

START_TEST(stacks_join_outermost_first)
{
	struct nupp_smp_frame fr[2];
	char *s = NULL;

	fr[0] = lua_frame(pgfoo, 0, FRAME_LUA);
	fr[1] = lua_frame(pcaller, nth_op(pcaller, BC_CALL, 1), FRAME_CP);
	ck_assert_int_eq(nupp_sym_stack(sym, fr, 2, 0, &s), 0);
	ck_assert_str_eq(s, "symtest:6;symtest:gfoo");
	free(s);
}
END_TEST

START_TEST(a_reused_address_is_refused)
{
	char b[256];
	struct nupp_smp_frame f = lua_frame(pfoo, 0, FRAME_LUA);
	struct nupp_sym *fresh = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);

	f.firstline = 99; /* the sample saw another proto at this address */
	ck_assert_int_eq(nupp_sym_frame(fresh, &f, NULL, 0, b, sizeof(b)), -ESTALE);
	f.firstline = pfoo->firstline;
	f.sizebc = pfoo->sizebc + 1;
	ck_assert_int_eq(nupp_sym_frame(fresh, &f, NULL, 0, b, sizeof(b)), -ESTALE);
	nupp_sym_free(fresh);
}
END_TEST

/* Sends pt's birth at generation gen with chunk name name and its real fingerprint. */
static void born(struct nupp_sym *s, GCproto *pt, __u64 gen, const char *name)
{
	ck_assert_int_eq(nupp_sym_born(s, (__u64)(uintptr_t)pt, gen, (__u64)(uintptr_t)gcref(pt->chunkname),
				       pt->firstline, pt->sizebc, name, (__u32)strlen(name), (__u32)strlen(name)),
			 0);
}

/* Sends pt's free ending generation gen with a copy of its allocation as it is now. */
static void freed(struct nupp_sym *s, GCproto *pt, __u64 gen)
{
	ck_assert_int_eq(nupp_sym_freed(s, (__u64)(uintptr_t)pt, gen, (__u64)(uintptr_t)gcref(pt->chunkname),
					pt->firstline, pt->sizebc, pt, pt->sizept, pt->sizept),
			 0);
}

/* Sends the free ending generation gen of a prototype no stack of the caller names (pm,
 * the chunk's module function). */
static void free_other(struct nupp_sym *s, __u64 gen)
{
	freed(s, pm, gen);
}

/* Names callee called by caller's n-th CALL, sampled at generation gen: 0 or -errno. */
static int name_at(struct nupp_sym *s, GCproto *callee, int n, __u64 gen, char *buf, size_t size)
{
	struct nupp_smp_frame f = lua_frame(callee, 0, FRAME_LUA);
	struct nupp_smp_frame c = lua_frame(pcaller, nth_op(pcaller, BC_CALL, n), FRAME_LUA);

	return nupp_sym_frame(s, &f, &c, gen, buf, size);
}

/* Asserts that callee called by caller's n-th CALL, sampled at generation gen, is named
 * want. */
static void named_at(struct nupp_sym *s, GCproto *callee, int n, __u64 gen, const char *want)
{
	char b[256];

	ck_assert_int_eq(name_at(s, callee, n, gen, b, sizeof(b)), 0);
	ck_assert_str_eq(b, want);
}

/* The protocol's two sides (nupp/proto_gen.h) agree: a free, made as the sampler makes
 * it, bumps the block, the count of frees and the generation in that order and carries
 * the new generation; the ledger then names a sample of each generation by the
 * incarnation that generation saw. */
START_TEST(the_free_protocol_of_the_sampler_drives_the_ledger)
{
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);
	__u32 block = 7;
	__u64 pfrees = 2, pgen = 4, gen;

	ck_assert_uint_eq(nupp_pgen_end(3, 5), 5);
	ck_assert_uint_eq(nupp_pgen_end(5, 5), 6); /* never empty: a sample of 5 saw it */
	ck_assert_uint_eq(nupp_pgen_end(6, 5), 7);
	born(s, pfoo, pgen, "=chunkA");
	gen = nupp_pgen_free(&block, &pfrees, &pgen);
	ck_assert_uint_eq(gen, 5);
	ck_assert_uint_eq(block, 8);
	ck_assert_uint_eq(pfrees, 3);
	ck_assert_uint_eq(pgen, 5);
	freed(s, pfoo, gen);
	born(s, pfoo, pgen, "@/src/app/chunkB.lua");
	named_at(s, pfoo, 0, 4, "chunkA:foo");
	named_at(s, pfoo, 0, 5, "chunkB.lua:foo");
	gen = nupp_pgen_free(&block, &pfrees, &pgen);
	ck_assert_uint_eq(gen, 6);
	freed(s, pfoo, gen);
	named_at(s, pfoo, 0, 5, "chunkB.lua:foo");
	named_at(s, pfoo, 0, 4, "chunkA:foo");
	nupp_sym_free(s);
}
END_TEST

START_TEST(each_incarnation_at_an_address_keeps_its_own_name)
{
	char b[256];
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);

	/* Two prototypes with the same address and fingerprint, different chunk names: the
	 * first lived in generation 0, the second from 1 on. The memory says "symtest". */
	born(s, pfoo, 0, "=chunkA");
	freed(s, pfoo, 1);
	born(s, pfoo, 1, "@/src/app/chunkB.lua");
	ck_assert_int_eq(name_at(s, pfoo, 0, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "chunkA:foo");
	ck_assert_int_eq(name_at(s, pfoo, 0, 1, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "chunkB.lua:foo");
	ck_assert_int_eq(name_at(s, pfoo, 0, 7, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "chunkB.lua:foo");
	/* The second dies at 9: still named for its samples (from its free's copy). */
	freed(s, pfoo, 9);
	ck_assert_int_eq(name_at(s, pfoo, 0, 8, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "chunkB.lua:foo");
	ck_assert_int_eq(name_at(s, pfoo, 0, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "chunkA:foo");
	/* A drain that began at generation 1 drops chunkA (no later sample saw it); chunkB
	 * still names its samples, and generation 0 is refused, not read from memory. */
	nupp_sym_purge(s, 1);
	ck_assert_int_eq(name_at(s, pfoo, 0, 8, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "chunkB.lua:foo");
	ck_assert_int_eq(name_at(s, pfoo, 0, 0, b, sizeof(b)), -ESTALE);
	nupp_sym_purge(s, 9);
	ck_assert_int_eq(name_at(s, pfoo, 0, 9, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:foo");
	nupp_sym_free(s);
}
END_TEST

START_TEST(a_freed_prototype_never_seen_alive_is_not_named)
{
	char b[256];
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);

	/* Born before we looked, freed at 3 before any drain read it: its chunk name is
	 * unknown (maybe freed already), so its samples are lost, never guessed. */
	freed(s, pgfoo, 3);
	ck_assert_int_eq(name_at(s, pgfoo, 1, 2, b, sizeof(b)), -ESTALE);
	/* Samples from 3 on saw a new incarnation: read from memory. */
	ck_assert_int_eq(name_at(s, pgfoo, 1, 3, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:gfoo");
	nupp_sym_free(s);
}
END_TEST

START_TEST(a_prototype_read_alive_is_named_after_its_free)
{
	char b[256];
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);

	/* Born before we looked, read in one drain, freed at 5 in a later one. */
	nupp_sym_begin(s);
	ck_assert_int_eq(name_at(s, pm, 2, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:m");
	nupp_sym_begin(s);
	freed(s, pm, 5);
	ck_assert(!nupp_sym_suspect(s));
	ck_assert_int_eq(name_at(s, pm, 2, 4, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:m");
	nupp_sym_free(s);
}
END_TEST

START_TEST(a_free_after_a_read_in_the_same_drain_names_again)
{
	char b[256];
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);

	/* Read from memory, then its free arrives in the same drain: the read may have come
	 * after the free, so the drain names its stacks again. */
	nupp_sym_begin(s);
	ck_assert_int_eq(name_at(s, pm, 2, 0, b, sizeof(b)), 0);
	ck_assert(!nupp_sym_suspect(s));
	freed(s, pm, 1);
	ck_assert(nupp_sym_suspect(s));
	nupp_sym_begin(s);
	ck_assert(!nupp_sym_suspect(s));
	/* Its chunk name was read in that drain: not proven, so not used. */
	ck_assert_int_eq(name_at(s, pm, 2, 0, b, sizeof(b)), -ESTALE);
	/* A failed name in a drain also waits for a free of its address, which may give
	 * it; a free of another address does not. */
	freed(s, pgfoo, 2);
	ck_assert(!nupp_sym_suspect(s));
	freed(s, pm, 3);
	ck_assert(nupp_sym_suspect(s));
	nupp_sym_free(s);
}
END_TEST

START_TEST(a_birth_read_after_a_read_in_the_same_drain_names_again)
{
	char b[256];
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);

	/* A sample named from memory before the event of its prototype's birth was read (it
	 * was taken between the drain's read of the events and its flip): the birth ends the
	 * record that read made, and the free that follows ends the birth's record, not
	 * that one. The read may postdate that free: the drain names its stacks again. */
	nupp_sym_begin(s);
	ck_assert_int_eq(name_at(s, pm, 2, 0, b, sizeof(b)), 0);
	ck_assert(!nupp_sym_suspect(s));
	born(s, pm, 0, "=symtest");
	ck_assert(nupp_sym_suspect(s));
	freed(s, pm, 1);
	nupp_sym_begin(s);
	ck_assert(!nupp_sym_suspect(s));
	/* Named again: by the birth's name and the free's copy. */
	named_at(s, pm, 2, 0, "symtest:m");
	nupp_sym_free(s);
	/* Read in an earlier drain than the birth: proven by the events read after it. */
	s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);
	nupp_sym_begin(s);
	ck_assert_int_eq(name_at(s, pm, 2, 0, b, sizeof(b)), 0);
	nupp_sym_begin(s);
	born(s, pm, 0, "=symtest");
	ck_assert(!nupp_sym_suspect(s));
	nupp_sym_free(s);
}
END_TEST

START_TEST(a_freed_callers_string_constants_are_not_trusted)
{
	char b[256];
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);

	/* The caller died at 1. gfoo was named by a global-name constant, a string swept
	 * before the prototype: refused. foo was named by a local variable, whose name is
	 * in the caller's own allocation: named. */
	born(s, pcaller, 0, "=caller");
	freed(s, pcaller, 1);
	ck_assert_int_eq(name_at(s, pgfoo, 1, 0, b, sizeof(b)), -ESTALE);
	ck_assert_int_eq(name_at(s, pfoo, 0, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:foo");
	nupp_sym_free(s);
}
END_TEST

/* The index of the string constant str of pt (proto_kgc(pt, ~idx)), or -1. */
static int kstr_idx(GCproto *pt, const char *str)
{
	MSize i;

	for (i = 0; i < pt->sizekgc; i++) {
		GCobj *o = gcref(mref(pt->k, GCRef)[-1 - (ptrdiff_t)i]);

		if (o->gch.gct == ~LJ_TSTR && strcmp(strdata(&o->str), str) == 0)
			return (int)i;
	}
	return -1;
}

START_TEST(a_closing_vms_string_constants_name_after_its_free)
{
	char b[256], ev[64];
	struct nupp_smp_kstr e = { 0 };
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);
	int idx = kstr_idx(pcaller, "gfoo");

	/* The caller freed by lua_close, never read alive: its free was followed by its
	 * string constants (luajit:proto_free of a closing VM), which name gfoo. */
	ck_assert_int_ge(idx, 0);
	born(s, pcaller, 0, "=symtest");
	freed(s, pcaller, 1);
	e.idx = (__u16)idx;
	e.len = 4;
	e.whole = 1;
	memcpy(ev, &e, sizeof(e));
	memcpy(ev + sizeof(e), "gfoo", 4);
	ck_assert_int_eq(nupp_sym_kstrs(s, (__u64)(uintptr_t)pcaller, 1, ev, sizeof(e) + 4), 0);
	ck_assert_int_eq(name_at(s, pgfoo, 1, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:gfoo");
	nupp_sym_free(s);
	/* A constant that was cut names nothing; constants of another free are not taken. */
	s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);
	born(s, pcaller, 0, "=symtest");
	freed(s, pcaller, 1);
	ck_assert_int_eq(nupp_sym_kstrs(s, (__u64)(uintptr_t)pcaller, 2, ev, sizeof(e) + 4), -ENOENT);
	e.whole = 0;
	memcpy(ev, &e, sizeof(e));
	ck_assert_int_eq(nupp_sym_kstrs(s, (__u64)(uintptr_t)pcaller, 1, ev, sizeof(e) + 4), 0);
	ck_assert_int_eq(name_at(s, pgfoo, 1, 0, b, sizeof(b)), -ESTALE);
	nupp_sym_free(s);
}
END_TEST

/* -- Memoised names: a fake target whose caller changes --------------------------- */

/* What the fake target holds at pcaller's allocation (NULL: pcaller itself). */
static unsigned char *shadow;

/* Reads this process's memory, pcaller's allocation from the shadow copy. */
static int shadow_read(void *ctx, __u64 addr, void *buf, size_t len)
{
	__u64 lo = (__u64)(uintptr_t)pcaller, hi = lo + pcaller->sizept;

	if (shadow && addr >= lo && addr + len <= hi)
		memcpy(buf, shadow + (addr - lo), len);
	else
		memcpy(buf, (const void *)(uintptr_t)addr, len);
	return 0;
}

/* A copy of pcaller in the shadow whose global load of gfoo loads the constant "m"
 * instead: another prototype at the same address with the same fingerprint, which
 * names the callee of its second CALL "m". */
static void shadow_rename(void)
{
	int from = kstr_idx(pcaller, "gfoo"), to = kstr_idx(pcaller, "m");
	BCIns *bc;
	MSize i;

	ck_assert_int_ge(from, 0);
	ck_assert_int_ge(to, 0);
	shadow = malloc(pcaller->sizept);
	ck_assert_ptr_nonnull(shadow);
	memcpy(shadow, pcaller, pcaller->sizept);
	bc = (BCIns *)(shadow + sizeof(GCproto));
	for (i = 0; i < pcaller->sizebc; i++)
		if (bc_op(bc[i]) == BC_GGET && (int)bc_d(bc[i]) == from)
			setbc_d(&bc[i], to);
}

START_TEST(a_memoised_name_belongs_to_its_caller_incarnation)
{
	char b[256];
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, shadow_read, NULL);

	/* gfoo named by the caller as it is, twice (the second from the memo). */
	nupp_sym_begin(s);
	named_at(s, pgfoo, 1, 0, "symtest:gfoo");
	named_at(s, pgfoo, 1, 0, "symtest:gfoo");
	/* In a later drain the caller dies at 1 and another is born at its address, with
	 * the same fingerprint but another constant at the call: the same callee record
	 * (still alive) is named by each caller incarnation as that one names it. */
	nupp_sym_begin(s);
	freed(s, pcaller, 1);
	born(s, pcaller, 1, "=symtest");
	shadow_rename();
	for (int round = 0; round < 2; round++) {
		ck_assert_int_eq(name_at(s, pgfoo, 1, 1, b, sizeof(b)), 0);
		ck_assert_str_eq(b, "symtest:m");
		ck_assert_int_eq(name_at(s, pgfoo, 1, 0, b, sizeof(b)), 0);
		ck_assert_str_eq(b, "symtest:gfoo");
	}
	free(shadow);
	shadow = NULL;
	nupp_sym_free(s);
}
END_TEST

/* The trace decoder reads a trace's prototypes (nupp_sym_proto_mem). One that no event
 * named (no sample met it: the sampler reports only the frees of prototypes met) is read
 * again at the next naming round, never kept across one: another prototype with its
 * fingerprint may have taken its address, with no free reported in between. One a
 * sample met keeps its copy until its free is reported. */
START_TEST(a_trace_prototype_no_sample_met_is_read_again_each_round)
{
	struct nupp_smp_frame f = lua_frame(pcaller, 0, FRAME_LUA);
	const unsigned char *mem = NULL;
	__u32 size = 0;
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, shadow_read, NULL);

	ck_assert_ptr_nonnull(s);
	nupp_sym_begin(s);
	ck_assert_int_eq(nupp_sym_proto_mem(s, &f, 1, &mem, &size), 0);
	ck_assert_uint_eq(size, pcaller->sizept);
	ck_assert_mem_eq(mem, pcaller, pcaller->sizept);
	/* the address now holds another prototype with pcaller's fingerprint */
	shadow_rename();
	ck_assert_int_ne(memcmp(shadow, pcaller, pcaller->sizept), 0);
	nupp_sym_begin(s);
	ck_assert_int_eq(nupp_sym_proto_mem(s, &f, 1, &mem, &size), 0);
	ck_assert_mem_eq(mem, shadow, pcaller->sizept);
	free(shadow);
	shadow = NULL;
	nupp_sym_free(s);

	/* met by a sample (its event): kept, for its free will be reported */
	s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, shadow_read, NULL);
	ck_assert_ptr_nonnull(s);
	nupp_sym_begin(s);
	born(s, pcaller, 1, "symtest");
	ck_assert_int_eq(nupp_sym_proto_mem(s, &f, 1, &mem, &size), 0);
	ck_assert_mem_eq(mem, pcaller, pcaller->sizept);
	shadow_rename();
	nupp_sym_begin(s);
	ck_assert_int_eq(nupp_sym_proto_mem(s, &f, 1, &mem, &size), 0);
	ck_assert_mem_eq(mem, pcaller, pcaller->sizept);
	free(shadow);
	shadow = NULL;
	nupp_sym_free(s);
}
END_TEST

/* gfoo named in one drain (after the process's generation 0 was seen, if proven); in
 * the next, the caller is replaced while its free is lost (the shadow), and the loss is
 * read at generation 5. Returns what a sample of generation 0 gets, after checking that
 * one of generation 6 is named from the target as it is now. */
static int name_after_a_lost_replacement(bool proven, char *b, size_t size)
{
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, shadow_read, NULL);
	int e;

	nupp_sym_begin(s);
	if (proven)
		nupp_sym_gen_seen(s, 0);
	ck_assert_int_eq(name_at(s, pgfoo, 1, 0, b, size), 0);
	ck_assert_str_eq(b, "symtest:gfoo");
	nupp_sym_begin(s);
	shadow_rename();
	ck_assert_uint_eq(nupp_sym_lost(s, 5), 1);
	e = name_at(s, pgfoo, 1, 0, b, size);
	if (!e)
		ck_assert_str_eq(b, "symtest:gfoo");
	ck_assert_int_eq(name_at(s, pgfoo, 1, 6, b, size), 0);
	ck_assert_str_eq(b, "symtest:m");
	free(shadow);
	shadow = NULL;
	nupp_sym_free(s);
	return e;
}

START_TEST(lost_events_keep_only_the_memoised_names_of_proven_copies)
{
	char b[256];

	/* (A free read in the drain of a read drops the names made from it, memoised or
	 * not: string_constants_read_alive_outlive_the_caller.) Lost events: a copy read
	 * before a generation below the lost window was seen keeps its names, memoised;
	 * one not proven so is given up with every name made from it, and a sample of the
	 * window is refused. */
	ck_assert_int_eq(name_after_a_lost_replacement(true, b, sizeof(b)), 0);
	ck_assert_int_eq(name_after_a_lost_replacement(false, b, sizeof(b)), -ESTALE);
}
END_TEST

START_TEST(lines_mode_memoises_each_position)
{
	char b[256];
	struct nupp_sym *ls = nupp_sym_new(getpid(), &luajit_bpf_layout, true, self_read, NULL);
	struct nupp_smp_frame c8 = lua_frame(pcaller, nth_op(pcaller, BC_CALL, 1), FRAME_LUA);
	struct nupp_smp_frame c9 = lua_frame(pcaller, nth_op(pcaller, BC_CALL, 2), FRAME_LUA);

	for (int round = 0; round < 3; round++) {
		nupp_sym_begin(ls);
		ck_assert_int_eq(nupp_sym_frame(ls, &c8, NULL, 0, b, sizeof(b)), 0);
		ck_assert_str_eq(b, "symtest:8");
		ck_assert_int_eq(nupp_sym_frame(ls, &c9, NULL, 0, b, sizeof(b)), 0);
		ck_assert_str_eq(b, "symtest:9");
	}
	/* A caller's buffer shorter than the name gets it cut, and the memo stays whole. */
	ck_assert_int_eq(nupp_sym_frame(ls, &c8, NULL, 0, b, 5), 0);
	ck_assert_str_eq(b, "symt");
	ck_assert_int_eq(nupp_sym_frame(ls, &c8, NULL, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:8");
	nupp_sym_free(ls);
}
END_TEST

/* A function of this test, named by address. */
__attribute__((noinline)) int symtest_named_by_address(int x)
{
	return x * 3 + 1;
}

START_TEST(host_code_is_named_by_its_elf_symbol)
{
	struct nupp_addrmap *a = nupp_addrmap_new(getpid());
	__u64 fn = (__u64)(uintptr_t)symtest_named_by_address, start = 0;
	unsigned char code[8];
	char b[256];

	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(nupp_addrmap_refresh(a), 0);
	ck_assert_int_eq(nupp_addrmap_sym(a, fn + 2, &start, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest_named_by_address");
	ck_assert_uint_eq(start, fn);
	ck_assert_int_eq(nupp_addrmap_name(a, fn + 1, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest_named_by_address");
	/* Code bytes come from the mapped file, as they are in memory. */
	ck_assert_int_eq(nupp_addrmap_read(a, fn, code, sizeof(code)), 0);
	ck_assert_int_eq(memcmp(code, (void *)(uintptr_t)fn, sizeof(code)), 0);
	/* Not mapped at all: no name. */
	ck_assert_int_eq(nupp_addrmap_name(a, 0x1000, b, sizeof(b)), -ENOENT);
	nupp_addrmap_free(a);
}
END_TEST

START_TEST(string_constants_read_alive_outlive_the_caller)
{
	char b[256];
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);

	/* gfoo named by the caller's global-name constant in one drain; the caller freed in
	 * a later one (as lua_close frees every prototype, before the strings): the name
	 * read while it was alive still names its samples. */
	born(s, pcaller, 0, "=symtest");
	nupp_sym_begin(s);
	ck_assert_int_eq(name_at(s, pgfoo, 1, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:gfoo");
	nupp_sym_begin(s);
	freed(s, pcaller, 1);
	ck_assert_int_eq(name_at(s, pgfoo, 1, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:gfoo");
	nupp_sym_free(s);
	/* Read in the drain that also reads its free: maybe after the string was freed. */
	s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);
	born(s, pcaller, 0, "=symtest");
	nupp_sym_begin(s);
	ck_assert_int_eq(name_at(s, pgfoo, 1, 0, b, sizeof(b)), 0);
	freed(s, pcaller, 1);
	ck_assert(nupp_sym_suspect(s));
	nupp_sym_begin(s);
	ck_assert_int_eq(name_at(s, pgfoo, 1, 0, b, sizeof(b)), -ESTALE);
	nupp_sym_free(s);
}
END_TEST

/* A target that can exit: reads of it fail as process_vm_readv's of a gone process do,
 * and every read is counted. */
static bool target_gone;
static int ngone_reads, ngone_readv, ngone_segs;

static int gone_read(void *ctx, __u64 addr, void *buf, size_t len)
{
	ngone_reads++;
	if (target_gone)
		return -ESRCH;
	memcpy(buf, (const void *)(uintptr_t)addr, len);
	return 0;
}

static int gone_readv(void *ctx, const struct nupp_read_seg *seg, int n)
{
	ngone_readv++;
	ngone_segs += n;
	if (target_gone)
		return -ESRCH;
	for (int i = 0; i < n; i++)
		memcpy(seg[i].buf, (const void *)(uintptr_t)seg[i].addr, seg[i].len);
	return n;
}

/* A symbolizer of the target that can exit (alive for now), its counts reset. */
static struct nupp_sym *gone_sym(void)
{
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, gone_read, NULL);

	ck_assert_ptr_nonnull(s);
	nupp_sym_set_readv(s, gone_readv);
	target_gone = false;
	ngone_reads = ngone_readv = ngone_segs = 0;
	return s;
}

START_TEST(string_constants_are_read_with_their_prototype_and_name_after_exit)
{
	char b[256];
	struct nupp_sym *s = gone_sym();
	struct nupp_smp_frame f;
	int reads;

	born(s, pcaller, 0, "=symtest");
	born(s, pgfoo, 0, "=symtest");
	born(s, pm, 0, "=symtest");
	nupp_sym_begin(s);
	/* The callees read (named without a caller), then the caller, by its first call site
	 * (an upvalue's name: no constant needed). Its string constants come with it, all
	 * in one vectored read. */
	f = lua_frame(pgfoo, 0, FRAME_LUA);
	ck_assert_int_eq(nupp_sym_frame(s, &f, NULL, 0, b, sizeof(b)), 0);
	f = lua_frame(pm, 0, FRAME_LUA);
	ck_assert_int_eq(nupp_sym_frame(s, &f, NULL, 0, b, sizeof(b)), 0);
	ck_assert_int_eq(ngone_readv, 0);
	named_at(s, pfoo, 0, 0, "symtest:foo");
	ck_assert_int_eq(ngone_readv, 1);
	ck_assert_int_eq(ngone_segs, (int)pcaller->sizekgc);
	/* The process exits: its other call sites, first named now (its last samples), are
	 * named from what was read, and nothing more is read. */
	target_gone = true;
	reads = ngone_reads + ngone_readv;
	named_at(s, pgfoo, 1, 0, "symtest:gfoo");
	named_at(s, pm, 2, 0, "symtest:m");
	named_at(s, pm, 3, 0, "symtest:m");
	ck_assert_int_eq(ngone_reads + ngone_readv, reads);
	/* Without the vectored reader, the same one range at a time. */
	nupp_sym_free(s);
	s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, gone_read, NULL);
	target_gone = false;
	ngone_readv = 0;
	born(s, pcaller, 0, "=symtest");
	born(s, pgfoo, 0, "=symtest");
	nupp_sym_begin(s);
	f = lua_frame(pgfoo, 0, FRAME_LUA);
	ck_assert_int_eq(nupp_sym_frame(s, &f, NULL, 0, b, sizeof(b)), 0);
	ck_assert_int_eq(name_at(s, pfoo, 0, 0, b, sizeof(b)), 0);
	target_gone = true;
	named_at(s, pgfoo, 1, 0, "symtest:gfoo");
	ck_assert_int_eq(ngone_readv, 0);
	nupp_sym_free(s);
}
END_TEST

/* The first sample that meets a prototype sends its allocation and string constants
 * after its name (PROTO_COPY, PROTO_KSTR): a prototype met just before the process exits
 * is named from them, nothing read, its call sites by their constants; a copy of
 * another generation or fingerprint is not taken. */
START_TEST(a_prototype_copied_at_its_first_sample_names_after_exit)
{
	char ev[64];
	struct nupp_smp_kstr e = { 0 };
	struct nupp_sym *s = gone_sym();
	__u64 pt = (__u64)(uintptr_t)pcaller, chunk = (__u64)(uintptr_t)gcref(pcaller->chunkname);
	int idx = kstr_idx(pcaller, "gfoo");

	ck_assert_int_ge(idx, 0);
	born(s, pcaller, 5, "=symtest");
	born(s, pgfoo, 5, "=symtest");
	/* not this record's: another generation, another fingerprint */
	ck_assert_int_eq(nupp_sym_copied(s, pt, 6, chunk, pcaller->firstline, pcaller->sizebc, pcaller,
					 pcaller->sizept, pcaller->sizept),
			 -ENOENT);
	ck_assert_int_eq(nupp_sym_copied(s, pt, 5, chunk, pcaller->firstline + 1, pcaller->sizebc, pcaller,
					 pcaller->sizept, pcaller->sizept),
			 -ENOENT);
	ck_assert_int_eq(nupp_sym_copied(s, pt, 5, chunk, pcaller->firstline, pcaller->sizebc, pcaller,
					 pcaller->sizept, pcaller->sizept),
			 0);
	ck_assert_int_eq(nupp_sym_copied(s, (__u64)(uintptr_t)pgfoo, 5, chunk, pgfoo->firstline, pgfoo->sizebc, pgfoo,
					 pgfoo->sizept, pgfoo->sizept),
			 0);
	e.idx = (__u16)idx;
	e.len = 4;
	e.whole = 1;
	memcpy(ev, &e, sizeof(e));
	memcpy(ev + sizeof(e), "gfoo", 4);
	ck_assert_int_eq(nupp_sym_kstrs(s, pt, 6, ev, sizeof(e) + 4), -ENOENT);
	ck_assert_int_eq(nupp_sym_kstrs(s, pt, 5, ev, sizeof(e) + 4), 0);
	/* the process exits before anything is read */
	target_gone = true;
	nupp_sym_begin(s);
	named_at(s, pgfoo, 1, 5, "symtest:gfoo");
	ck_assert_int_eq(ngone_reads + ngone_readv, 0);
	nupp_sym_free(s);
	target_gone = false;
}
END_TEST

START_TEST(prototypes_born_are_read_at_once_and_name_after_exit)
{
	char b[256];
	struct nupp_sym *s = gone_sym();
	struct nupp_smp_frame f;

	/* Four births read by one prefetch: their sizes, their allocations, then their
	 * string constants (the caller's three: the others have none), three vectored
	 * reads in all and no other read. */
	born(s, pcaller, 0, "=symtest");
	born(s, pfoo, 0, "=symtest");
	born(s, pgfoo, 0, "=symtest");
	born(s, pm, 0, "=symtest");
	ck_assert_int_eq(nupp_sym_prefetch(s, 100), 4);
	ck_assert_int_eq(ngone_readv, 3);
	ck_assert_int_eq(ngone_segs, 4 + 4 + (int)pcaller->sizekgc);
	ck_assert_int_eq(ngone_reads, 0);
	ck_assert_int_eq(nupp_sym_prefetch(s, 100), 0); /* each birth once */
	/* The process exits before any sample is named: they all are, reading nothing. */
	target_gone = true;
	nupp_sym_begin(s);
	named_at(s, pfoo, 0, 0, "symtest:foo");
	named_at(s, pgfoo, 1, 0, "symtest:gfoo");
	named_at(s, pm, 3, 0, "symtest:m");
	ck_assert_int_eq(ngone_readv, 3);
	ck_assert_int_eq(ngone_reads, 0);
	nupp_sym_free(s);

	/* At most max are read; the rest, and a prototype freed before the prefetch, and
	 * one whose memory is no longer the prototype born there (its fingerprint), are
	 * not: they are read when a sample needs them, as before. */
	s = gone_sym();
	born(s, pfoo, 0, "=symtest");
	freed(s, pfoo, 1);
	born(s, pcaller, 1, "=symtest");
	ck_assert_int_eq(nupp_sym_prefetch(s, 10), 1);
	born(s, pgfoo, 2, "=symtest");
	born(s, pm, 2, "=symtest");
	ck_assert_int_eq(nupp_sym_prefetch(s, 1), 1);
	target_gone = true;
	nupp_sym_begin(s);
	f = lua_frame(pgfoo, 0, FRAME_LUA);
	ck_assert_int_eq(nupp_sym_frame(s, &f, NULL, 2, b, sizeof(b)), 0); /* read */
	f = lua_frame(pm, 0, FRAME_LUA);
	ck_assert_int_eq(nupp_sym_frame(s, &f, NULL, 2, b, sizeof(b)), -ESRCH); /* over max */
	nupp_sym_free(s);
	s = gone_sym();
	ck_assert_int_eq(nupp_sym_born(s, (__u64)(uintptr_t)pfoo, 0, (__u64)(uintptr_t)gcref(pfoo->chunkname),
				       pfoo->firstline + 1, pfoo->sizebc, "=symtest", 8, 8),
			 0);
	ck_assert_int_eq(nupp_sym_prefetch(s, 10), 0);
	nupp_sym_free(s);
}
END_TEST

START_TEST(vectored_reads_stop_at_the_first_range_not_mapped)
{
	static char src[1500][8], dst[1500][8];
	static struct nupp_read_seg seg[1500];
	char *hole = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	__u64 calls;
	int i;

	ck_assert_ptr_ne(hole, MAP_FAILED);
	ck_assert_int_eq(munmap(hole, 4096), 0);
	for (i = 0; i < 1500; i++) {
		snprintf(src[i], sizeof(src[i]), "r%d", i);
		seg[i] = (struct nupp_read_seg){ (__u64)(uintptr_t)src[i], dst[i], sizeof(dst[i]) };
	}
	/* More ranges than one process_vm_readv takes (IOV_MAX): two calls, all read. */
	calls = nupp_vm_read_calls();
	ck_assert_int_eq(nupp_vm_readv(getpid(), seg, 1500), 1500);
	ck_assert_uint_eq(nupp_vm_read_calls() - calls, 2);
	ck_assert_str_eq(dst[0], "r0");
	ck_assert_str_eq(dst[1499], "r1499");
	/* The third range not mapped: the two before it are read, not the one after. */
	memset(dst, 0, sizeof(dst));
	seg[2].addr = (__u64)(uintptr_t)hole;
	ck_assert_int_eq(nupp_vm_readv(getpid(), seg, 4), 2);
	ck_assert_str_eq(dst[1], "r1");
	/* Not even the first: the error. */
	ck_assert_int_eq(nupp_vm_readv(getpid(), seg + 2, 2), -EFAULT);
}
END_TEST

static int stack_at(struct nupp_sym *s, GCproto *pt, __u64 gen, char **out);

START_TEST(strings_are_not_read_while_the_gc_sweeps)
{
	char b[256];
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);
	__u64 g = (__u64)(uintptr_t)G(L);
	uint8_t saved = G(L)->gc.state, mcaller = pcaller->marked, mfoo = pfoo->marked;
	uint8_t dead = (uint8_t)otherwhite(G(L)) & LJ_GC_WHITES;
	char *out = NULL;

	/* While the GC sweeps strings (or prototypes), a string of a prototype that is dead
	 * (marked with the other white) may be recycled: not read, the stack waits. */
	nupp_sym_set_vms(s, &g, 1);
	G(L)->gc.state = GCSsweepstring;
	pcaller->marked = (uint8_t)((mcaller & ~LJ_GC_WHITES) | dead);
	ck_assert_int_eq(name_at(s, pgfoo, 1, 0, b, sizeof(b)), -EAGAIN);
	pfoo->marked = (uint8_t)((mfoo & ~LJ_GC_WHITES) | dead);
	ck_assert_int_eq(stack_at(s, pfoo, 0, &out), -EAGAIN);
	G(L)->gc.state = GCSsweep;
	ck_assert_int_eq(name_at(s, pgfoo, 1, 0, b, sizeof(b)), -EAGAIN);
	/* Not dead: its strings are reachable, so read even during the sweep (a VM that
	 * stops allocating may stay in a sweep phase for good). */
	pcaller->marked = mcaller;
	pfoo->marked = mfoo;
	ck_assert_int_eq(name_at(s, pgfoo, 1, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:gfoo");
	/* Read once, kept: a later sweep with it dead does not stop it. */
	pcaller->marked = (uint8_t)((mcaller & ~LJ_GC_WHITES) | dead);
	ck_assert_int_eq(name_at(s, pgfoo, 1, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "symtest:gfoo");
	pcaller->marked = mcaller;
	G(L)->gc.state = saved;
	nupp_sym_free(s);
}
END_TEST

START_TEST(lost_events_never_name_the_wrong_incarnation)
{
	char b[256];
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);
	struct nupp_smp_frame f = lua_frame(pfoo, 0, FRAME_LUA);

	/* Born at 0 as chunkA, then a birth at 4 with no free between (the free was lost):
	 * chunkA's samples (before 4) have no copy of it, the new one's are named. */
	born(s, pfoo, 0, "=chunkA");
	born(s, pfoo, 4, "=chunkB");
	ck_assert_int_eq(name_at(s, pfoo, 0, 2, b, sizeof(b)), -ESTALE);
	ck_assert_int_eq(name_at(s, pfoo, 0, 4, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "chunkB:foo");
	/* A free whose fingerprint is not the one born there: neither is named. */
	f.firstline = pfoo->firstline + 1;
	ck_assert_int_eq(nupp_sym_freed(s, f.ptr, 6, f.chunkname, f.firstline, f.sizebc, pfoo, pfoo->sizept,
					pfoo->sizept),
			 0);
	ck_assert_int_eq(name_at(s, pfoo, 0, 5, b, sizeof(b)), -ESTALE);
	nupp_sym_free(s);
}
END_TEST

/* Names a one-frame stack of pt (no caller) sampled at generation gen: 0 or -errno. */
static int stack_at(struct nupp_sym *s, GCproto *pt, __u64 gen, char **out)
{
	struct nupp_smp_frame f = lua_frame(pt, 0, FRAME_LUA);

	return nupp_sym_stack(s, &f, 1, gen, out);
}

START_TEST(a_stack_waits_for_every_free_up_to_its_generation)
{
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);
	char *out = NULL;

	/* chunkA was named in an earlier drain; then (events not read yet) it died at 1 and
	 * chunkB was born at its address with the same fingerprint. A stack of generation 1
	 * must wait for the free of 1, not be named from chunkA's record. */
	born(s, pfoo, 0, "=chunkA");
	ck_assert_int_eq(stack_at(s, pfoo, 0, &out), 0);
	ck_assert_str_eq(out, "chunkA:1");
	free(out);
	nupp_sym_begin(s);
	ck_assert_int_eq(stack_at(s, pfoo, 1, &out), -EAGAIN);
	freed(s, pfoo, 1);
	born(s, pfoo, 1, "=chunkB");
	ck_assert_int_eq(stack_at(s, pfoo, 1, &out), 0);
	ck_assert_str_eq(out, "chunkB:1");
	free(out);
	/* Frees of several threads arrive out of order: 3 before 2. */
	freed(s, pgfoo, 3);
	ck_assert_int_eq(stack_at(s, pfoo, 2, &out), -EAGAIN);
	freed(s, pm, 2);
	ck_assert_int_eq(stack_at(s, pfoo, 3, &out), 0);
	free(out);
	/* Frees lost up to generation 4 (the process's generation when the drain saw it):
	 * stacks up to 4 are refused, records are forgotten (chunkB's too), and later
	 * stacks are named from records made afresh once their frees are read. */
	nupp_sym_reset(s, 4);
	ck_assert_int_eq(stack_at(s, pfoo, 4, &out), -ESTALE);
	ck_assert_int_eq(stack_at(s, pfoo, 3, &out), -ESTALE);
	ck_assert_int_eq(stack_at(s, pfoo, 5, &out), -EAGAIN);
	freed(s, pidx, 4); /* late, of a generation given up: ignored */
	freed(s, pidx, 5);
	ck_assert_int_eq(stack_at(s, pfoo, 5, &out), 0);
	ck_assert_str_eq(out, "symtest:1");
	free(out);
	nupp_sym_free(s);
}
END_TEST

START_TEST(a_lost_free_costs_only_the_stacks_it_can_affect)
{
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);
	struct nupp_sym *r = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);
	char *out = NULL;

	/* Drain 1 names foo (born at 0 as chunkA, its allocation read from memory); frees
	 * of 1 and 2 are read; the sampler then sees the process at generation 2. */
	born(s, pfoo, 0, "=chunkA");
	nupp_sym_begin(s);
	ck_assert_int_eq(stack_at(s, pfoo, 0, &out), 0);
	ck_assert_str_eq(out, "chunkA:1");
	free(out);
	free_other(s, 1);
	free_other(s, 2);
	nupp_sym_gen_seen(s, 2);
	/* Drain 2 reads __index from memory; the free of 4 arrives, not the free of 3. */
	nupp_sym_begin(s);
	ck_assert_int_eq(stack_at(s, pidx, 2, &out), 0);
	ck_assert_str_eq(out, "symtest:4");
	free(out);
	free_other(s, 4);
	/* The loss is seen at generation 5: the first free not read is 3. */
	ck_assert_uint_eq(nupp_sym_lost(s, 5), 3);
	/* A stack before the loss is still named: foo's copy was read before the process
	 * reached generation 3, so no lost free can have preceded it. */
	ck_assert_int_eq(stack_at(s, pfoo, 2, &out), 0);
	ck_assert_str_eq(out, "chunkA:1");
	free(out);
	/* __index was read after generation 2 was seen: maybe after the lost free of 3
	 * (its memory may hold another prototype since), so its stack is refused. So is
	 * a prototype never seen before the loss: what memory holds now proves nothing. */
	ck_assert_int_eq(stack_at(s, pidx, 2, &out), -ESTALE);
	ck_assert_int_eq(stack_at(s, pgfoo, 2, &out), -ESTALE);
	/* The window of the loss, 3..5, is refused whatever is known. */
	ck_assert_int_eq(stack_at(s, pfoo, 3, &out), -ESTALE);
	ck_assert_int_eq(stack_at(s, pfoo, 5, &out), -ESTALE);
	/* After it, stacks are named from records made afresh (chunkA's incarnation
	 * ended at 3: foo is read from memory again), once their frees are read. */
	ck_assert_int_eq(stack_at(s, pfoo, 6, &out), -EAGAIN);
	free_other(s, 6);
	ck_assert_int_eq(stack_at(s, pfoo, 6, &out), 0);
	ck_assert_str_eq(out, "symtest:1");
	free(out);
	/* A loss whose event had no generation (nothing missing up to 6) refuses nothing. */
	ck_assert_uint_eq(nupp_sym_lost(s, 6), 7);
	ck_assert_int_eq(stack_at(s, pfoo, 6, &out), -ESTALE); /* its copy is of this drain */
	nupp_sym_gen_seen(s, 6);
	nupp_sym_begin(s);
	ck_assert_int_eq(stack_at(s, pfoo, 7, &out), -EAGAIN);
	free_other(s, 7);
	ck_assert_int_eq(stack_at(s, pfoo, 7, &out), 0);
	ck_assert_str_eq(out, "symtest:1");
	free(out);
	/* The reset gives up every stack up to the loss, the one before it too. */
	born(r, pfoo, 0, "=chunkA");
	free_other(r, 1);
	free_other(r, 2);
	nupp_sym_reset(r, 5);
	ck_assert_int_eq(stack_at(r, pfoo, 2, &out), -ESTALE);
	nupp_sym_free(r);
	nupp_sym_free(s);
}
END_TEST

START_TEST(builtins_are_named_as_jit_p_names_them)
{
	char b[256];
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);
	struct nupp_sym *ls = nupp_sym_new(getpid(), &luajit_bpf_layout, true, self_read, NULL);
	GCproto *copy = malloc(pfoo->sizept);
	struct nupp_smp_frame f, c = lua_frame(pcaller, nth_op(pcaller, BC_CALL, 0), FRAME_LUA);

	/* A bytecode builtin (lib_read_lfunc: firstline ~0, chunk name "remove"): its
	 * caller's name alone, else [builtin:remove] (lj_debug.c:555-561, 606-609). */
	ck_assert_ptr_nonnull(copy);
	memcpy(copy, pfoo, pfoo->sizept);
	copy->firstline = ~(BCLine)0;
	f = lua_frame(copy, 0, FRAME_LUA);
	born(s, copy, 0, "remove");
	born(ls, copy, 0, "remove");
	ck_assert_int_eq(nupp_sym_frame(s, &f, &c, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "foo");
	ck_assert_int_eq(nupp_sym_frame(s, &f, NULL, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "[builtin:remove]");
	ck_assert_int_eq(nupp_sym_frame(ls, &f, &c, 0, b, sizeof(b)), 0);
	ck_assert_str_eq(b, "[builtin:remove]");
	nupp_sym_free(s);
	nupp_sym_free(ls);
	free(copy);
}
END_TEST

START_TEST(a_cut_copy_names_nothing)
{
	char b[256];
	struct nupp_sym *s = nupp_sym_new(getpid(), &luajit_bpf_layout, false, self_read, NULL);

	/* A prototype larger than the free event's copy: its debug information is cut
	 * off, so it names no frame (rather than a wrong one). */
	born(s, pcaller, 0, "=big");
	ck_assert_int_eq(nupp_sym_freed(s, (__u64)(uintptr_t)pcaller, 1, (__u64)(uintptr_t)gcref(pcaller->chunkname),
					pcaller->firstline, pcaller->sizebc, pcaller, pcaller->sizept - 8, pcaller->sizept),
			 0);
	ck_assert_int_eq(name_at(s, pfoo, 0, 0, b, sizeof(b)), -ESTALE);
	nupp_sym_free(s);
}
END_TEST

START_TEST(module_names_strip_like_jit_p)
{
	char b[64];

	nupp_sym_module("@/a/b/c.lua", b, sizeof(b));
	ck_assert_str_eq(b, "c.lua");
	nupp_sym_module("@c.lua", b, sizeof(b));
	ck_assert_str_eq(b, "c.lua");
	nupp_sym_module("=stdin", b, sizeof(b));
	ck_assert_str_eq(b, "stdin");
	nupp_sym_module("return 1", b, sizeof(b));
	ck_assert_str_eq(b, "[string]");
}
END_TEST

/* Runs the suite. */
int main(void)
{
	Suite *su = suite_create("symbolize");
	TCase *tc = tcase_create("names");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, names_come_from_the_callers_bytecode);
	tcase_add_test(tc, names_fall_back_to_firstline);
	tcase_add_test(tc, lines_mode_names_the_current_line);
	tcase_add_test(tc, builtins_c_functions_and_separators);
	tcase_add_test(tc, named_lua_frames_record_their_functions_lines);
	tcase_add_test(tc, stacks_join_outermost_first);
	tcase_add_test(tc, a_reused_address_is_refused);
	tcase_add_test(tc, module_names_strip_like_jit_p);
	tcase_add_test(tc, the_free_protocol_of_the_sampler_drives_the_ledger);
	tcase_add_test(tc, each_incarnation_at_an_address_keeps_its_own_name);
	tcase_add_test(tc, a_freed_prototype_never_seen_alive_is_not_named);
	tcase_add_test(tc, a_prototype_read_alive_is_named_after_its_free);
	tcase_add_test(tc, a_free_after_a_read_in_the_same_drain_names_again);
	tcase_add_test(tc, a_birth_read_after_a_read_in_the_same_drain_names_again);
	tcase_add_test(tc, a_freed_callers_string_constants_are_not_trusted);
	tcase_add_test(tc, string_constants_read_alive_outlive_the_caller);
	tcase_add_test(tc, string_constants_are_read_with_their_prototype_and_name_after_exit);
	tcase_add_test(tc, vectored_reads_stop_at_the_first_range_not_mapped);
	tcase_add_test(tc, prototypes_born_are_read_at_once_and_name_after_exit);
	tcase_add_test(tc, a_closing_vms_string_constants_name_after_its_free);
	tcase_add_test(tc, host_code_is_named_by_its_elf_symbol);
	tcase_add_test(tc, strings_are_not_read_while_the_gc_sweeps);
	tcase_add_test(tc, lost_events_never_name_the_wrong_incarnation);
	tcase_add_test(tc, a_stack_waits_for_every_free_up_to_its_generation);
	tcase_add_test(tc, a_lost_free_costs_only_the_stacks_it_can_affect);
	tcase_add_test(tc, builtins_are_named_as_jit_p_names_them);
	tcase_add_test(tc, a_cut_copy_names_nothing);
	tcase_add_test(tc, a_memoised_name_belongs_to_its_caller_incarnation);
	tcase_add_test(tc, a_trace_prototype_no_sample_met_is_read_again_each_round);
	tcase_add_test(tc, a_prototype_copied_at_its_first_sample_names_after_exit);
	tcase_add_test(tc, lost_events_keep_only_the_memoised_names_of_proven_copies);
	tcase_add_test(tc, lines_mode_memoises_each_position);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
