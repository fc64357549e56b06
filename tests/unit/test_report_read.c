/* Reading profiles back and writing outputs that are never lost: the lossless name
 * mapping, the JSON and collapsed readers and their errors, byte-for-byte round trips,
 * atomic outputs and path checks, and the figures of the top-functions table. */
#include <check.h>

#include "nupp_check.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"

/* Writes p in fmt into a malloc'ed buffer (*len bytes). */
static char *render(const struct nupp_profile *p, enum nupp_format fmt, const struct nupp_report_opts *o,
		    size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	ck_assert_int_eq(nupp_profile_write(p, fmt, o, f), 0);
	fclose(f);
	if (len)
		*len = n;
	return buf;
}

/* Reads text as a profile; returns the error, with the profile in *p on success. */
static int read_text(const char *text, struct nupp_profile *p)
{
	return nupp_profile_read_mem(text, strlen(text), "in.json", p);
}

/* Adds a row in one state. */
static void add(struct nupp_sample_set *s, const char *zone, const char *stack, __u64 n, char state)
{
	struct nupp_sample_row c = { .count = n };

	if (state == 'N')
		c.compiled = n;
	else if (state == 'I')
		c.interpreted = n;
	else
		c.ccode = n;
	ck_assert_int_eq(nupp_sample_set_add(s, zone, stack, &c), 0);
}

START_TEST(every_byte_string_maps_to_utf8_and_back)
{
	/* Every byte 1..255, a valid sequence of each length, the raw range's own
	 * characters (U+EF80, U+EFFF), cut sequences, overlong and surrogate forms. */
	char in[512];
	const char *cases[] = {
		"caf\xe9", "caf\xc3\xa9", "\xee\xbe\x80", "\xee\xbf\xbf", "\xee\xbe", "\xf0\x9f\x98\x80",
		"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff\xfe", "a;b\xe9;c", "",
	};
	size_t i, len;
	int b;

	for (b = 1; b < 256; b++)
		in[b - 1] = (char)b;
	in[255] = 0;
	for (i = 0; i <= sizeof(cases) / sizeof(cases[0]); i++) {
		const char *s = i < sizeof(cases) / sizeof(cases[0]) ? cases[i] : in;
		char *enc = nupp_bytes_to_utf8(s), *dec;

		ck_assert_ptr_nonnull(enc);
		/* The form is UTF-8 that jansson (a strict reader) accepts. */
		json_t *v = json_string(enc);

		ck_assert_msg(v != NULL, "case %zu is not valid UTF-8 after mapping", i);
		json_decref(v);
		dec = nupp_utf8_to_bytes(enc, &len);
		ck_assert_uint_eq(len, strlen(s));
		ck_assert_mem_eq(dec, s, len);
		free(enc);
		free(dec);
	}
	/* The documented form: U+EF00 + byte. */
	char *enc = nupp_bytes_to_utf8("caf\xe9");

	ck_assert_str_eq(enc, "caf\xee\xbf\xa9");
	free(enc);
	/* Well-formed names are written as they are. */
	enc = nupp_bytes_to_utf8("m\xc3\xa9thode.lua:f");
	ck_assert_str_eq(enc, "m\xc3\xa9thode.lua:f");
	free(enc);
}
END_TEST

/* A profile with a non-UTF-8 chunk name, a key and an abort reason. */
static void sample_profile(struct nupp_profile *p, struct nupp_sample_set *s, struct nupp_abort_set *a)
{
	static pid_t pids[] = { 4242 };

	memset(p, 0, sizeof(*p));
	add(s, "", "pmain;caf\xe9.lua:0;caf\xe9.lua:t[\"k\xff\"]", 7, 'I');
	add(s, "frame", "pmain;caf\xe9.lua:0;[C]:pcall;x.lua:g", 5, 'N');
	add(s, "", "pmain;caf\xe9.lua:0", 2, 'C');
	s->lost[NUPP_LOST_TRUNCATED] = 3;
	/* The frame table: a non-UTF-8 name that stands for two functions (added out of
	 * order, and one twice), and one that stands for one. */
	ck_assert_int_eq(nupp_frame_table_add(&s->frames, "caf\xe9.lua:t[\"k\xff\"]", "caf\xe9.lua", 12, 14), 0);
	ck_assert_int_eq(nupp_frame_table_add(&s->frames, "x.lua:g", "x.lua", 1, 2), 0);
	ck_assert_int_eq(nupp_frame_table_add(&s->frames, "caf\xe9.lua:t[\"k\xff\"]", "caf\xe9.lua", 3, 9), 0);
	ck_assert_int_eq(nupp_frame_table_add(&s->frames, "x.lua:g", "x.lua", 1, 2), 0);
	ck_assert_uint_eq(s->frames.n, 3);
	nupp_sample_set_sort(s);
	ck_assert_int_eq(nupp_abort_set_add(a, NUPP_SEV_WARN, "NYI: bytecode FNEW", "caf\xe9.lua:3", "", 4), 0);
	a->total_aborts = 4;
	p->meta = (struct nupp_profile_meta){ .command = "nupp-bpf record -- luajit caf\xe9.lua",
					      .target = "luajit caf\xe9.lua", .pids = pids, .npids = 1,
					      .frequency_hz = 99, .duration_sec = 1.2345678901234567,
					      .backend = "bpf", .luajit = "test", .depth = 64, .aborts = true };
	p->samples = *s;
	p->aborts = *a;
}

START_TEST(json_round_trip_is_byte_for_byte)
{
	struct nupp_sample_set s = { 0 };
	struct nupp_abort_set a = { 0 };
	struct nupp_profile p, q = { 0 }, r = { 0 };
	const struct nupp_frame_info *fi;
	size_t l1, l2, l3;
	char *j1, *j2, *j3;

	sample_profile(&p, &s, &a);
	j1 = render(&p, NUPP_FMT_JSON, NULL, &l1);
	ck_assert_int_eq(read_text(j1, &q), 0);
	ck_assert_str_eq(q.meta.target, "luajit caf\xe9.lua");
	ck_assert_str_eq(q.samples.rows[0].stack, "pmain;caf\xe9.lua:0;caf\xe9.lua:t[\"k\xff\"]");
	ck_assert_uint_eq(q.samples.samples, 14);
	ck_assert_uint_eq(q.samples.lost[NUPP_LOST_TRUNCATED], 3);
	ck_assert_str_eq(q.aborts.rows[0].location, "caf\xe9.lua:3");
	ck_assert_uint_eq(q.aborts.total_aborts, 4);
	ck_assert_int_eq(q.meta.pids[0], 4242);
	/* The frame table reads back: the bytes of the names, each name's functions by
	 * first line. */
	ck_assert_uint_eq(q.samples.frames.n, 3);
	fi = nupp_frame_table_find(&q.samples.frames, "caf\xe9.lua:t[\"k\xff\"]", strlen("caf\xe9.lua:t[\"k\xff\"]"));
	ck_assert_ptr_nonnull(fi);
	ck_assert_str_eq(fi->file, "caf\xe9.lua");
	ck_assert_int_eq(fi->first_line, 3);
	ck_assert_int_eq(fi->last_line, 9);
	fi = nupp_frame_table_next(&q.samples.frames, fi);
	ck_assert_ptr_nonnull(fi);
	ck_assert_int_eq(fi->first_line, 12);
	ck_assert_int_eq(fi->last_line, 14);
	ck_assert_ptr_null(nupp_frame_table_next(&q.samples.frames, fi));
	fi = nupp_frame_table_find(&q.samples.frames, "x.lua:gh", 7); /* a prefix of a longer name */
	ck_assert_ptr_nonnull(fi);
	ck_assert_str_eq(fi->name, "x.lua:g");
	ck_assert_ptr_null(nupp_frame_table_find(&q.samples.frames, "x.lua:g2", 8));
	j2 = render(&q, NUPP_FMT_JSON, NULL, &l2);
	ck_assert_uint_eq(l1, l2);
	ck_assert_mem_eq(j1, j2, l1);
	/* Collapsed text is bytes: the names as the target had them. */
	j3 = render(&q, NUPP_FMT_COLLAPSED, NULL, &l3);
	ck_assert_str_eq(j3, "pmain;caf\xe9.lua:0;caf\xe9.lua:t[\"k\xff\"] 7\n"
			     "pmain;caf\xe9.lua:0;[C]:pcall;x.lua:g 5\n"
			     "pmain;caf\xe9.lua:0 2\n");
	free(j3);
	/* And collapsed read back gives the same rows. */
	ck_assert_int_eq(nupp_profile_read_mem(render(&q, NUPP_FMT_COLLAPSED, NULL, &l3), l3, "x.folded", &r), 0);
	ck_assert_uint_eq(r.samples.n, 3);
	ck_assert_uint_eq(r.samples.samples, 14);
	ck_assert_str_eq(r.samples.rows[1].stack, "pmain;caf\xe9.lua:0;[C]:pcall;x.lua:g");
	ck_assert_uint_eq(r.samples.rows[1].compiled, 0); /* collapsed stacks carry no VM state */
	nupp_profile_free(&r);
	nupp_profile_free(&q);
	ck_assert_ptr_null(q.meta_store);
	free(j1);
	free(j2);
	nupp_sample_set_free(&s);
	nupp_abort_set_free(&a);
}
END_TEST

/* Expects read_text(text) to fail with err and a message containing want. */
static void expect_bad(const char *text, int err, const char *want)
{
	struct nupp_profile p;

	ck_assert_int_eq(read_text(text, &p), err);
	ck_assert_msg(strstr(nupp_errmsg(), want), "message [%s] lacks [%s]", nupp_errmsg(), want);
}

START_TEST(malformed_input_is_named_with_its_position)
{
	expect_bad("{\"version\":1,\n \"meta\":{\"samples\":1", -EINVAL, "in.json:2:");
	expect_bad("{\"version\":1,\n \"meta\":{\"samples\":1", -EINVAL, "near end of file (byte 34 of 34)");
	expect_bad("{\"version\":2,\"meta\":{},\"samples\":[]}", -EPROTO, "version 2");
	expect_bad("{\"meta\":{},\"samples\":[]}", -EINVAL, "in.json: version: missing");
	expect_bad("{\"version\":1,\"meta\":{},\"samples\":[{\"zonePath\":\"\",\"stack\":\"a\",\"count\":-1}]}", -EINVAL,
		   "samples[0].count: expected a non-negative integer");
	expect_bad("{\"version\":1,\"meta\":{},\"samples\":[{\"zonePath\":\"\",\"stack\":\"a\",\"count\":1,"
		   "\"compiled\":2}]}",
		   -EINVAL, "samples[0]: the VM-state counts add up to more than count");
	expect_bad("{\"version\":1,\"meta\":{\"samples\":3},\"samples\":[{\"zonePath\":\"\",\"stack\":\"a\",\"count\":1}]}",
		   -EINVAL, "meta.samples: says 3 samples but the rows hold 1");
	expect_bad("{\"version\":1,\"meta\":{},\"samples\":[],\"aborts\":[{\"severity\":\"bad\",\"count\":1,"
		   "\"reason\":\"r\",\"location\":\"l\",\"zonePath\":\"\"}]}",
		   -EINVAL, "aborts[0]: severity is not blacklist, warn or info");
	expect_bad("{\"version\":1,\"meta\":{},\"samples\":[{\"zonePath\":\"\",\"stack\":\"a\\u0000b\",\"count\":1}]}",
		   -EINVAL, "in.json:1:");
	expect_bad("{\"version\":1,\"meta\":{\"pids\":[\"x\"]},\"samples\":[]}", -EINVAL, "meta.pids[0]");
	expect_bad("{\"version\":1,\"meta\":{\"frames\":[]},\"samples\":[]}", -EINVAL,
		   "meta.frames: expected an object of frame names");
	expect_bad("{\"version\":1,\"meta\":{\"frames\":{\"m:f\":{}}},\"samples\":[]}", -EINVAL,
		   "meta.frames[\"m:f\"]: expected an array of functions");
	expect_bad("{\"version\":1,\"meta\":{\"frames\":{\"m:f\":[{\"firstLine\":1,\"lastLine\":2}]}},\"samples\":[]}",
		   -EINVAL, "meta.frames[\"m:f\"][0].file: missing");
	expect_bad("{\"version\":1,\"meta\":{\"frames\":{\"m:f\":[{\"file\":\"m\",\"firstLine\":-1,\"lastLine\":2}]}},"
		   "\"samples\":[]}",
		   -EINVAL, "meta.frames[\"m:f\"][0].firstLine: expected a non-negative integer");
	expect_bad("{\"version\":1,\"version\":1}", -EINVAL, "duplicate object key");
	expect_bad("a;b 1\nc;d x\n", -EINVAL, "in.json: line 2: the count is not a whole number");
	expect_bad("a;b 1\nnocount\n", -EINVAL, "line 2: expected");
	expect_bad("  \n", -EINVAL, "empty");
}
END_TEST

START_TEST(outputs_are_replaced_whole_or_not_at_all)
{
	char dir[] = "/tmp/nupp-unit.XXXXXX", path[256], sub[512], buf[64];
	struct nupp_sample_set s = { 0 };
	struct nupp_abort_set a = { 0 };
	struct nupp_profile p;
	struct stat st;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	sample_profile(&p, &s, &a);
	snprintf(path, sizeof(path), "%s/out.folded", dir);
	f = fopen(path, "w");
	fputs("old\n", f);
	fclose(f);
	/* An unknown format fails before writing: the old file stays. */
	ck_assert_int_eq(nupp_profile_write_file(&p, path, NUPP_FMT_NONE + 99, NULL), -EINVAL);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	ck_assert_str_eq(buf, "old\n");
	/* A good write replaces it, and leaves no temporary file beside it. */
	ck_assert_int_eq(nupp_profile_write_file(&p, path, NUPP_FMT_NONE, NULL), 0);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	ck_assert_str_eq(buf, "pmain;caf\xe9.lua:0;caf\xe9.lua:t[\"k\xff\"] 7\n");
	snprintf(sub, sizeof(sub), "rmdir %s 2>/dev/null; ls -A %s | grep -v '^out.folded$' | grep -q .", dir, dir);
	ck_assert_int_ne(system(sub), 0);
	/* The path checks: a folder, a missing folder, a file in a file. */
	ck_assert_int_eq(nupp_output_check(dir), -EISDIR);
	ck_assert_msg(strstr(nupp_errmsg(), "it is a folder"), "%s", nupp_errmsg());
	snprintf(sub, sizeof(sub), "%s/nope/x.json", dir);
	ck_assert_int_eq(nupp_output_check(sub), -ENOENT);
	ck_assert_msg(strstr(nupp_errmsg(), "does not exist"), "%s", nupp_errmsg());
	snprintf(sub, sizeof(sub), "%s/x.json", path);
	ck_assert_int_eq(nupp_output_check(sub), -ENOTDIR);
	ck_assert_int_eq(nupp_output_check("-"), 0);
	/* Writing over a folder fails and leaves it. */
	ck_assert_int_eq(nupp_profile_write_file(&p, dir, NUPP_FMT_JSON, NULL), -EISDIR);
	ck_assert_int_eq(stat(dir, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	/* A device is written in place, never replaced. */
	ck_assert_int_eq(nupp_profile_write_file(&p, "/dev/null", NUPP_FMT_SVG, NULL), 0);
	ck_assert_int_eq(stat("/dev/null", &st), 0);
	ck_assert(S_ISCHR(st.st_mode));
	unlink(path);
	rmdir(dir);
	nupp_sample_set_free(&s);
	nupp_abort_set_free(&a);
}
END_TEST

START_TEST(formats_by_extension_and_name)
{
	ck_assert_int_eq(nupp_format_by_path("a.json"), NUPP_FMT_JSON);
	ck_assert_int_eq(nupp_format_by_path("a.speedscope.json"), NUPP_FMT_SPEEDSCOPE);
	ck_assert_int_eq(nupp_format_by_path("a.svg"), NUPP_FMT_SVG);
	ck_assert_int_eq(nupp_format_by_path("a.pb.gz"), NUPP_FMT_PPROF);
	ck_assert_int_eq(nupp_format_by_path("a.txt"), NUPP_FMT_COLLAPSED);
	ck_assert_int_eq(nupp_format_by_path("a.folded"), NUPP_FMT_COLLAPSED);
	ck_assert_int_eq(nupp_format_by_path("-"), NUPP_FMT_COLLAPSED);
	ck_assert_int_eq(nupp_format_by_path("a.csv"), NUPP_FMT_CSV);
	ck_assert_int_eq(nupp_format_by_path("a.gz"), NUPP_FMT_NONE);
	ck_assert_int_eq(nupp_format_by_name("top"), NUPP_FMT_TOP);
	ck_assert_int_eq(nupp_format_by_name("flamegraph"), NUPP_FMT_SVG);
	ck_assert_int_eq(nupp_format_by_name("nope"), NUPP_FMT_NONE);
}
END_TEST

START_TEST(top_table_counts_self_total_and_recursion_once)
{
	struct nupp_sample_set s = { 0 };
	struct nupp_profile p = { 0 };
	char *t;

	/* f recurses: a stack holding it twice counts once in its total. */
	add(&s, "", "m:main;m:f;m:f;m:g", 6, 'I');
	add(&s, "", "m:main;m:f", 3, 'N');
	add(&s, "", "m:main;m:h", 1, 'C');
	nupp_sample_set_sort(&s);
	p.samples = s;
	p.meta.frequency_hz = 99;
	p.meta.duration_sec = 0.1;
	t = render(&p, NUPP_FMT_TOP, &(struct nupp_report_opts){ .sz = sizeof(struct nupp_report_opts), .top = 3 },
		   NULL);
	ck_assert_str_eq(t, "Top 3 functions of 10 samples (99 Hz, 0.1 s); VM states of the self samples\n"
			    "   self   total      self     total compiled   interp   C code       GC      JIT  function\n"
			    "  60.0%   60.0%         6         6     0.0%   100.0%     0.0%     0.0%     0.0%  m:g\n"
			    "  30.0%   90.0%         3         9   100.0%     0.0%     0.0%     0.0%     0.0%  m:f\n"
			    "  10.0%   10.0%         1         1     0.0%     0.0%   100.0%     0.0%     0.0%  m:h\n");
	free(t);
	/* A table per line needs a profile of lines. */
	FILE *f = fopen("/dev/null", "w");

	ck_assert_int_eq(nupp_profile_write(&p, NUPP_FMT_TOP,
					    &(struct nupp_report_opts){ .sz = sizeof(struct nupp_report_opts), .lines = true },
					    f),
			 -EINVAL);
	fclose(f);
	ck_assert_msg(strstr(nupp_errmsg(), "record it with --lines"), "%s", nupp_errmsg());
	nupp_sample_set_free(&s);
}
END_TEST

/* Adds a row of thread tid of process pid, interpreted. */
static void add_thread(struct nupp_sample_set *s, pid_t pid, pid_t tid, const char *stack, __u64 n)
{
	struct nupp_sample_row c = { .pid = pid, .tid = tid, .count = n, .interpreted = n };

	ck_assert_int_eq(nupp_sample_set_add(s, "", stack, &c), 0);
}

START_TEST(rows_are_per_thread_and_collapsed_merges_them)
{
	struct nupp_sample_set s = { 0 };
	struct nupp_profile p = { 0 }, q = { 0 };
	char *j, *t;

	add_thread(&s, 5, 6, "m:main;m:a", 3);
	add_thread(&s, 5, 7, "m:main;m:a", 2);
	add_thread(&s, 5, 6, "m:main;m:a", 1);
	add_thread(&s, 5, 7, "m:main", 1);
	ck_assert_uint_eq(s.n, 3);
	nupp_sample_set_sort(&s);
	p.samples = s;
	p.meta.frequency_hz = 99;
	p.meta.start_time = 1700000000.25;
	p.meta.threads = (struct nupp_thread_name[]){ { 5, 6, "caf\xe9" } };
	p.meta.nthreads = 1;
	j = render(&p, NUPP_FMT_JSON, NULL, NULL);
	ck_assert_ptr_nonnull(strstr(j, "\"startTime\": 1700000000.25,"));
	ck_assert_ptr_nonnull(strstr(j, "{\"pid\": 5, \"tid\": 6, \"zonePath\": \"\", \"stack\": \"m:main;m:a\", \"count\": 4,"));
	ck_assert_int_eq(read_text(j, &q), 0);
	ck_assert_uint_eq(q.samples.n, 3);
	ck_assert_int_eq(q.samples.rows[0].tid, 6);
	ck_assert_uint_eq(q.samples.rows[0].count, 4);
	ck_assert_int_eq(q.samples.rows[1].tid, 7);
	ck_assert_uint_eq(q.samples.rows[1].count, 2);
	ck_assert(q.meta.start_time == 1700000000.25);
	ck_assert_int_eq(q.meta.nthreads, 1);
	ck_assert_int_eq(q.meta.threads[0].tid, 6);
	ck_assert_str_eq(q.meta.threads[0].name, "caf\xe9");
	/* Collapsed stacks: one line per stack, over every thread. */
	t = render(&q, NUPP_FMT_COLLAPSED, NULL, NULL);
	ck_assert_str_eq(t, "m:main;m:a 6\nm:main 1\n");
	free(t);
	nupp_profile_free(&q);
	free(j);
	/* A profile written before rows named their thread: thread 0 (not known), no start. */
	ck_assert_int_eq(read_text("{\"version\":1,\"meta\":{},\"samples\":[{\"pid\":5,\"zonePath\":\"\","
				   "\"stack\":\"a\",\"count\":1}]}",
				   &q),
			 0);
	ck_assert_int_eq(q.samples.rows[0].pid, 5);
	ck_assert_int_eq(q.samples.rows[0].tid, 0);
	ck_assert(q.meta.start_time == 0);
	nupp_profile_free(&q);
	expect_bad("{\"version\":1,\"meta\":{},\"samples\":[{\"tid\":-1,\"zonePath\":\"\",\"stack\":\"a\",\"count\":1}]}",
		   -EINVAL, "samples[0].tid: expected a non-negative integer");
	expect_bad("{\"version\":1,\"meta\":{\"startTime\":\"now\"},\"samples\":[]}", -EINVAL,
		   "meta.startTime: expected a Unix time");
	nupp_sample_set_free(&s);
}
END_TEST

NUPP_CHECK_MAIN("report_read", 0, false, false, every_byte_string_maps_to_utf8_and_back,
		json_round_trip_is_byte_for_byte, malformed_input_is_named_with_its_position,
		outputs_are_replaced_whole_or_not_at_all, formats_by_extension_and_name,
		top_table_counts_self_total_and_recursion_once, rows_are_per_thread_and_collapsed_merges_them)
