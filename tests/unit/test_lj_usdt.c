/* Our mirrors of LuaJIT's USDT payloads (trace_abi.h) equal lj_usdt.h field by field, and
 * a location resolved by lj_usdt_loc and rendered by libnupp equals lj_debug_pushloc. */
#define LUAJIT_USE_USDT 1
#include <check.h>

#include "nupp_check.h"
#include <stddef.h>
#include <string.h>

#include "lj_obj.h"
#include "lj_trace.h"
#include "lj_debug.h"
#include "lj_strfmt.h"
#include "lj_usdt.h"
#include "lauxlib.h"
#include "lualib.h"

#include "nupp/trace.h"
#include "nupp/trace_abi.h"
#include "nupp/severity.h"

#define SAME(ours, theirs, field)                                                               \
	do {                                                                                    \
		ck_assert_uint_eq(offsetof(ours, field), offsetof(theirs, field));              \
		ck_assert_uint_eq(sizeof(((ours *)0)->field), sizeof(((theirs *)0)->field));    \
	} while (0)

START_TEST(usdt_loc_layout)
{
	ck_assert_uint_eq(sizeof(struct nupp_lj_usdt_loc), sizeof(LJ_USDTLoc));
	SAME(struct nupp_lj_usdt_loc, LJ_USDTLoc, pt);
	SAME(struct nupp_lj_usdt_loc, LJ_USDTLoc, name);
	SAME(struct nupp_lj_usdt_loc, LJ_USDTLoc, namelen);
	SAME(struct nupp_lj_usdt_loc, LJ_USDTLoc, line);
	SAME(struct nupp_lj_usdt_loc, LJ_USDTLoc, pos);
	SAME(struct nupp_lj_usdt_loc, LJ_USDTLoc, kind);
}
END_TEST

START_TEST(usdt_abort_layout)
{
	ck_assert_uint_eq(sizeof(struct nupp_lj_usdt_abort), sizeof(LJ_USDTAbort));
	SAME(struct nupp_lj_usdt_abort, LJ_USDTAbort, start);
	SAME(struct nupp_lj_usdt_abort, LJ_USDTAbort, abort);
	SAME(struct nupp_lj_usdt_abort, LJ_USDTAbort, infoloc);
	SAME(struct nupp_lj_usdt_abort, LJ_USDTAbort, info);
	SAME(struct nupp_lj_usdt_abort, LJ_USDTAbort, errstr);
	SAME(struct nupp_lj_usdt_abort, LJ_USDTAbort, errstrlen);
	SAME(struct nupp_lj_usdt_abort, LJ_USDTAbort, info_kind);
	SAME(struct nupp_lj_usdt_abort, LJ_USDTAbort, parent);
	SAME(struct nupp_lj_usdt_abort, LJ_USDTAbort, exitno);
	SAME(struct nupp_lj_usdt_abort, LJ_USDTAbort, startop);
}
END_TEST

START_TEST(usdt_actions)
{
	ck_assert_int_eq(NUPP_LJ_ACT_NONE, LJ_USDT_ACT_NONE);
	ck_assert_int_eq(NUPP_LJ_ACT_PENALTY, LJ_USDT_ACT_PENALTY);
	ck_assert_int_eq(NUPP_LJ_ACT_BLACKLIST, LJ_USDT_ACT_BLACKLIST);
	ck_assert_int_eq(NUPP_LJ_ACT_STITCHBL, LJ_USDT_ACT_STITCHBL);
	ck_assert_int_eq(NUPP_LJ_ACT_RETRY, LJ_USDT_ACT_RETRY);
}
END_TEST

/* The aborts our LuaJIT sends to luajit:trace_abort_benign are exactly those the trace
 * channel classes as info (counted only with include_benign): one sent to trace_abort
 * would only cost a probe call, but one of another class sent there would go uncounted. */
START_TEST(usdt_benign_probe_is_info_severity)
{
	int e, action, benign = 0;

	ck_assert_int_eq(LJ_TRERR__MAX, NUPP_TRERR__MAX);
	for (e = 0; e < LJ_TRERR__MAX; e++)
		for (action = LJ_USDT_ACT_NONE; action <= LJ_USDT_ACT_RETRY; action++) {
			int lj = LJ_USDT_ABORT_BENIGN((TraceError)e, action) ? 1 : 0;
			int ours = nupp_severity_of(e, (__u32)action) == NUPP_TRACE_SEV_INFO;

			ck_assert_msg(lj == ours, "error %d action %d: LuaJIT's probe %s, severity %s", e, action,
				      lj ? "benign" : "trace_abort", ours ? "info" : "not info");
			benign += lj;
		}
	/* 7 codes, each with the 3 actions that blacklist nothing. */
	ck_assert_int_eq(benign, 7 * 3);
}
END_TEST

/* What bpf/trace.bpf.c trace_copy_loc stores for a payload location. */
static void key_loc(struct nupp_trace_loc *l, const LJ_USDTLoc *u)
{
	memset(l, 0, sizeof(*l));
	l->kind = u->kind;
	l->line = u->line;
	if (u->kind == 'p') {
		l->pt = u->pt;
		return;
	}
	ck_assert_uint_le(u->namelen, NUPP_TRACE_NAME_MAX);
	l->namelen = u->namelen;
	memcpy(l->name, (const void *)(uintptr_t)u->name, u->namelen);
}

/* Loads a chunk under chunkname and checks every bytecode position of its proto. */
static void check_chunk(lua_State *L, const char *chunkname, int builtin, char kind)
{
	static const char src[] = "local s = 0\nfor i = 1, 3 do\n  s = s + i\nend\nreturn s\n";
	struct nupp_trace_loc kl;
	char ours[256];
	GCproto *pt;
	BCPos pos;
	LJ_USDTLoc u;

	ck_assert_int_eq(luaL_loadbuffer(L, src, sizeof(src) - 1, chunkname), 0);
	pt = funcproto(funcV(L->top - 1));
	if (builtin)
		pt->firstline = ~(BCLine)0; /* as the builtin protos of lib_*.c are */
	for (pos = 0; pos <= pt->sizebc; pos++) {
		lj_usdt_loc(&u, pt, pos);
		ck_assert_int_eq(u.kind, kind);
		ck_assert_uint_eq(u.pos, pos);
		key_loc(&kl, &u);
		nupp_trace_format_loc(&kl, ours, sizeof(ours));
		lj_debug_pushloc(L, pt, pos);
		ck_assert_str_eq(ours, lua_tostring(L, -1));
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
}

START_TEST(usdt_loc_renders_like_pushloc)
{
	lua_State *L = luaL_newstate();
	char longname[128];

	check_chunk(L, "@/some/dir/file.lua", 0, '@');
	check_chunk(L, "@file.lua", 0, '@');
	check_chunk(L, "@C:\\win\\dir\\w.lua", 0, '@');
	check_chunk(L, "=named chunk", 0, '=');
	check_chunk(L, "a, \"q\"\r\nz", 0, '"');
	memset(longname, 'x', 60);
	longname[60] = '\0';
	check_chunk(L, longname, 0, 'p');
	snprintf(longname, sizeof(longname), "@%s/long, \"odd\" name.lua",
		 "dddddddddddddddddddddddddddddddddddddddddddddddddd");
	check_chunk(L, longname, 0, '@');
	check_chunk(L, "=print", 1, 'b');
	lua_close(L);
}
END_TEST

START_TEST(usdt_pointer_renders_like_strfmt)
{
	static const uint64_t ptrs[] = { 0x1, 0x1234, 0xdeadbeef, 0x100000000ull, 0x1ffffffffull,
					 0x55d0c0ffee10ull, 0x7fffffffffffull, 0xffffffffffffull };
	lua_State *L = luaL_newstate();
	struct nupp_trace_loc kl;
	char ours[64];
	size_t i;

	memset(&kl, 0, sizeof(kl));
	kl.kind = 'p';
	for (i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++) {
		kl.pt = ptrs[i];
		kl.line = (int)i;
		nupp_trace_format_loc(&kl, ours, sizeof(ours));
		lj_strfmt_pushf(L, "%p:%d", (void *)(uintptr_t)ptrs[i], (int)i);
		ck_assert_str_eq(ours, lua_tostring(L, -1));
		lua_pop(L, 1);
	}
	lua_close(L);
}
END_TEST

NUPP_CHECK_MAIN("lj_usdt", 0, false, false,
		usdt_loc_layout,
		usdt_abort_layout,
		usdt_actions,
		usdt_benign_probe_is_info_severity,
		usdt_loc_renders_like_pushloc,
		usdt_pointer_renders_like_strfmt)
