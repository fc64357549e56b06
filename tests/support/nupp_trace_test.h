/* Helpers of the trace channel's integration tests: oracle.lua runs, its files, sessions. */
#ifndef NUPP_TRACE_TEST_H
#define NUPP_TRACE_TEST_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nupp/nupp.h"
#include "nupp/trace.h"
#include "nupp_test.h"

#define TRACE_DATA NUPP_TEST_DATA "/trace/"

/* Opens one trace session and attaches it to binary for pid (-1: every process). */
static inline struct nupp_trace *trace_test_open(const struct nupp_trace_opts *o, const char *binary, pid_t pid)
{
	struct nupp_trace *t;
	int err = 0;

	t = nupp_trace_open(o, &err);
	ck_assert_msg(t, "nupp_trace_open: %d %s", err, nupp_errmsg());
	err = nupp_trace_attach(t, binary, pid);
	ck_assert_msg(err == 0, "nupp_trace_attach: %d %s", err, nupp_errmsg());
	return t;
}

/* Reads a whole file into a malloc'ed string. */
static inline char *trace_test_slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	ck_assert_msg(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, n + 1);
	ck_assert_int_eq(fread(buf, 1, n, f), (size_t)n);
	fclose(f);
	return buf;
}

/* The value of "name N" in the oracle's PREFIX.meta file. */
static inline unsigned long long trace_test_meta(const char *prefix, const char *name)
{
	char path[512], key[64];
	unsigned long long v;
	FILE *f;

	snprintf(path, sizeof(path), "%s.meta", prefix);
	f = fopen(path, "r");
	ck_assert_msg(f, "no oracle meta %s", path);
	while (fscanf(f, "%63s %llu", key, &v) == 2)
		if (strcmp(key, name) == 0) {
			fclose(f);
			return v;
		}
	fclose(f);
	ck_abort_msg("oracle meta has no %s", name);
	return 0;
}

/* Writes a set as CSV to path. */
static inline void trace_test_write_csv(struct nupp_abort_set *set, const char *path)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(nupp_write_abort_csv(set, f), 0);
	fclose(f);
}

/* Makes a private temporary directory for a test program's files. */
static inline void trace_test_tmpdir(char *dir, size_t size, const char *name)
{
	snprintf(dir, size, "%s/%s.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", name);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
}

/* Removes the temporary directory (after a run where every test passed). */
static inline int trace_test_rmdir(const char *dir)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) ? 1 : 0;
}

#endif /* NUPP_TRACE_TEST_H */
