/* A C host for the sampler's truth tests: threads that run Lua, threads that run only C,
 * and one VM moved between threads, each part timed by its own CLOCK_THREAD_CPUTIME_ID.
 * usage: prog_host_threads MODE SECONDS
 *   busy      a Lua thread runs work() for SECONDS of its CPU time while a second thread
 *             spins in host_compute() (no VM) as long; prints "lua C"
 *   alternate one thread alternates lua_call of work() and as long in host_compute(),
 *             SECONDS of each; prints "lua C"
 *   handoff   one VM, two threads (named lua_a, lua_b) taking turns under a mutex: A runs work_a(), B
 *             work_b(); outside the lock each spins in spin_a() / spin_b(); prints
 *             "lua_a lua_b spin_a spin_b"
 * The CPU seconds go to NUPP_DONE_FD (stdout without it); with NUPP_GATE_FD it first
 * reads one byte from that fd, and after printing waits for it to close, so a profiler
 * can attach before the VM opens and name frames while the VM is alive. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lauxlib.h"
#include "lua.h"
#include "lualib.h"

/* Lua's part: interpreted loops, each named by its caller (no tail calls). */
static const char host_chunk[] = "jit.off()\n"
				 "local function loop(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end\n"
				 "function work(n) local x = loop(n) return x end\n"
				 "function work_a(n) local x = loop(n) return x end\n"
				 "function work_b(n) local x = loop(n) return x end\n"
				 "function run(n) local x = work(n) return x end\n"
				 "function run_a(n) local x = work_a(n) return x end\n"
				 "function run_b(n) local x = work_b(n) return x end\n";

static double host_secs;
static lua_State *host_L;
static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long host_sink;

/* CPU seconds of the calling thread. */
static double host_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Defines a C function that burns about n iterations of CPU under its own symbol. */
#define HOST_SPIN(name, mul, add)                                   \
	static __attribute__((noinline)) void name(long n)          \
	{                                                            \
		unsigned long x = host_sink | 1;                     \
		long i;                                              \
                                                                     \
		for (i = 0; i < n; i++)                              \
			x = x * (mul) + (add);                       \
		host_sink = x;                                       \
	}

/* host_compute: the C work of busy and alternate; spin_a, spin_b: the handoff threads'. */
HOST_SPIN(host_compute, 6364136223846793005ul, 1442695040888963407ul)
HOST_SPIN(spin_a, 2862933555777941757ul, 3037000493ul)
HOST_SPIN(spin_b, 3202034522624059733ul, 4354685564936845319ul)

/* Calls the global Lua function fn(n) on L. */
static void host_call(lua_State *L, const char *fn, long n)
{
	lua_getglobal(L, fn);
	lua_pushnumber(L, (double)n);
	if (lua_pcall(L, 1, 1, 0)) {
		fprintf(stderr, "prog_host_threads: %s\n", lua_tostring(L, -1));
		exit(1);
	}
	lua_pop(L, 1);
}

/* busy mode, second thread: C only, for host_secs of its CPU time. */
static void *host_busy_c(void *out)
{
	double t0 = host_cpu();

	while (host_cpu() - t0 < host_secs)
		host_compute(200000);
	*(double *)out = host_cpu() - t0;
	return NULL;
}

/* One handoff thread's share: its Lua under the lock, its C spin outside it. */
struct host_turns {
	const char *fn, *name; /* the Lua function, the thread's name */
	void (*spin)(long);
	double lua, c;
};

/* handoff mode: takes turns with the other thread until both ran host_secs of Lua. */
static void *host_handoff(void *arg)
{
	struct host_turns *t = arg;
	double t0;

	pthread_setname_np(pthread_self(), t->name);
	while (t->lua < host_secs) {
		pthread_mutex_lock(&host_lock);
		t0 = host_cpu();
		host_call(host_L, t->fn, 300000);
		t->lua += host_cpu() - t0;
		pthread_mutex_unlock(&host_lock);
		t0 = host_cpu();
		t->spin(3000000);
		t->c += host_cpu() - t0;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *gate = getenv("NUPP_GATE_FD"), *done = getenv("NUPP_DONE_FD");
	char line[256], c;
	double lua = 0, cc = 0, t0;
	int out = done ? atoi(done) : 1;

	if (argc < 3) {
		fprintf(stderr, "usage: prog_host_threads busy|alternate|handoff SECONDS\n");
		return 2;
	}
	host_secs = atof(argv[2]);
	if (gate && read(atoi(gate), &c, 1) < 0)
		return 126;
	host_L = luaL_newstate();
	luaL_openlibs(host_L);
	if (luaL_loadbuffer(host_L, host_chunk, sizeof(host_chunk) - 1, "=hostprog") || lua_pcall(host_L, 0, 0, 0)) {
		fprintf(stderr, "prog_host_threads: %s\n", lua_tostring(host_L, -1));
		return 1;
	}
	if (strcmp(argv[1], "busy") == 0) {
		pthread_t th;

		if (pthread_create(&th, NULL, host_busy_c, &cc))
			return 1;
		t0 = host_cpu();
		while (host_cpu() - t0 < host_secs)
			host_call(host_L, "run", 200000);
		lua = host_cpu() - t0;
		pthread_join(th, NULL);
		snprintf(line, sizeof(line), "%.6f %.6f\n", lua, cc);
	} else if (strcmp(argv[1], "alternate") == 0) {
		while (lua < host_secs || cc < host_secs) {
			t0 = host_cpu();
			host_call(host_L, "run", 300000);
			lua += host_cpu() - t0;
			t0 = host_cpu();
			host_compute(3000000);
			cc += host_cpu() - t0;
		}
		snprintf(line, sizeof(line), "%.6f %.6f\n", lua, cc);
	} else if (strcmp(argv[1], "handoff") == 0) {
		struct host_turns a = { "run_a", "lua_a", spin_a, 0, 0 }, b = { "run_b", "lua_b", spin_b, 0, 0 };
		pthread_t ta, tb;

		if (pthread_create(&ta, NULL, host_handoff, &a) || pthread_create(&tb, NULL, host_handoff, &b))
			return 1;
		pthread_join(ta, NULL);
		pthread_join(tb, NULL);
		snprintf(line, sizeof(line), "%.6f %.6f %.6f %.6f\n", a.lua, b.lua, a.c, b.c);
	} else {
		fprintf(stderr, "prog_host_threads: unknown mode %s\n", argv[1]);
		return 2;
	}
	if (write(out, line, strlen(line)) < 0)
		return 1;
	/* Keep the VM (and its prototypes) alive until the profiler closes the gate. */
	if (gate)
		while (read(atoi(gate), &c, 1) > 0)
			;
	lua_close(host_L);
	return 0;
}
