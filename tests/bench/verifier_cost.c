/* Bench driver for bench_verifier.sh: loads each BPF object given (as nupp-bpf would, with
 * the object's default sizes) and prints, per program, the kernel verifier's statistics
 * (log level 4: processed instructions, states, verification time) and the object's load
 * time. Nothing is attached. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define VC_LOG 65536 /* a level-4 log holds a few lines per program */
#define VC_MAX_PROGS 64

/* Monotonic time in microseconds. */
static double vc_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* The number after key in log (the last occurrence), or -1. */
static long vc_field(const char *log, const char *key)
{
	const char *p = log, *at = NULL;

	while ((p = strstr(p, key))) {
		at = p;
		p += strlen(key);
	}
	return at ? strtol(at + strlen(key), NULL, 10) : -1;
}

/* Silences libbpf's own messages except warnings. */
static int vc_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return level == LIBBPF_WARN ? vfprintf(stderr, fmt, ap) : 0;
}

/* Loads one object; prints its programs' rows and returns 0, or a negative errno. */
static int vc_object(const char *path)
{
	static char logs[VC_MAX_PROGS][VC_LOG];
	const char *names[VC_MAX_PROGS];
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	struct bpf_program *prog;
	double t0, t1;
	int n = 0, i, e;

	if (!obj) {
		e = -errno;
		fprintf(stderr, "verifier_cost: cannot open %s: %s\n", path, strerror(-e));
		return e;
	}
	bpf_object__for_each_program(prog, obj) {
		if (n == VC_MAX_PROGS)
			break;
		logs[n][0] = 0;
		names[n] = bpf_program__name(prog);
		bpf_program__set_log_level(prog, 4);
		bpf_program__set_log_buf(prog, logs[n], VC_LOG);
		n++;
	}
	t0 = vc_now_us();
	e = bpf_object__load(obj);
	t1 = vc_now_us();
	if (e) {
		fprintf(stderr, "verifier_cost: cannot load %s: %s\n", path, strerror(-e));
		bpf_object__close(obj);
		return e;
	}
	for (i = 0; i < n; i++)
		printf("prog=%s processed=%ld states=%ld peak=%ld verify_us=%ld\n", names[i],
		       vc_field(logs[i], "processed "), vc_field(logs[i], "total_states "),
		       vc_field(logs[i], "peak_states "), vc_field(logs[i], "verification time "));
	printf("object=%s load_ms=%.1f\n", path, (t1 - t0) / 1e3);
	bpf_object__close(obj);
	return 0;
}

int main(int argc, char **argv)
{
	int i, rc = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: verifier_cost OBJECT.bpf.o...\n");
		return 2;
	}
	libbpf_set_print(vc_print);
	for (i = 1; i < argc; i++)
		if (vc_object(argv[i]))
			rc = 1;
	return rc;
}
