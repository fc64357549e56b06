/* The --why view of `report` and `record`: the hottest code that ran interpreted,
 * joined with the trace aborts that explain it (the join is user/compare/why.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nupp/nupp.h"
#include "nupp/why.h"
#include "cli.h"

/* Prints the explanation of p on f, as text or JSON; 0, or 1 after printing the error. */
int cli_why(const struct nupp_profile *p, bool json, FILE *f)
{
	struct nupp_why_opts o = { .sz = sizeof(o), .lines = p->meta.lines };
	struct nupp_why *w = NULL;
	int err = nupp_why_compute(p, &o, &w);

	if (!err)
		err = json ? nupp_why_write_json(w, f) : nupp_why_write_text(w, f);
	if (!err && fflush(f))
		err = -errno;
	nupp_why_free(w);
	if (err) {
		cli_error("cannot explain the profile: %s", strerror(-err));
		return 1;
	}
	return 0;
}
