/* A C host that opens its Lua VMs late: it waits for a line on stdin before creating
 * N VMs (printing "open N"), then runs until stdin reaches EOF. Lets tests look at a
 * LuaJIT process before and after it has any VM. With SCRIPT, one VM is open (idle) from
 * the start, and the last VM opened late runs SCRIPT before "open N": a VM opened after
 * a profiler attached to a running process. usage: prog_late_vm N [SCRIPT] */
#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1, i, c;
	lua_State *Ls[8], *first = NULL;

	if (n < 1 || n > 8)
		return 2;
	if (argc > 2 && !(first = luaL_newstate()))
		return 1;
	printf("ready\n");
	fflush(stdout);
	while ((c = getchar()) != EOF && c != '\n')
		;
	for (i = 0; i < n; i++) {
		Ls[i] = luaL_newstate();
		if (!Ls[i])
			return 1;
		luaL_openlibs(Ls[i]);
	}
	if (argc > 2 && luaL_dofile(Ls[n - 1], argv[2])) {
		fprintf(stderr, "prog_late_vm: %s\n", lua_tostring(Ls[n - 1], -1));
		return 1;
	}
	printf("open %d\n", n);
	fflush(stdout);
	while (getchar() != EOF)
		;
	for (i = 0; i < n; i++)
		lua_close(Ls[i]);
	if (first)
		lua_close(first);
	return 0;
}
