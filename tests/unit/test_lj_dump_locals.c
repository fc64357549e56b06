/* dump --locals on a real prototype of our LuaJIT, compiled in this process, and a frame
 * of known values: the names live at a PC (debug.getlocal's), the compiler's own names
 * left out, a slot reused by a later variable, and each kind of value's text. The
 * reads go through the dump's page cache on this process's own memory. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nupp_check.h"
#include "lj_obj.h"
#include "lj_str.h"
#include "lj_tab.h"
#include "lj_debug.h"
#include "lauxlib.h"
#include "lualib.h"

#include "nupp/lj_layout.h"
#include "core/dump_priv.h"

extern const struct nupp_lj_layout luajit_bpf_layout;

static const char chunk[] = "return function(a, b)\n"                  /* 1 */
			    "  local s = 'hello \"x\"\\n'\n"            /* 2 */
			    "  local long = string.rep('y', 60)\n"      /* 3 */
			    "  do local inner = 1\n"                    /* 4 */
			    "    inner = inner + 1 end\n"               /* 5 */
			    "  for i = 1, 2 do end\n"                   /* 6 */
			    "  local flag = true\n"                     /* 7 */
			    "  local f, t = print, {}\n"                /* 8 */
			    "  return s, long, flag, f, t\n"            /* 9 */
			    "end\n";

/* The first bytecode index of pt on line. */
static __s32 pc_of_line(GCproto *pt, int line)
{
	BCPos pc;

	for (pc = 1; pc < pt->sizebc; pc++)
		if (lj_debug_line(pt, pc) == line)
			return (__s32)pc;
	ck_abort_msg("no bytecode on line %d", line);
	return -1;
}

/* The locals dump_locals finds at line (slots at base), as "name=value;..." */
static const char *locals_at(GCproto *pt, int line, TValue *base)
{
	static char out[1024];
	struct dump_ctx *c = calloc(1, sizeof(*c));
	struct nupp_smp_frame f = { .ptr = (__u64)(uintptr_t)pt, .pos = pc_of_line(pt, line), .kind = NUPP_SMP_LUA };
	struct nupp_dump_frame o = { 0 };
	size_t k = 0;
	int i;

	ck_assert_ptr_nonnull(c);
	c->pid = c->mem.pid = getpid();
	c->vms[0].layout = luajit_bpf_layout;
	dump_locals(c, &c->vms[0], &f, (__u64)(uintptr_t)base, &o);
	out[0] = 0;
	for (i = 0; i < o.nlocals; i++) {
		k += (size_t)snprintf(out + k, sizeof(out) - k, "%s%s=%s", i ? ";" : "", o.locals[i].name,
				      o.locals[i].value);
		free(o.locals[i].name);
		free(o.locals[i].value);
	}
	free(o.locals);
	ck_assert_uint_gt(c->mem.reads, 0);
	free(c);
	return out;
}

START_TEST(locals_live_at_a_pc_and_their_values)
{
	lua_State *L = luaL_newstate();
	TValue slots[8];
	GCproto *pt;
	GCtab *t;
	char want[512];

	luaL_openlibs(L);
	ck_assert_int_eq(luaL_loadstring(L, chunk), 0);
	ck_assert_int_eq(lua_pcall(L, 0, 1, 0), 0);
	pt = funcproto(funcV(L->top - 1));
	t = lj_tab_new(L, 0, 0);
	setnumV(&slots[0], 1.5);
	setnilV(&slots[1]);
	setstrV(L, &slots[2], lj_str_newz(L, "hello \"x\"\n"));
	setstrV(L, &slots[3], lj_str_newz(L, "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"));
	setboolV(&slots[4], 1);
	setfuncV(L, &slots[5], funcV(L->top - 1));
	settabV(L, &slots[6], t);
	setnilV(&slots[7]);
	/* Line 3: a, b and s are live; long is assigned by the line's call, not yet. */
	ck_assert_str_eq(locals_at(pt, 3, slots), "a=1.5;b=nil;s=\"hello \\\"x\\\"\\10\"");
	/* Line 9: inner and the loop's own variables are gone (their slots reused by flag,
	 * f, t); the long string is cut. */
	snprintf(want, sizeof(want),
		 "a=1.5;b=nil;s=\"hello \\\"x\\\"\\10\";long=\"%s\"...;flag=true;f=function: %#llx;t=table: %#llx",
		 "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy", (unsigned long long)(uintptr_t)funcV(L->top - 1),
		 (unsigned long long)(uintptr_t)t);
	ck_assert_str_eq(locals_at(pt, 9, slots), want);
	/* Line 5: inner is live in slot 4 (where flag is later); on line 4 not yet (its
	 * range starts after its assignment). */
	ck_assert_str_eq(locals_at(pt, 4, slots),
			 "a=1.5;b=nil;s=\"hello \\\"x\\\"\\10\";long=\"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\"...");
	ck_assert_str_eq(locals_at(pt, 5, slots),
			 "a=1.5;b=nil;s=\"hello \\\"x\\\"\\10\";long=\"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\"...;inner=true");
	lua_close(L);
}
END_TEST

NUPP_CHECK_MAIN("lj_dump_locals", 30, false, false, locals_live_at_a_pc_and_their_values)
