/* Doctor: tries each piece record needs (privileges, kernel features, a target's LuaJIT)
 * and says, per check, what was found and what to do.
 *
 * This file owns the entry points (nupp_doctor_run, nupp_doctor_blocker) and the verdict
 * for in-process sessions (nupp_doctor_verdict, nupp_available: the machine checks cached
 * per user and capabilities, and the message), and the small readers the checks share.
 * The checks are doctor_machine.c and doctor_target.c, their results doctor_render.c. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "nupp/doctor.h"
#include "nupp_internal.h"
#include "doctor_priv.h"

/* -- Small readers -------------------------------------------------------------- */

/* Reads a small text file into buf (trailing newline cut); 0 or -errno. */
int doctor_read_text(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = 0;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

/* Reads an integer sysctl under /proc/sys; the value or def when unreadable. */
long doctor_sysctl(const char *path, long def)
{
	char buf[64];

	return doctor_read_text(path, buf, sizeof(buf)) ? def : strtol(buf, NULL, 10);
}

/* -- Entry points --------------------------------------------------------------- */

/* Runs every check into out[]. */
int nupp_doctor_run(const struct nupp_doctor_opts *opts, struct nupp_check *out, int max)
{
	struct doctor *d;
	pid_t pid = opts && opts->sz >= offsetof(struct nupp_doctor_opts, pid) + sizeof(pid_t) ? opts->pid : 0;
	bool quick = opts && opts->sz >= offsetof(struct nupp_doctor_opts, quick) + sizeof(bool) && opts->quick;
	int n = pid > 0 ? NUPP_CHECK__MAX : NUPP_CHECK_PROCESS, i;

	if (pid < 0 || max < n)
		return nupp_fail(-EINVAL, "nupp_doctor_run: %s", pid < 0 ? "invalid PID" : "out[] is too small");
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	doctor_machine(d, quick);
	if (pid > 0)
		doctor_target(d, pid);
	for (i = 0; i < n; i++)
		out[i] = d->c[i];
	free(d);
	return n;
}

/* The first check that makes record fail, or NULL. */
const struct nupp_check *nupp_doctor_blocker(const struct nupp_check *out, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (out[i].status == NUPP_CHECK_FAIL)
			return &out[i];
	return NULL;
}

/* Silences libbpf while the verdict tries things in a host process. */
static int doctor_libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

/* The machine checks of the last verdict, kept for as long as this process has the same
 * effective user and capabilities (what they depend on that can change under it). */
static struct {
	pthread_mutex_t lock;
	bool valid;
	uid_t euid;
	unsigned long long capeff;
	struct nupp_check c[NUPP_CHECK_PROCESS];
	pid_t self_ok; /* this process passed the target checks (a process's LuaJIT stays) */
} doctor_cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The machine checks, tried once per effective user and capability set (the verdict
 * mode: a uprobe is created, not fired; record's own programs are not loaded). */
static void doctor_machine_cached(struct doctor *d)
{
	unsigned long long capeff = doctor_capeff();
	uid_t euid = geteuid();
	libbpf_print_fn_t old;

	if (doctor_cache.valid && doctor_cache.euid == euid && doctor_cache.capeff == capeff) {
		memcpy(d->c, doctor_cache.c, sizeof(doctor_cache.c));
		d->capeff = capeff;
		return;
	}
	d->verdict = true;
	old = libbpf_set_print(doctor_libbpf_quiet);
	doctor_machine(d, true);
	libbpf_set_print(old);
	memcpy(doctor_cache.c, d->c, sizeof(doctor_cache.c));
	doctor_cache.euid = euid;
	doctor_cache.capeff = capeff;
	doctor_cache.valid = true;
	doctor_cache.self_ok = 0;
}

/* The verdict when capabilities are missing: every one of them at once, what each is
 * for (CAP_SYS_ADMIN as the uprobe check found it), and how to grant them. -EPERM. */
static int doctor_missing_caps(const struct doctor *d, char *why, size_t size)
{
	static const struct {
		enum nupp_check_id id;
		const char *what;
	} caps[] = {
		{ NUPP_CHECK_CAP_BPF, "to load BPF programs and maps" },
		{ NUPP_CHECK_CAP_PERFMON, "to open CPU-clock perf events and tracing programs" },
		{ NUPP_CHECK_CAP_SYS_PTRACE, "to read another process's memory" },
		{ NUPP_CHECK_CAP_SYS_ADMIN, "to create uprobes, which kernels like this one want it for" },
	};
	const struct nupp_check *sa = &d->c[NUPP_CHECK_CAP_SYS_ADMIN];
	char list[1024] = "", found[sizeof(sa->detail)], *paren;
	size_t i;

	for (i = 0; i < NUPP_ARRAY_SIZE(caps); i++) {
		const struct nupp_check *c = &d->c[caps[i].id];
		const char *what = caps[i].what;

		if (c->status != NUPP_CHECK_FAIL &&
		    !(c == sa && c->status == NUPP_CHECK_SKIP && !strncmp(c->detail, "missing", 7)))
			continue;
		/* "missing, and this kernel wants it for uprobes (creating ... fails: ...)" reads
		 * "this kernel wants it for uprobes: creating ... fails: ..." in the list. */
		if (c == sa && c->status == NUPP_CHECK_FAIL && !strncmp(c->detail, "missing, and ", 13)) {
			snprintf(found, sizeof(found), "%s", c->detail + 13);
			paren = strstr(found, " (");
			if (paren && found[strlen(found) - 1] == ')') {
				found[strlen(found) - 1] = 0;
				paren[0] = ':';
				paren[1] = ' ';
			}
			what = found;
		}
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s (%s)", list[0] ? ", " : "", c->name,
			 what);
	}
	nupp_fail(-EPERM,
		  "missing %s: run as root (sudo), or grant CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE and CAP_SYS_ADMIN to "
		  "the program (sudo setcap cap_bpf,cap_perfmon,cap_sys_ptrace,cap_sys_admin+ep PROGRAM, or "
		  "AmbientCapabilities= in its systemd unit)",
		  list);
	if (size)
		snprintf(why, size, "%s", nupp_errmsg());
	return -EPERM;
}

/* Whether BPF sessions can run here, for process pid. */
int nupp_doctor_verdict(int pid, char *why, size_t size)
{
	pid_t self = getpid(), target = pid == 0 ? self : pid;
	const struct nupp_check *b;
	struct doctor *d;
	int n = pid < 0 ? NUPP_CHECK_PROCESS : NUPP_CHECK__MAX, err;

	if (size)
		why[0] = 0;
	d = calloc(1, sizeof(*d));
	if (!d)
		return nupp_fail(-ENOMEM, "out of memory");
	pthread_mutex_lock(&doctor_cache.lock);
	doctor_machine_cached(d);
	/* Our own memory is ours to read: CAP_SYS_PTRACE is for other processes. */
	if (target == self && d->c[NUPP_CHECK_CAP_SYS_PTRACE].status == NUPP_CHECK_FAIL)
		doctor_set(d, NUPP_CHECK_CAP_SYS_PTRACE, NUPP_CHECK_NOTE, 0,
			   "missing, and not needed to profile this process itself");
	/* The first blocker is the answer: the process is looked at only if none is found. */
	if (pid < 0 || nupp_doctor_blocker(d->c, NUPP_CHECK_PROCESS) || (doctor_cache.self_ok == self && target == self))
		n = NUPP_CHECK_PROCESS;
	else
		doctor_target(d, target);
	b = nupp_doctor_blocker(d->c, n);
	if (!b && pid >= 0 && target == self)
		doctor_cache.self_ok = self;
	pthread_mutex_unlock(&doctor_cache.lock);
	if (!b) {
		free(d);
		return 0;
	}
	switch (b->id) {
	case NUPP_CHECK_CAP_BPF:
	case NUPP_CHECK_CAP_PERFMON:
	case NUPP_CHECK_CAP_SYS_PTRACE:
	case NUPP_CHECK_CAP_SYS_ADMIN:
		err = doctor_missing_caps(d, why, size);
		free(d);
		return err;
	case NUPP_CHECK_PROCESS:
		err = b->err == -ESRCH ? -ESRCH : -EPERM;
		break;
	case NUPP_CHECK_LUAJIT:
	case NUPP_CHECK_VMS:
		err = -ENOENT;
		break;
	default:
		err = b->err == -EPERM || b->err == -EACCES ? -EPERM : -ENOTSUP;
		break;
	}
	nupp_fail(err, "%s: %s%s%s%s", b->name, b->detail, b->remedy[0] ? " (" : "", b->remedy, b->remedy[0] ? ")" : "");
	if (size)
		snprintf(why, size, "%s", nupp_errmsg());
	free(d);
	return err;
}

/* Whether the BPF channels can run here: the doctor's verdict (include/nupp/nupp.h). */
int nupp_available(int pid, char *why, size_t size)
{
	return nupp_doctor_verdict(pid, why, size);
}
