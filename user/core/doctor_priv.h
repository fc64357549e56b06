/* What the parts of the doctor share, and nothing outside them includes
 * (user/core/doctor*.c): what the checks learn and later checks use, how a check's result
 * is set, the small readers the checks use, and the two groups of checks. The API is
 * include/nupp/doctor.h. */
#ifndef NUPP_DOCTOR_PRIV_H
#define NUPP_DOCTOR_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "nupp/doctor.h"

struct doctor_bpf;

/* What the checks learn and later checks use. */
struct doctor {
	struct nupp_check c[NUPP_CHECK__MAX];
	unsigned long long capeff;
	struct doctor_bpf *skel; /* loaded, or NULL */
	int bpf_err;
	int uprobe_err;          /* 0 fired; -errno of the failed step */
	const char *uprobe_step; /* which step failed */
	bool verdict;            /* for nupp_doctor_verdict: a uprobe is created, not fired */
};

/* -- Results (doctor_render.c) ---------------------------------------------------------- */

/* Sets a check's status, error and detail line. */
void __attribute__((format(printf, 5, 6)))
doctor_set(struct doctor *d, enum nupp_check_id id, enum nupp_check_status st, int err, const char *fmt, ...);
/* Sets a check's remedy. */
void __attribute__((format(printf, 3, 4))) doctor_remedy(struct doctor *d, enum nupp_check_id id, const char *fmt,
							 ...);
/* True if the check worked (ok, note or warn). */
bool doctor_ok(const struct doctor *d, enum nupp_check_id id);

/* -- Small readers (doctor.c) ----------------------------------------------------------- */

/* Reads a small text file into buf (trailing newline cut); 0 or -errno. */
int doctor_read_text(const char *path, char *buf, size_t size);
/* Reads an integer sysctl under /proc/sys; the value or def when unreadable. */
long doctor_sysctl(const char *path, long def);

/* -- The checks ------------------------------------------------------------------------- */

/* The effective capability set of this thread (doctor_machine.c). */
unsigned long long doctor_capeff(void);
/* The checks of the machine and our privileges (NUPP_CHECK_USER .. NUPP_CHECK_CHANNELS;
 * doctor_machine.c). */
void doctor_machine(struct doctor *d, bool quick);
/* The checks of a target process: LuaJIT, our build, probes, GC64, VMs, its binary
 * (doctor_target.c). */
void doctor_target(struct doctor *d, pid_t pid);

#endif
