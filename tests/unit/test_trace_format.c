/* Reason and location text of abort rows, and the abort CSV read back by python3's csv. */
#include <check.h>

#include "nupp_check.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nupp/profile.h"
#include "nupp/trace.h"
#include "nupp/lj_layout.h"
#include "nupp_vmdef.h"
#include "nupp_vmdef_luajit2.h"

/* A key with err and a numeric info of a kind. */
static struct nupp_trace_key key(int err, int kind, __u64 info)
{
	struct nupp_trace_key k;

	memset(&k, 0, sizeof(k));
	k.err = err;
	k.info_kind = kind;
	k.info = info;
	return k;
}

/* The reason of k as a static string. */
static const char *reason(const struct nupp_trace_key *k)
{
	static char buf[512];

	nupp_trace_format_reason(k, NUPP_LJ_BRANCH_LUAJIT, buf, sizeof(buf));
	return buf;
}

/* The index of name in a generated vmdef table, or -1. */
static int vmindex(const char *const *tab, int n, const char *name)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(tab[i], name))
			return i;
	return -1;
}

/* A location of a kind with a name. */
static struct nupp_trace_loc loc(char kind, const char *name, int line)
{
	struct nupp_trace_loc l;

	memset(&l, 0, sizeof(l));
	l.kind = kind;
	l.line = line;
	l.namelen = strlen(name);
	memcpy(l.name, name, l.namelen);
	return l;
}

START_TEST(reason_nyibc_names_the_opcode)
{
	struct nupp_trace_key k = key(NUPP_TRERR_NYIBC, NUPP_LJ_INFO_NUMBER, 51);

	ck_assert_str_eq(reason(&k), "NYI: bytecode FNEW");
	k.info = 50;
	ck_assert_str_eq(reason(&k), "NYI: bytecode UCLO");
	k.info = vmindex(nupp_vmdef_bcnames, NUPP_VMDEF_BCNAMES_N, "VARG");
	ck_assert_str_eq(reason(&k), "NYI: bytecode VARG");
	k.info = NUPP_VMDEF_BCNAMES_N; /* out of range: the number, as jit.v */
	ck_assert_str_eq(reason(&k), "NYI: bytecode 97");
}
END_TEST

START_TEST(reason_nyiir_names_the_ir_op)
{
	struct nupp_trace_key k = key(NUPP_TRERR_NYIIR, NUPP_LJ_INFO_NUMBER, 0);

	k.info = vmindex(nupp_vmdef_irnames, NUPP_VMDEF_IRNAMES_N, "CALLXS");
	ck_assert_int_ge((int)k.info, 0);
	ck_assert_str_eq(reason(&k), "NYI: cannot assemble IR instruction CALLXS");
	k.info = 0;
	ck_assert_str_eq(reason(&k), "NYI: cannot assemble IR instruction LT");
}
END_TEST

/* A fast function is named by the numbering of its VM's branch: luajit2 inserts its own
 * (table.clone, table.isarray ...) before others, so one id names different functions
 * on the two. */
START_TEST(reason_ffid_by_branch)
{
	struct nupp_trace_key k = key(NUPP_TRERR_NYIFFU, NUPP_LJ_INFO_FFID, 0);
	char buf[256];
	int id2 = vmindex(nupp_vmdef_luajit2_ffnames, NUPP_VMDEF_LUAJIT2_FFNAMES_N, "table.new");

	ck_assert_int_gt(id2, 1);
	ck_assert_int_ne(vmindex(nupp_vmdef_ffnames, NUPP_VMDEF_FFNAMES_N, "table.new"), id2);
	ck_assert_int_eq(vmindex(nupp_vmdef_ffnames, NUPP_VMDEF_FFNAMES_N, "table.isarray"), -1);
	k.info = (__u64)id2;
	nupp_trace_format_reason(&k, NUPP_LJ_BRANCH_LUAJIT2, buf, sizeof(buf));
	ck_assert_str_eq(buf, "NYI: unsupported variant of FastFunc table.new");
	k.info = (__u64)vmindex(nupp_vmdef_luajit2_ffnames, NUPP_VMDEF_LUAJIT2_FFNAMES_N, "os.clock");
	ck_assert_uint_ne(k.info, (__u64)vmindex(nupp_vmdef_ffnames, NUPP_VMDEF_FFNAMES_N, "os.clock"));
	nupp_trace_format_reason(&k, NUPP_LJ_BRANCH_LUAJIT2, buf, sizeof(buf));
	ck_assert_str_eq(buf, "NYI: unsupported variant of FastFunc os.clock");
	k.info = (__u64)vmindex(nupp_vmdef_ffnames, NUPP_VMDEF_FFNAMES_N, "os.clock");
	nupp_trace_format_reason(&k, NUPP_LJ_BRANCH_LUAJIT, buf, sizeof(buf));
	ck_assert_str_eq(buf, "NYI: unsupported variant of FastFunc os.clock");
	nupp_trace_format_reason(&k, 0xff, buf, sizeof(buf)); /* a branch not known: no guess */
	ck_assert_str_eq(buf, "NYI: unsupported variant of FastFunc (?)");
}
END_TEST

START_TEST(reason_nyiffu_like_fmtfunc)
{
	struct nupp_trace_key k = key(NUPP_TRERR_NYIFFU, NUPP_LJ_INFO_FFID, 0);

	k.info = vmindex(nupp_vmdef_ffnames, NUPP_VMDEF_FFNAMES_N, "ffi.typeof");
	ck_assert_int_gt((int)k.info, 1);
	ck_assert_str_eq(reason(&k), "NYI: unsupported variant of FastFunc ffi.typeof");
	k = key(NUPP_TRERR_NYIFFU, NUPP_LJ_INFO_CFUNC, 0x7f12ab34cd50ull);
	ck_assert_str_eq(reason(&k), "NYI: unsupported variant of FastFunc C:7f12ab34cd50");
	k = key(NUPP_TRERR_NYIFFU, NUPP_LJ_INFO_LUAFUNC, 0);
	k.aux = loc('@', "mod.lua", 7);
	ck_assert_str_eq(reason(&k), "NYI: unsupported variant of FastFunc mod.lua:7");
	k = key(NUPP_TRERR_NYIFFU, NUPP_LJ_INFO_NUMBER, 12); /* format("%s", 12) */
	ck_assert_str_eq(reason(&k), "NYI: unsupported variant of FastFunc 12");
}
END_TEST

START_TEST(reason_plain_messages_and_errors)
{
	struct nupp_trace_key k = key(NUPP_TRERR_LLEAVE, NUPP_LJ_INFO_NONE, 0);
	int e;

	ck_assert_str_eq(reason(&k), "leaving loop in root trace");
	k = key(NUPP_TRERR_RECERR, NUPP_LJ_INFO_NONE, 0);
	ck_assert_str_eq(reason(&k), "error thrown or hook called during recording");
	k = key(NUPP_TRERR_RECERR, NUPP_LJ_INFO_ERRSTR, 0);
	k.aux = loc('"', "not enough memory", 0);
	ck_assert_str_eq(reason(&k), "not enough memory");
	k = key(99, NUPP_LJ_INFO_NONE, 0);
	ck_assert_str_eq(reason(&k), "trace error 99");
	for (e = 0; e < NUPP_TRERR__MAX; e++) { /* every message without a %: verbatim */
		k = key(e, NUPP_LJ_INFO_NONE, 0);
		if (!strchr(nupp_vmdef_traceerr[e], '%'))
			ck_assert_str_eq(reason(&k), nupp_vmdef_traceerr[e]);
	}
}
END_TEST

START_TEST(reason_reports_the_full_length)
{
	struct nupp_trace_key k = key(NUPP_TRERR_NYIBC, NUPP_LJ_INFO_NUMBER, 51);
	char small[8];

	ck_assert_int_eq(nupp_trace_format_reason(&k, NUPP_LJ_BRANCH_LUAJIT, small, sizeof(small)), 18);
	ck_assert_str_eq(small, "NYI: by");
}
END_TEST

START_TEST(location_kinds)
{
	struct nupp_trace_loc l;
	char buf[256];

	l = loc('@', "file.lua", 12);
	nupp_trace_format_loc(&l, buf, sizeof(buf));
	ck_assert_str_eq(buf, "file.lua:12");
	l = loc('=', "named chunk", 3);
	nupp_trace_format_loc(&l, buf, sizeof(buf));
	ck_assert_str_eq(buf, "named chunk:3");
	l = loc('"', "a, \"q\"\nz", 1);
	nupp_trace_format_loc(&l, buf, sizeof(buf));
	ck_assert_str_eq(buf, "\"a, \"q\"\nz\":1");
	l = loc('b', "print", 0);
	nupp_trace_format_loc(&l, buf, sizeof(buf));
	ck_assert_str_eq(buf, "builtin:print");
	l = loc('p', "", 5);
	l.pt = 0x55d0c0ffee10ull;
	nupp_trace_format_loc(&l, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0x55d0c0ffee10:5");
	l.pt = 0x100000000ull; /* lj_strfmt_wptr: 8 digits + 2 per byte above bit 31 */
	nupp_trace_format_loc(&l, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0x0100000000:5");
	l.pt = 0x1234;
	nupp_trace_format_loc(&l, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0x00001234:5");
	l = loc('@', "a\0b.lua", 4); /* %s stops at a NUL, as lj_strfmt_pushf */
	l.namelen = 7;
	nupp_trace_format_loc(&l, buf, sizeof(buf));
	ck_assert_str_eq(buf, "a:4");
	l = loc(0, "", 0);
	ck_assert_int_eq(nupp_trace_format_loc(&l, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "");
}
END_TEST

/* Rows with every character RFC 4180 cares about. */
static const struct {
	enum nupp_severity sev;
	__u64 count;
	const char *reason, *loc, *zone;
} tricky[] = {
	{ NUPP_SEV_INFO, 900, "leaving loop in root trace", "x.lua:1", "" },
	{ NUPP_SEV_WARN, 7, "NYI: bytecode FNEW", "\"a, \"q\"\nz\":1", "frame/render" },
	{ NUPP_SEV_BLACKLIST, 1, "comma, here", "cr\rhere:2", "crlf\r\nzone" },
	{ NUPP_SEV_WARN, 30, "\"quoted\"", " lead and trail ", "z,\"" },
	{ NUPP_SEV_WARN, 7, "", "", "" },
	{ NUPP_SEV_BLACKLIST, 2, "plain", "utf8 \xc3\xa9.lua:9", "" },
};
#define NTRICKY (sizeof(tricky) / sizeof(tricky[0]))

/* The set of tricky rows, sorted. */
static void tricky_set(struct nupp_abort_set *a)
{
	size_t i;

	memset(a, 0, sizeof(*a));
	for (i = 0; i < NTRICKY; i++)
		ck_assert_int_eq(nupp_abort_set_add(a, tricky[i].sev, tricky[i].reason, tricky[i].loc,
						    tricky[i].zone, tricky[i].count), 0);
	nupp_abort_set_sort(a);
}

START_TEST(csv_order_and_bytes)
{
	struct nupp_abort_set a;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	tricky_set(&a);
	/* blacklist, warn, info; count descending inside; ties by location. */
	ck_assert_uint_eq(a.rows[0].count, 2);
	ck_assert_uint_eq(a.rows[1].count, 1);
	ck_assert_uint_eq(a.rows[2].count, 30);
	ck_assert_str_eq(a.rows[3].location, "");
	ck_assert_str_eq(a.rows[4].location, "\"a, \"q\"\nz\":1");
	ck_assert_uint_eq(a.rows[5].severity, NUPP_SEV_INFO);
	f = open_memstream(&buf, &len);
	ck_assert_int_eq(nupp_write_abort_csv(&a, f), 0);
	fclose(f);
	ck_assert_str_eq(buf, "severity,count,reason,location,zonePath\r\n"
			      "blacklist,2,plain,utf8 \xc3\xa9.lua:9,\r\n"
			      "blacklist,1,\"comma, here\",\"cr\rhere:2\",\"crlf\r\nzone\"\r\n"
			      "warn,30,\"\"\"quoted\"\"\", lead and trail ,\"z,\"\"\"\r\n"
			      "warn,7,,,\r\n"
			      "warn,7,NYI: bytecode FNEW,\"\"\"a, \"\"q\"\"\nz\"\":1\",frame/render\r\n"
			      "info,900,leaving loop in root trace,x.lua:1,\r\n");
	free(buf);
	nupp_abort_set_free(&a);
}
END_TEST

START_TEST(csv_read_back_by_python)
{
	char path[] = "/tmp/nupp-csv-XXXXXX", cmd[512];
	struct nupp_abort_set a;
	json_error_t jerr;
	json_t *rows;
	FILE *f, *p;
	size_t i;
	int fd;

	if (access("/usr/bin/python3", X_OK) != 0) {
		printf("SKIP: python3 is needed to read the CSV back\n");
		exit(77);
	}
	tricky_set(&a);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "wb");
	ck_assert_int_eq(nupp_write_abort_csv(&a, f), 0);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 -c 'import csv, json, sys; "
		 "json.dump(list(csv.reader(open(sys.argv[1], newline=\"\", encoding=\"utf-8\"), strict=True)), sys.stdout)' %s",
		 path);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	rows = json_loadf(p, 0, &jerr);
	ck_assert_int_eq(pclose(p), 0);
	unlink(path);
	ck_assert_msg(rows, "python output is not JSON: %s", jerr.text);
	ck_assert_uint_eq(json_array_size(rows), a.n + 1);
	ck_assert_str_eq(json_string_value(json_array_get(json_array_get(rows, 0), 4)), "zonePath");
	for (i = 0; i < a.n; i++) {
		json_t *r = json_array_get(rows, i + 1);
		char count[32];

		ck_assert_uint_eq(json_array_size(r), 5);
		snprintf(count, sizeof(count), "%llu", (unsigned long long)a.rows[i].count);
		ck_assert_str_eq(json_string_value(json_array_get(r, 0)), nupp_severity_name(a.rows[i].severity));
		ck_assert_str_eq(json_string_value(json_array_get(r, 1)), count);
		ck_assert_str_eq(json_string_value(json_array_get(r, 2)), a.rows[i].reason);
		ck_assert_str_eq(json_string_value(json_array_get(r, 3)), a.rows[i].location);
		ck_assert_str_eq(json_string_value(json_array_get(r, 4)), a.rows[i].zone_path);
	}
	json_decref(rows);
	nupp_abort_set_free(&a);
}
END_TEST

NUPP_CHECK_MAIN("trace_format", 0, false, false,
		reason_nyibc_names_the_opcode,
		reason_nyiir_names_the_ir_op,
		reason_nyiffu_like_fmtfunc,
		reason_ffid_by_branch,
		reason_plain_messages_and_errors,
		reason_reports_the_full_length,
		location_kinds,
		csv_order_and_bytes,
		csv_read_back_by_python)
