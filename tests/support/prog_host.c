/* A C host embedding our libluajit: opens N VMs, prints each main lua_State on stdout
 * ("L=0x..."), then runs a Lua chunk in the first VM until stdin reaches EOF.
 * usage: prog_host NVMS 'lua code' */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1, i;
	const char *code = argc > 2 ? argv[2] : "local x = 0 for i = 1, 1e6 do x = x + i end";
	lua_State *Ls[8];
	char c;

	if (n < 1 || n > 8)
		return 2;
	for (i = 0; i < n; i++) {
		Ls[i] = luaL_newstate();
		if (!Ls[i])
			return 1;
		luaL_openlibs(Ls[i]);
		printf("L=%p\n", (void *)Ls[i]);
	}
	fflush(stdout);
	if (luaL_dostring(Ls[0], code)) {
		fprintf(stderr, "prog_host: %s\n", lua_tostring(Ls[0], -1));
		return 1;
	}
	while (read(0, &c, 1) > 0)
		;
	for (i = 0; i < n; i++)
		lua_close(Ls[i]);
	return 0;
}
