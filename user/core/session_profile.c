/* Reading a stopped session's profile: its rows, aborts and totals, for the bindings. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "session_priv.h"

/* -- Reading a profile ------------------------------------------------------------ */

size_t nupp_profile_nsamples(const struct nupp_profile *p)
{
	return p ? p->samples.n : 0;
}

/* Sample row i. */
const char *nupp_profile_sample(const struct nupp_profile *p, size_t i, const char **zone_path, int *pid,
				unsigned long long counts[6])
{
	const struct nupp_sample_row *r;

	if (!p || i >= p->samples.n)
		return NULL;
	r = &p->samples.rows[i];
	*zone_path = r->zone_path;
	*pid = (int)r->pid;
	counts[0] = r->count;
	counts[1] = r->compiled;
	counts[2] = r->interpreted;
	counts[3] = r->ccode;
	counts[4] = r->collecting;
	counts[5] = r->compiling;
	return r->stack;
}

size_t nupp_profile_naborts(const struct nupp_profile *p)
{
	return p ? p->aborts.n : 0;
}

/* Abort row i. */
const char *nupp_profile_abort(const struct nupp_profile *p, size_t i, const char **severity,
			       unsigned long long *count, const char **location, const char **zone_path)
{
	const struct nupp_abort_row *r;

	if (!p || i >= p->aborts.n)
		return NULL;
	r = &p->aborts.rows[i];
	*severity = nupp_severity_name(r->severity);
	*count = r->count;
	*location = r->location;
	*zone_path = r->zone_path;
	return r->reason;
}

/* Totals: samples, aborts, blacklisted, then the losses by reason. */
void nupp_profile_totals(const struct nupp_profile *p, unsigned long long totals[9])
{
	int j;

	totals[0] = p->samples.samples;
	totals[1] = p->aborts.total_aborts;
	totals[2] = p->aborts.blacklisted;
	for (j = 0; j < NUPP_LOST__MAX && j < 6; j++)
		totals[3 + j] = p->samples.lost[j];
}
