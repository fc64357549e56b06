/* A C host embedding our libluajit .so: runs a Lua script with arg like luajit does,
 * so probes in the shared library (not the luajit executable) can be tested. */
#include <stdio.h>

#include "lauxlib.h"
#include "lua.h"
#include "lualib.h"

/* usage: prog_lua_host script.lua [args...]; exit status 0 when the script ran. */
int main(int argc, char **argv)
{
	lua_State *L;
	int i;

	if (argc < 2) {
		fprintf(stderr, "usage: %s script.lua [args...]\n", argv[0]);
		return 2;
	}
	L = luaL_newstate();
	if (!L)
		return 1;
	luaL_openlibs(L);
	lua_createtable(L, argc, 0);
	for (i = 1; i < argc; i++) {
		lua_pushstring(L, argv[i]);
		lua_rawseti(L, -2, i - 1);
	}
	lua_setglobal(L, "arg");
	if (luaL_dofile(L, argv[1])) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		lua_close(L);
		return 1;
	}
	lua_close(L);
	return 0;
}
