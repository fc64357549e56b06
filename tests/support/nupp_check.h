/* The one main() of nupp-bpf's libcheck tests: a suite of named tests, a timeout, and
 * the root check for tests that load BPF. */
#ifndef NUPP_CHECK_H
#define NUPP_CHECK_H

#include <check.h>
#include <stdbool.h>

#include "nupp_test.h"

/* Runs tests[0..n) as one suite; returns the process exit status (0 all passed). */
static inline int nupp_check_run(const char *name, const TTest *const *tests, size_t n, int timeout_s,
				 bool need_root, bool nofork)
{
	Suite *su = suite_create(name);
	TCase *tc = tcase_create(name);
	SRunner *sr;
	size_t i;
	int failed;

	if (need_root)
		nupp_test_need_root();
	if (timeout_s)
		tcase_set_timeout(tc, timeout_s);
	for (i = 0; i < n; i++)
		tcase_add_test(tc, tests[i]);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	if (nofork)
		srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

/* Defines main() running the listed START_TEST names. */
#define NUPP_CHECK_MAIN(name, timeout_s, need_root, nofork, ...)                                       \
	int main(void)                                                                                 \
	{                                                                                              \
		const TTest *const nupp_tests_[] = { __VA_ARGS__ };                                    \
		return nupp_check_run(name, nupp_tests_, sizeof(nupp_tests_) / sizeof(nupp_tests_[0]), \
				      timeout_s, need_root, nofork);                                   \
	}

#endif /* NUPP_CHECK_H */
