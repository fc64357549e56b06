/* A session's processes: attaching one (its binary, its probes, its VMs' zone slots),
 * following forks and execs from the follower's events, and reclaiming the entries of
 * processes gone. It drains nothing: session_drain.c does. */
#include <dirent.h>
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
#include "zones_internal.h"
#include "follow.skel.h"

/* -- Targets ------------------------------------------------------------------- */

/* Frees the slots of the processes gone whose samples are all in the aggregate: they
 * exited before the last drain began, which emptied the buffer they counted into. Their
 * pids stay in meta.pids. */
static void ses_reclaim(struct nupp_session *s)
{
	int i = 0;

	while (i < s->nt) {
		struct ses_target *t = &s->t[i];

		if (!t->exited || t->exited >= s->drained) {
			i++;
			continue;
		}
		if (s->smp)
			nupp_smp_remove_pid(s->smp, t->pid);
		if (s->tr)
			nupp_trace_set_vmlist(s->tr, t->pid, 0);
		nupp_zones_forget(s->zones, t->pid);
		*t = s->t[--s->nt];
	}
}

/* The target entry of pid, created if asked; NULL when full or absent. */
struct ses_target *ses_target(struct nupp_session *s, pid_t pid, bool create)
{
	int i;

	for (i = 0; i < s->nt; i++)
		if (s->t[i].pid == pid)
			return &s->t[i];
	if (!create)
		return NULL;
	if (s->nt == SES_MAX_TARGETS)
		ses_reclaim(s);
	if (s->nt == SES_MAX_TARGETS) {
		s->unattached++;
		nupp_fail(-ENOSPC, "too many processes in one session (%d at once)", SES_MAX_TARGETS);
		return NULL;
	}
	memset(&s->t[s->nt], 0, sizeof(s->t[0]));
	s->t[s->nt].pid = pid;
	return &s->t[s->nt++];
}

/* Lists pid in meta.pids once. */
static void ses_count_pid(struct nupp_session *s, struct ses_target *t)
{
	if (t->counted || s->npids == SES_MAX_PIDS)
		return;
	t->counted = true;
	s->pids[s->npids++] = t->pid;
}

/* Makes the sampler read the zone id of every VM of t it knows and the trace channel
 * find them: reads the process's vmlist once. Sets t->settled when every VM listed is
 * armed and a VM opened later has its zone slot set by the sampler's vm_open program, so
 * t needs no more fast looks. */
void ses_arm_zones(struct nupp_session *s, struct ses_target *t)
{
	struct nupp_lj_vmlist vl;
	bool all = true;
	int i;

	t->settled = false;
	if (!t->vmlist) {
		if (nupp_zones_find(s->zones, t->pid, t->binary[0] ? t->binary : NULL, &t->vmlist))
			return;
		if (s->tr)
			nupp_trace_set_vmlist(s->tr, t->pid, t->vmlist);
	}
	if (!s->smp) {
		t->settled = true;
		return;
	}
	/* A VM opened later is armed by the sampler only if its vm_open knows the way. */
	if (!nupp_smp_zone_slots(s->smp, t->binary))
		all = false;
	if (nupp_zones_vmlist(s->zones, t->pid, &vl))
		return;
	for (i = 0; i < NUPP_LJ_VMLIST_MAX; i++) {
		if (!vl.g[i] || t->armed[i] == vl.g[i])
			continue;
		/* -ENOENT: the sampler has not seen this VM open yet; the next scan arms it. */
		if (nupp_sampler_set_zone_addr(s->smp, t->pid, vl.g[i], nupp_zones_id_addr(s->zones, t->pid, i)) == 0)
			t->armed[i] = vl.g[i];
		else
			all = false;
	}
	t->settled = all;
}

/* Attaches the channels to t's binary for t's pid (the VMs need not be open yet). */
static int ses_attach_binary(struct nupp_session *s, struct ses_target *t, bool running)
{
	int e = 0;

	if (s->smp) {
		/* Probes first: a VM seen opening has its prototype frees and trace changes
		 * watched; then the process, tolerating a VM not open yet (-ENOENT). */
		/* A followed process tree: every process of the binary, watched once, so a child
		 * that execs it costs no probe attach (vm_open ignores processes not added). */
		e = nupp_sampler_watch(s->smp, t->binary, s->following ? -1 : t->pid);
		if (!e) {
			/* A running process's samples are counted only once their zone ids are read. */
			if (running)
				nupp_sampler_pause(s->smp, true);
			e = nupp_sampler_add_pid(s->smp, t->pid);
			if (e == -ENOENT)
				e = 0;
			if (!e)
				ses_arm_zones(s, t);
			if (running)
				nupp_sampler_pause(s->smp, s->paused);
		}
	}
	if (!e && s->tr) {
		/* Followed processes: the probes fire for every process of the binary and the
		 * kernel's map of followed processes filters them, so a child's aborts count from
		 * its first instruction, however short it lives. */
		int te = nupp_trace_attach(s->tr, t->binary, s->following ? -1 : t->pid);

		if (!te && !t->vmlist)
			ses_arm_zones(s, t);
		/* A process already running (exec'ed under a follower) stays sampled even when its
		 * abort probes cannot be attached (it may be exiting): said, not fatal. */
		if (te && (running || !s->smp))
			e = te;
		else if (te)
			nupp_pr(NUPP_WARN, "PID %d: trace aborts not counted: %s\n", (int)t->pid, nupp_errmsg());
	}
	if (!e) {
		t->attached = true;
		t->fast_until = ses_now() + SES_FAST_SECS;
		ses_count_pid(s, t);
	}
	return e;
}

static int ses_on_follow(void *ctx, void *data, size_t size);

/* The kernel's map of followed processes: the sampler's follower's, or the follower's. */
static int ses_followed_fd(struct nupp_session *s)
{
	return s->smp ? nupp_smp_followed_fd(s->smp) : bpf_map__fd(s->follow->maps.fol_followed);
}

/* Starts following pid's forks and execs in the kernel. */
static int ses_follow(struct nupp_session *s, pid_t pid)
{
	__u32 key = (__u32)pid, value = NUPP_FOLLOW_PROFILED;
	int e, fd;

	if (s->smp) {
		/* The follower built into the sampler: no second parse of the kernel's BTF; its
		 * events come in the sampler's polls, whose waits end at a fork or an exec. Its
		 * map is the trace channel's tgid filter (made so at open). */
		e = nupp_smp_follow(s->smp, s->o.subprocesses, ses_on_follow, s);
		if (e)
			return e;
		if (s->tr)
			nupp_trace_follow(s->tr);
	} else {
		if (!s->follow) {
			s->follow = follow_bpf__open();
			if (!s->follow) {
				e = -errno;
				return nupp_fail(e, "cannot open the process follower: %s", strerror(-e));
			}
			/* Its map of followed processes is the trace channel's tgid filter. */
			if (s->tr) {
				int tfd = nupp_trace_follow(s->tr);

				e = tfd < 0 ? tfd : bpf_map__reuse_fd(s->follow->maps.fol_followed, tfd);
				if (e) {
					follow_bpf__destroy(s->follow);
					s->follow = NULL;
					return nupp_fail(e, "cannot share the followed processes with the trace channel: %s",
							 strerror(-e));
				}
			}
			e = follow_bpf__load(s->follow);
			if (e) {
				follow_bpf__destroy(s->follow);
				s->follow = NULL;
				return nupp_fail(e, "cannot load the process follower: %s (CAP_BPF and CAP_PERFMON are "
						 "required; the kernel needs BTF)", strerror(-e));
			}
			s->follow->bss->fol_subprocesses = s->o.subprocesses ? 1 : 0;
			e = follow_bpf__attach(s->follow);
			if (e)
				return nupp_fail(e, "cannot attach the process follower to sched_process_fork/exec: %s",
						 strerror(-e));
			/* No sampler's polls to wake: read every SES_FAST_MS (ses_step). */
			s->frb = ring_buffer__new(bpf_map__fd(s->follow->maps.fol_events), ses_on_follow, s, NULL);
			if (!s->frb) {
				e = -errno;
				return nupp_fail(e, "cannot open the process follower's ring buffer: %s", strerror(-e));
			}
		}
	}
	fd = ses_followed_fd(s);
	s->following = true;
	if (bpf_map_update_elem(fd, &key, &value, BPF_ANY))
		return nupp_fail(-errno, "cannot follow PID %d: %s", (int)pid, strerror(errno));
	return 0;
}

#define SES_MAX_SCAN 65536

/* The descendants of root running now, parents before their children, from each
 * process's parent in /proc/PID/stat: how many stored in out (at most max). */
static int ses_descendants(pid_t root, pid_t *out, int max)
{
	pid_t(*pp)[2] = malloc(SES_MAX_SCAN * sizeof(*pp));
	int n = 0, nout = 0, i, at;
	struct dirent *de;
	DIR *d;

	if (!pp)
		return 0;
	d = opendir("/proc");
	while (d && n < SES_MAX_SCAN && (de = readdir(d)) != NULL) {
		char path[300], buf[512], *rp;
		ssize_t len;
		int fd, ppid;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = 0;
		/* "pid (comm) state ppid ...": comm may hold spaces and parentheses. */
		rp = strrchr(buf, ')');
		if (rp && sscanf(rp + 1, " %*c %d", &ppid) == 1) {
			pp[n][0] = (pid_t)atoi(de->d_name);
			pp[n++][1] = (pid_t)ppid;
		}
	}
	if (d)
		closedir(d);
	/* Breadth first: out[at] is the next parent whose children are added. */
	for (at = -1; at < nout && nout < max; at++) {
		pid_t parent = at < 0 ? root : out[at];

		for (i = 0; i < n && nout < max; i++)
			if (pp[i][1] == parent)
				out[nout++] = pp[i][0];
	}
	free(pp);
	return nout;
}

/* Takes in the descendants of root that run already (nginx's workers, forked by their
 * master before the attach): followed from now on, and profiled when they run our
 * LuaJIT; the others when they exec it. One forked during the scan may also come as a
 * fork event: it is attached once (ses_target finds it the second time). */
static void ses_adopt_descendants(struct nupp_session *s, pid_t root)
{
	pid_t kids[SES_MAX_TARGETS * 4];
	int n = ses_descendants(root, kids, (int)NUPP_ARRAY_SIZE(kids)), i;
	int fd = ses_followed_fd(s);

	for (i = 0; i < n; i++) {
		__u32 key = (__u32)kids[i], value = NUPP_FOLLOW_PROFILED;
		struct ses_target *t;
		struct nupp_vm vm;
		int e;

		if (bpf_map_update_elem(fd, &key, &value, BPF_ANY) || ses_target(s, kids[i], false))
			continue; /* gone, or known */
		if (nupp_vm_find(kids[i], &vm, 1) < 0)
			continue; /* not our LuaJIT (yet): its exec is followed */
		t = ses_target(s, kids[i], true);
		if (!t)
			return; /* counted in s->unattached */
		snprintf(t->binary, sizeof(t->binary), "%s", vm.path);
		e = ses_attach_binary(s, t, true);
		if (e && e != -ESRCH)
			nupp_pr(NUPP_WARN, "PID %d (a descendant of PID %d) cannot be profiled: %s\n", (int)kids[i],
				(int)root, nupp_errmsg());
	}
}

/* Attaches to a running process. */
int nupp_session_attach(struct nupp_session *s, int pid)
{
	struct nupp_vm vm;
	struct ses_target *t;
	int n, e;

	n = nupp_vm_find(pid, &vm, 1);
	if (n < 0)
		return n;
	if (n == 0)
		return nupp_fail(-ENOENT, "PID %d runs our LuaJIT but has no Lua VM open (yet)", pid);
	t = ses_target(s, pid, true);
	if (!t)
		return -ENOSPC;
	snprintf(t->binary, sizeof(t->binary), "%s", vm.path);
	/* Followed first: the channels then attach once for every process of the binary. */
	if (s->o.subprocesses) {
		e = ses_follow(s, pid);
		if (e)
			return e;
	}
	e = ses_attach_binary(s, t, true);
	if (!e && s->o.subprocesses)
		ses_adopt_descendants(s, pid);
	return e;
}

/* Attaches to a child forked to run exe, held before its exec. */
int nupp_session_attach_spawned(struct nupp_session *s, int pid, const char *exe)
{
	struct ses_target *t = ses_target(s, pid, true);
	char bin[PATH_MAX];
	int e;

	if (!t)
		return -ENOSPC;
	/* Execs are followed always (a wrapper); forks only to name what is not followed,
	 * or to follow it with subprocesses. */
	e = ses_follow(s, pid);
	if (e)
		return e;
	e = nupp_vm_binary_for_exe(exe, bin, sizeof(bin));
	if (e == 0) {
		snprintf(t->binary, sizeof(t->binary), "%s", bin);
		e = ses_attach_binary(s, t, false);
		if (e)
			return e;
	} else if (e != -ENOEXEC) {
		return e;
	} else {
		char own[PATH_MAX];

		t->fast_until = ses_now() + SES_FAST_SECS;
		/* The LuaJIT a wrapper most likely execs is ours: its probes are attached now,
		 * so the exec costs no attach (another LuaJIT is attached when it is exec'ed). */
		if (nupp_vm_binary_for_exe(NUPP_LUAJIT_PREFIX "/bin/luajit", own, sizeof(own)) == 0) {
			if (s->smp)
				nupp_sampler_watch(s->smp, own, -1);
			if (s->tr)
				nupp_trace_attach(s->tr, own, -1); /* (a failure is said when it execs) */
		}
	}
	if (e == -ENOEXEC && s->smp) {
		/* Not LuaJIT (a wrapper, env, sh -c): sampled as soon as it execs our LuaJIT;
		 * until then its samples are not a Lua stack and count as noVm. */
		e = nupp_sampler_add_pid(s->smp, pid);
		if (e && e != -ENOENT)
			return e;
	}
	return 0;
}

/* -- Following ----------------------------------------------------------------- */

/* Nanoseconds pid's threads have run (the sum of /proc/PID/task/TID/schedstat). */
static __u64 ses_runtime_ns(pid_t pid)
{
	char path[64];
	unsigned long long ns = 0;
	FILE *f;

	/* A process just exec'ed runs one thread, whose time is the process's own. */
	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &ns) != 1)
		ns = 0;
	fclose(f);
	return ns;
}

/* "PID (command line)" of a process, malloc'ed. */
static char *ses_describe(pid_t pid)
{
	char path[64], buf[512], *out;
	size_t n = 0, i;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	f = fopen(path, "re");
	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	while (n && !buf[n - 1])
		n--;
	for (i = 0; i < n; i++)
		if (!buf[i])
			buf[i] = ' ';
	buf[n] = 0;
	if (asprintf(&out, "%d (%s)", (int)pid, n ? buf : "?") < 0)
		return NULL;
	return out;
}

/* A followed process exec'ed path: attach to it if it is our LuaJIT. */
static void ses_on_exec(struct nupp_session *s, pid_t pid, const char *path)
{
	struct ses_target *t = ses_target(s, pid, false);
	char bin[PATH_MAX];
	bool ours = t != NULL;

	if (nupp_vm_binary_for_exe(path, bin, sizeof(bin)))
		return; /* not our LuaJIT: it may exec again, or start children */
	if (!ours && !s->o.subprocesses) {
		if (s->nunfollowed < SES_MAX_UNFOLLOWED) {
			char *d = ses_describe(pid);

			if (d)
				s->unfollowed[s->nunfollowed++] = d;
		}
		return;
	}
	if (t && t->attached && strcmp(t->binary, bin) == 0)
		return; /* attached already (the binary was known before the exec) */
	if (!t) {
		__u64 ns = ses_runtime_ns(pid);

		t = ses_target(s, pid, true);
		if (!t)
			return;
		/* It ran before we could sample it: those samples are lost, not guessed. */
		if (s->smp)
			s->lost_before[NUPP_LOST_NO_VM] += (ns * (__u64)s->o.freq_hz + 500000000ull) / 1000000000ull;
	}
	snprintf(t->binary, sizeof(t->binary), "%s", bin);
	t->vmlist = 0;
	memset(t->armed, 0, sizeof(t->armed));
	nupp_zones_forget(s->zones, pid);
	if (ses_attach_binary(s, t, false))
		nupp_pr(NUPP_WARN, "PID %d runs %s but cannot be profiled: %s\n", (int)pid, bin, nupp_errmsg());
}

/* A followed process forked pid. With subprocesses, a child that runs its parent's VM
 * (a fork without exec: the same binary, the same memory) is attached as a running
 * process; one that has exec'ed already is left to its exec event. */
static void ses_on_fork(struct nupp_session *s, pid_t pid, pid_t ppid)
{
	struct ses_target *p = ses_target(s, ppid, false), *t;
	char bin[PATH_MAX];
	int e;

	if (!p || !p->attached || !p->binary[0] || ses_target(s, pid, false))
		return;
	if (!s->o.subprocesses) {
		/* Not followed: said at its exit if it never exec'ed (it ran its parent's VM). */
		if (s->nforked < SES_MAX_FORKED)
			s->forked[s->nforked++] = pid;
		return;
	}
	snprintf(bin, sizeof(bin), "%s", p->binary);
	/* The sampler has sampled it since its fork (a copy of its parent's entry, made in
	 * the kernel); the trace channel counts its aborts from then too. */
	t = ses_target(s, pid, true); /* (may move p: reclaimed slots are refilled) */
	if (!t)
		return; /* counted in s->unattached */
	snprintf(t->binary, sizeof(t->binary), "%s", bin);
	e = ses_attach_binary(s, t, false);
	if (e && e != -ESRCH)
		nupp_pr(NUPP_WARN, "PID %d (a child of PID %d) cannot be profiled: %s\n", (int)pid, (int)ppid,
			nupp_errmsg());
}

/* Takes pid out of the forked children not followed; whether it was there. */
static bool ses_forked_drop(struct nupp_session *s, pid_t pid)
{
	int i;

	for (i = 0; i < s->nforked; i++)
		if (s->forked[i] == pid) {
			s->forked[i] = s->forked[--s->nforked];
			return true;
		}
	return false;
}

/* Ring buffer callback of the follower. */
static int ses_on_follow(void *ctx, void *data, size_t size)
{
	struct nupp_session *s = ctx;
	const struct nupp_follow_event *e = data;
	char path[NUPP_FOLLOW_PATH_MAX + 1];

	if (size < sizeof(*e))
		return 0;
	if (e->kind == NUPP_FOLLOW_EXEC) {
		ses_forked_drop(s, (pid_t)e->pid);
		memcpy(path, e->path, NUPP_FOLLOW_PATH_MAX);
		path[NUPP_FOLLOW_PATH_MAX] = 0;
		ses_on_exec(s, (pid_t)e->pid, path);
	} else if (e->kind == NUPP_FOLLOW_FORK) {
		ses_on_fork(s, (pid_t)e->pid, (pid_t)e->ppid);
	} else if (e->kind == NUPP_FOLLOW_EXIT) {
		struct ses_target *t = ses_target(s, (pid_t)e->pid, false);

		if (t)
			t->exited = ses_now();
		if (ses_forked_drop(s, (pid_t)e->pid))
			s->forks_unfollowed++;
	}
	return 0;
}

/* Reads the follower's events. */
void ses_follow_poll(struct nupp_session *s)
{
	if (s->frb)
		ring_buffer__consume(s->frb);
}
