/* Benchmark workload (bench_uprobe_site.sh): calls a function holding one USDT site n
 * times and prints the CPU time a call took. Site p1 is sdt.h's own 1-byte NOP; site p5
 * is the 5-byte NOP our LuaJIT build puts at its probes (scripts/luajit-usdt.patch),
 * which Linux 6.18+ turns into a call of its uprobe trampoline instead of a trap.
 * usage: uprobe_site 1|5 N */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/sdt.h>

/* The site with sdt.h's NOP. */
__attribute__((noinline)) void site1(long i)
{
	DTRACE_PROBE1(upb, p1, i);
}

#undef _SDT_NOP
#define _SDT_NOP .byte 0x0f; .byte 0x1f; .byte 0x44; .byte 0x00; .byte 0x00

/* The site with the 5-byte NOP. */
__attribute__((noinline)) void site5(long i)
{
	DTRACE_PROBE1(upb, p5, i);
}

int main(int argc, char **argv)
{
	struct timespec a, b;
	void (*f)(long);
	long n, i;

	if (argc != 3 || (argv[1][0] != '1' && argv[1][0] != '5') || (n = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: uprobe_site 1|5 N\n");
		return 2;
	}
	f = argv[1][0] == '5' ? site5 : site1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	for (i = 0; i < n; i++)
		f(i);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	return 0;
}
