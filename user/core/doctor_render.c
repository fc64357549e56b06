/* The doctor's results: each check's name and status name, and how a check writes its
 * status, detail line and remedy. Runs no check and reads nothing of the machine or the
 * target. */
#include <stdarg.h>
#include <stdio.h>

#include "nupp_internal.h"
#include "doctor_priv.h"

static const char *const doctor_names[NUPP_CHECK__MAX] = {
	[NUPP_CHECK_USER] = "user",
	[NUPP_CHECK_CAP_BPF] = "CAP_BPF",
	[NUPP_CHECK_CAP_PERFMON] = "CAP_PERFMON",
	[NUPP_CHECK_CAP_SYS_PTRACE] = "CAP_SYS_PTRACE",
	[NUPP_CHECK_CAP_SYS_ADMIN] = "CAP_SYS_ADMIN",
	[NUPP_CHECK_BTF] = "kernel BTF",
	[NUPP_CHECK_BPF] = "BPF programs",
	[NUPP_CHECK_PERF] = "perf events",
	[NUPP_CHECK_UPROBES] = "uprobes",
	[NUPP_CHECK_BPFFS] = "bpffs",
	[NUPP_CHECK_TRACEFS] = "tracefs",
	[NUPP_CHECK_MEMLOCK] = "locked memory",
	[NUPP_CHECK_CHANNELS] = "record's programs",
	[NUPP_CHECK_PROCESS] = "process",
	[NUPP_CHECK_LUAJIT] = "LuaJIT",
	[NUPP_CHECK_BUILD] = "nupp-bpf build",
	[NUPP_CHECK_PROBES] = "USDT probes",
	[NUPP_CHECK_GC64] = "GC64",
	[NUPP_CHECK_VMS] = "Lua VMs",
	[NUPP_CHECK_BINARY] = "binary",
};

/* "ok", "note", "warn", "FAIL" or "skip". */
const char *nupp_check_status_name(enum nupp_check_status s)
{
	switch (s) {
	case NUPP_CHECK_OK:
		return "ok";
	case NUPP_CHECK_NOTE:
		return "note";
	case NUPP_CHECK_WARN:
		return "warn";
	case NUPP_CHECK_FAIL:
		return "FAIL";
	case NUPP_CHECK_SKIP:
		return "skip";
	}
	return "?";
}

/* Sets a check's status, error and detail line. */
void __attribute__((format(printf, 5, 6)))
doctor_set(struct doctor *d, enum nupp_check_id id, enum nupp_check_status st, int err, const char *fmt, ...)
{
	struct nupp_check *c = &d->c[id];
	va_list ap;

	c->id = id;
	c->name = doctor_names[id];
	c->status = st;
	c->err = err;
	va_start(ap, fmt);
	vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
	va_end(ap);
}

/* Sets a check's remedy. */
void __attribute__((format(printf, 3, 4))) doctor_remedy(struct doctor *d, enum nupp_check_id id, const char *fmt,
								...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->c[id].remedy, sizeof(d->c[id].remedy), fmt, ap);
	va_end(ap);
}

/* True if the check worked (ok or note). */
bool doctor_ok(const struct doctor *d, enum nupp_check_id id)
{
	return d->c[id].status == NUPP_CHECK_OK || d->c[id].status == NUPP_CHECK_NOTE ||
	       d->c[id].status == NUPP_CHECK_WARN;
}
