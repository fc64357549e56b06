/* Severity of every TraceError code (include/nupp/severity.h), and the action override. */
#include <check.h>

#include "nupp_check.h"

#include "nupp/profile.h"
#include "nupp/severity.h"

#define W NUPP_TRACE_SEV_WARN
#define I NUPP_TRACE_SEV_INFO

/* Every code of lj_traceerr.h, its expected class and whether its message takes info. */
static const struct {
	int err;
	int sev;
	int info;
} expect[] = {
	{ NUPP_TRERR_RECERR, W, 0 },  { NUPP_TRERR_TRACEUV, I, 0 }, { NUPP_TRERR_TRACEOV, W, 0 },
	{ NUPP_TRERR_STACKOV, W, 0 }, { NUPP_TRERR_SNAPOV, W, 0 },  { NUPP_TRERR_BLACKL, W, 0 },
	{ NUPP_TRERR_RETRY, I, 0 },   { NUPP_TRERR_NYIBC, W, 1 },   { NUPP_TRERR_LLEAVE, I, 0 },
	{ NUPP_TRERR_LINNER, I, 0 },  { NUPP_TRERR_LUNROLL, I, 0 }, { NUPP_TRERR_BADTYPE, W, 0 },
	{ NUPP_TRERR_CJITOFF, W, 0 }, { NUPP_TRERR_CUNROLL, I, 0 }, { NUPP_TRERR_DOWNREC, I, 0 },
	{ NUPP_TRERR_NYIFFU, W, 1 },  { NUPP_TRERR_NYIRETL, W, 0 }, { NUPP_TRERR_STORENN, W, 0 },
	{ NUPP_TRERR_NOMM, W, 0 },    { NUPP_TRERR_IDXLOOP, W, 0 }, { NUPP_TRERR_NYITMIX, W, 0 },
	{ NUPP_TRERR_NOCACHE, W, 0 }, { NUPP_TRERR_NYICONV, W, 0 }, { NUPP_TRERR_NYICALL, W, 0 },
	{ NUPP_TRERR_GFAIL, W, 0 },   { NUPP_TRERR_PHIOV, W, 0 },   { NUPP_TRERR_TYPEINS, W, 0 },
	{ NUPP_TRERR_MCODEAL, W, 0 }, { NUPP_TRERR_MCODEOV, W, 0 }, { NUPP_TRERR_MCODELM, W, 0 },
	{ NUPP_TRERR_SPILLOV, W, 0 }, { NUPP_TRERR_BADRA, W, 0 },   { NUPP_TRERR_NYIIR, W, 1 },
	{ NUPP_TRERR_NYIPHI, W, 0 },  { NUPP_TRERR_NYICOAL, W, 0 },
};
#define NEXPECT ((int)(sizeof(expect) / sizeof(expect[0])))

START_TEST(severity_table_covers_every_code_once)
{
	int seen[NUPP_TRERR__MAX] = { 0 }, i;

	ck_assert_int_eq(NUPP_TRERR__MAX, 35);
	ck_assert_int_eq(NEXPECT, NUPP_TRERR__MAX);
	for (i = 0; i < NEXPECT; i++) {
		ck_assert_int_lt(expect[i].err, NUPP_TRERR__MAX);
		seen[expect[i].err]++;
	}
	for (i = 0; i < NUPP_TRERR__MAX; i++)
		ck_assert_msg(seen[i] == 1, "code %d listed %d times", i, seen[i]);
}
END_TEST

START_TEST(severity_of_every_code_without_blacklisting)
{
	static const __u32 actions[] = { NUPP_LJ_ACT_NONE, NUPP_LJ_ACT_PENALTY, NUPP_LJ_ACT_RETRY };
	int i, a;

	for (i = 0; i < NEXPECT; i++) {
		ck_assert_int_eq(nupp_severity_benign(expect[i].err), expect[i].sev == I);
		ck_assert_int_eq(nupp_severity_takes_info(expect[i].err), expect[i].info);
		for (a = 0; a < 3; a++)
			ck_assert_msg(nupp_severity_of(expect[i].err, actions[a]) == expect[i].sev,
				      "code %d action %u: got %d, want %d", expect[i].err, actions[a],
				      nupp_severity_of(expect[i].err, actions[a]), expect[i].sev);
	}
}
END_TEST

START_TEST(severity_blacklist_action_wins_for_every_code)
{
	int i;

	for (i = 0; i < NEXPECT; i++) {
		ck_assert_int_eq(nupp_severity_of(expect[i].err, NUPP_LJ_ACT_BLACKLIST), NUPP_TRACE_SEV_BLACKLIST);
		ck_assert_int_eq(nupp_severity_of(expect[i].err, NUPP_LJ_ACT_STITCHBL), NUPP_TRACE_SEV_BLACKLIST);
	}
}
END_TEST

START_TEST(severity_values_and_names)
{
	ck_assert_int_eq(NUPP_TRACE_SEV_BLACKLIST, NUPP_SEV_BLACKLIST);
	ck_assert_int_eq(NUPP_TRACE_SEV_WARN, NUPP_SEV_WARN);
	ck_assert_int_eq(NUPP_TRACE_SEV_INFO, NUPP_SEV_INFO);
	ck_assert_str_eq(nupp_severity_name(NUPP_SEV_BLACKLIST), "blacklist");
	ck_assert_str_eq(nupp_severity_name(NUPP_SEV_WARN), "warn");
	ck_assert_str_eq(nupp_severity_name(NUPP_SEV_INFO), "info");
	/* Out of range codes (never from LuaJIT) are refusals, never benign. */
	ck_assert_int_eq(nupp_severity_of(-1, NUPP_LJ_ACT_PENALTY), NUPP_TRACE_SEV_WARN);
	ck_assert_int_eq(nupp_severity_of(NUPP_TRERR__MAX, NUPP_LJ_ACT_PENALTY), NUPP_TRACE_SEV_WARN);
	ck_assert_int_eq(nupp_severity_takes_info(-1), 0);
	ck_assert_int_eq(nupp_severity_takes_info(64), 0);
}
END_TEST

NUPP_CHECK_MAIN("trace_severity", 0, false, false,
		severity_table_covers_every_code_once,
		severity_of_every_code_without_blacklisting,
		severity_blacklist_action_wins_for_every_code,
		severity_values_and_names)
