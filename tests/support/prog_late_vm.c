/* A C host that opens its Lua VMs late: it waits for a line on stdin before creating
 * N VMs (printing "open N"), then runs until stdin reaches EOF. Lets tests look at a
 * LuaJIT process before and after it has any VM. usage: prog_late_vm N */
#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1, i, c;
	lua_State *Ls[8];

	if (n < 1 || n > 8)
		return 2;
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
	printf("open %d\n", n);
	fflush(stdout);
	while (getchar() != EOF)
		;
	for (i = 0; i < n; i++)
		lua_close(Ls[i]);
	return 0;
}
