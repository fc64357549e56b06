/* A small C host for the sampler tests: one VM per thread (main + one more), each
 * running a Lua workload with two C functions registered by lua_pushcfunction:
 * host.spin(n) (a C busy loop) and host.callback(f, n) (C calling back into Lua).
 * usage: prog_sampler_host SCRIPT [ARGS...]; with NUPP_GATE_FD set it first reads one
 * byte from that fd, so a profiler can attach before the VMs open. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lauxlib.h"
#include "lua.h"
#include "lualib.h"

static int host_argc;
static pthread_barrier_t host_done;
static char **host_argv;

/* host.spin(n): burns CPU in C; returns a checksum. */
static int host_spin(lua_State *L)
{
	long n = (long)luaL_checknumber(L, 1), i;
	volatile unsigned long x = 1;

	for (i = 0; i < n; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	lua_pushnumber(L, (double)(x & 0xffff));
	return 1;
}

/* host.callback(f, n): calls f(n) from C with lua_call. */
static int host_callback(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TFUNCTION);
	lua_pushvalue(L, 1);
	lua_pushvalue(L, 2);
	lua_call(L, 1, 1);
	return 1;
}

/* Runs the script in a fresh VM with arg = {[0]=script, role, args...}. */
static void *host_run(void *role)
{
	lua_State *L = luaL_newstate();
	int i, rc;

	luaL_openlibs(L);
	lua_newtable(L);
	lua_pushcfunction(L, host_spin);
	lua_setfield(L, -2, "spin");
	lua_pushcfunction(L, host_callback);
	lua_setfield(L, -2, "callback");
	lua_setglobal(L, "host");
	lua_newtable(L);
	lua_pushstring(L, host_argv[1]);
	lua_rawseti(L, -2, 0);
	lua_pushstring(L, (const char *)role);
	lua_rawseti(L, -2, 1);
	for (i = 2; i < host_argc; i++) {
		lua_pushstring(L, host_argv[i]);
		lua_rawseti(L, -2, i);
	}
	lua_setglobal(L, "arg");
	rc = luaL_loadfile(L, host_argv[1]);
	if (rc == 0)
		rc = lua_pcall(L, 0, 0, 0);
	if (rc) {
		fprintf(stderr, "prog_sampler_host: %s\n", lua_tostring(L, -1));
		exit(1);
	}
	/* Both VMs done: tell the profiler, then keep the VMs (and their prototypes) alive
	 * until it closes the gate, since it names frames by reading this memory. */
	pthread_barrier_wait(&host_done);
	if (strcmp((const char *)role, "main") == 0) {
		const char *done = getenv("NUPP_DONE_FD"), *gate = getenv("NUPP_GATE_FD");
		char c;

		if (done && write(atoi(done), "d", 1) == 1 && gate)
			while (read(atoi(gate), &c, 1) > 0)
				;
	}
	pthread_barrier_wait(&host_done);
	lua_close(L);
	return NULL;
}

/* Starts the second VM's thread, runs the first on the main thread, joins. */
int main(int argc, char **argv)
{
	pthread_t t;
	const char *gate = getenv("NUPP_GATE_FD");
	char c;

	if (argc < 2) {
		fprintf(stderr, "usage: prog_sampler_host SCRIPT [ARGS...]\n");
		return 2;
	}
	host_argc = argc;
	host_argv = argv;
	if (gate && read(atoi(gate), &c, 1) < 0)
		return 126;
	pthread_barrier_init(&host_done, NULL, 2);
	if (pthread_create(&t, NULL, host_run, "thread"))
		return 1;
	host_run("main");
	pthread_join(t, NULL);
	return 0;
}
