/* A profiling session: the sampler and the trace-abort channel on one or more processes,
 * attached in order, drained at a steady cadence, zone ids named from the processes' own
 * nupp.zone tables, processes followed through exec and fork, and a stop that applies
 * the zone filter and the root cut and fills the profile's meta. */
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

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "nupp/sampler.h"
#include "nupp/sampler_abi.h"
#include "nupp/trace.h"
#include "nupp/follow_abi.h"
#include "nupp/zone_abi.h"
#include "nupp_internal.h"
#include "zones_internal.h"
#include "follow.skel.h"

#define SES_MAX_TARGETS 256 /* processes attached at once (those gone are reclaimed) */
#define SES_MAX_PIDS 4096  /* processes named in meta.pids */
#define SES_DEFAULT_FREQ 99
#define SES_DEFAULT_DRAIN_MS 200
/* After a process starts or execs, its VMs are looked for this often, this long: a VM
 * opened then has its zone id read by the sampler within one step. */
#define SES_FAST_MS 10
#define SES_FAST_SECS 2.0
#define SES_MAX_UNFOLLOWED 32
#define SES_MAX_FORKED 256 /* forked children not followed, watched for an exec or their exit */

/* One profiled process. */
struct ses_target {
	pid_t pid;
	char binary[PATH_MAX]; /* the ELF object with our LuaJIT ("" unknown yet) */
	bool attached;         /* probes attached and the sampler told */
	bool counted;          /* in meta.pids */
	__u64 vmlist;          /* address of its luajit_bpf_vmlist, 0 unknown */
	__u64 armed[NUPP_LJ_VMLIST_MAX]; /* g whose zone id the sampler reads, per slot */
	double fast_until;     /* look for new VMs every SES_FAST_MS until then */
	bool settled;          /* vmlist found and every VM in it armed: no fast looks */
	double exited;         /* when the follower saw it exit (ses_now), 0 alive */
};

struct nupp_session {
	struct nupp_session_opts o;
	char *zone_filter, *root, *command, *target;
	struct nupp_sampler *smp;
	struct nupp_trace *tr;
	struct nupp_zones *zones;
	struct follow_bpf *follow; /* the follower alone, for a session without the sampler */
	int fol_fd;                /* the map of followed processes both channels share, or -1 */
	int wake_fd;               /* nupp_session_wake_fd's, or -1 */
	bool following;            /* forks and execs followed (the sampler's follower or follow) */
	struct ring_buffer *frb;
	struct ses_target t[SES_MAX_TARGETS];
	int nt;
	pid_t pids[SES_MAX_PIDS];
	int npids;
	char *unfollowed[SES_MAX_UNFOLLOWED];
	int nunfollowed;
	struct nupp_sample_set acc; /* rows drained so far, zone paths named */
	struct nupp_thread_name *threads; /* the threads of the rows, named when first seen */
	size_t nthreads, threads_cap;
	size_t *thash;     /* open-addressing index of threads[] by (pid, tid): index + 1, 0 free */
	size_t thash_cap;  /* slots of thash (a power of two, at least twice nthreads), 0 none */
	struct nupp_abort_set ab;
	__u64 lost_before[NUPP_LOST__MAX]; /* samples of followed processes taken before they were known */
	double t0, next_drain, next_scan;
	double drained;   /* when the last finished drain began (ses_now) */
	__u64 unattached; /* processes that could not be attached: more than SES_MAX_TARGETS at once */
	pid_t forked[SES_MAX_FORKED]; /* children forked, not followed, not exec'ed (yet) */
	int nforked;
	__u64 forks_unfollowed; /* of those, the ones that exited running their parent's VM */
	double t0_wall; /* t0 as Unix time */
	bool started, stopped, paused;
	/* background: the helper process and the socket to it */
	pid_t helper;
	int sock;
	bool is_helper;
	/* In the helper: the process it works for (pid, start time, pidfd or -1). */
	pid_t owner;
	unsigned long long owner_start;
	int owner_fd;
	double owner_next;
	bool helper_zones; /* the helper saw a zone table */
};

/* Monotonic seconds. */
static double ses_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Unix time in seconds. */
static double ses_wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* strdup of NULL is NULL. */
static char *ses_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* -- Opening ------------------------------------------------------------------- */

/* The channels of a session being opened side by side, and how each fared. */
struct ses_opening {
	struct nupp_session *s;
	int err[2];
	char msg[2][1024];
};

/* Opens channel i of a session (0: the sampler, 1: the trace channel) if asked for. */
static void ses_open_one(void *arg, size_t i)
{
	struct ses_opening *op = arg;
	struct nupp_session *s = op->s;
	int e = 0;

	if (i == 0 && s->o.samples) {
		struct nupp_sampler_opts so = { .sz = sizeof(so), .freq_hz = s->o.freq_hz, .depth = s->o.depth,
						.lines = s->o.lines, .max_stacks = s->o.max_stacks,
						.full_filenames = s->o.full_filenames };

		s->smp = nupp_smp_open(&so, s->fol_fd, &e);
	} else if (i == 1 && s->o.aborts) {
		struct nupp_trace_opts to = { .sz = sizeof(to), .include_benign = s->o.include_benign,
					      .max_sites = s->o.max_sites };

		s->tr = nupp_trace_open_shared(&to, s->fol_fd, &e);
	}
	op->err[i] = e;
	/* The message is this thread's: handed to the opener's. */
	if (e)
		snprintf(op->msg[i], sizeof(op->msg[i]), "%s", nupp_errmsg());
}

/* Loads the channels' BPF programs. */
struct nupp_session *nupp_session_open(const struct nupp_session_opts *opts, int *err)
{
	struct nupp_session *s;
	int e = 0, i;

	if (!opts || opts->sz < offsetof(struct nupp_session_opts, target) + sizeof(opts->target)) {
		*err = nupp_fail(-EINVAL, "nupp_session_open: opts->sz is %zu, expected at least %zu (rebuild "
				 "against this libnupp's nupp.h)", opts ? opts->sz : 0,
				 offsetof(struct nupp_session_opts, target) + sizeof(opts->target));
		return NULL;
	}
	if (!opts->samples && !opts->aborts) {
		*err = nupp_fail(-EINVAL, "nupp_session_open: neither samples nor aborts asked for");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		*err = nupp_fail(-ENOMEM, "out of memory");
		return NULL;
	}
	s->sock = -1;
	s->owner_fd = -1;
	s->fol_fd = -1;
	s->wake_fd = -1;
	s->o = *opts;
	s->o.sz = sizeof(s->o);
	/* Fields after target only when the caller's struct has them (older callers). */
	if (opts->sz < offsetof(struct nupp_session_opts, full_filenames) + sizeof(opts->full_filenames))
		s->o.full_filenames = false;
	if (opts->sz < offsetof(struct nupp_session_opts, lua_only) + sizeof(opts->lua_only))
		s->o.lua_only = false;
	if (!s->o.freq_hz)
		s->o.freq_hz = SES_DEFAULT_FREQ;
	if (!s->o.depth)
		s->o.depth = NUPP_SMP_DEFAULT_DEPTH;
	if (s->o.drain_ms <= 0)
		s->o.drain_ms = SES_DEFAULT_DRAIN_MS;
	s->zone_filter = ses_strdup(opts->zone_filter);
	s->root = ses_strdup(opts->root);
	s->command = ses_strdup(opts->command);
	s->target = ses_strdup(opts->target);
	s->o.zone_filter = s->zone_filter;
	s->o.root = s->root;
	s->o.command = s->command;
	s->o.target = s->target;
	s->zones = nupp_zones_new();
	if (!s->zones) {
		e = nupp_fail(-ENOMEM, "out of memory");
		goto fail;
	}
	if (s->o.samples && s->o.aborts) {
		/* The processes followed (if any are) are the trace channel's tgid filter: one
		 * map, made first, so that both channels can load side by side. */
		s->fol_fd = bpf_map_create(BPF_MAP_TYPE_HASH, "fol_followed", sizeof(__u32), sizeof(__u32),
					   NUPP_FOLLOW_MAX_PROCS, NULL);
		if (s->fol_fd < 0) {
			e = nupp_fail(-errno, "cannot create the map of followed processes: %s (CAP_BPF is required)",
				      strerror(errno));
			goto fail;
		}
	}
	{
		struct ses_opening op = { .s = s };

		/* Both channels at once: loading verifies their BPF programs, which takes time. */
		nupp_parallel(ses_open_one, &op, 2);
		for (i = 0; i < 2; i++)
			if (op.err[i]) {
				e = nupp_fail(op.err[i], "%s", op.msg[i]);
				goto fail;
			}
	}
	if (s->tr)
		nupp_trace_set_zones(s->tr, s->zones);
	return s;
fail:
	nupp_session_close(s);
	*err = e ? e : -EINVAL;
	return NULL;
}

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
static struct ses_target *ses_target(struct nupp_session *s, pid_t pid, bool create)
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
static void ses_arm_zones(struct nupp_session *s, struct ses_target *t)
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
		fd = nupp_smp_followed_fd(s->smp);
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
		fd = bpf_map__fd(s->follow->maps.fol_followed);
	}
	s->following = true;
	if (bpf_map_update_elem(fd, &key, &value, BPF_ANY))
		return nupp_fail(-errno, "cannot follow PID %d: %s", (int)pid, strerror(errno));
	return 0;
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
	return ses_attach_binary(s, t, true);
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
static void ses_follow_poll(struct nupp_session *s)
{
	if (s->frb)
		ring_buffer__consume(s->frb);
}

/* -- Draining ------------------------------------------------------------------ */

/* Slot of thash where (pid, tid) is, or the free slot where it would go. */
static size_t ses_thread_slot(const struct nupp_session *s, pid_t pid, pid_t tid)
{
	__u64 h = ((__u64)(__u32)pid * 0x9e3779b97f4a7c15ull ^ (__u32)tid) * 0xff51afd7ed558ccdull;
	size_t m = s->thash_cap - 1, i;

	for (i = (size_t)(h >> 32) & m; s->thash[i]; i = (i + 1) & m) {
		const struct nupp_thread_name *t = &s->threads[s->thash[i] - 1];

		if (t->pid == pid && t->tid == tid)
			break;
	}
	return i;
}

/* Whether thread tid of pid is named already: one hash lookup. */
static bool ses_thread_known(const struct nupp_session *s, pid_t pid, pid_t tid)
{
	return s->thash_cap && s->thash[ses_thread_slot(s, pid, tid)];
}

/* Grows thash to hold one more thread (rebuilt from threads[]); 0 or -ENOMEM. */
static int ses_thread_index_grow(struct nupp_session *s)
{
	size_t cap = s->thash_cap ? s->thash_cap : 64, i;
	size_t *h;

	if (2 * (s->nthreads + 1) <= s->thash_cap)
		return 0;
	while (2 * (s->nthreads + 1) > cap)
		cap *= 2;
	h = calloc(cap, sizeof(*h));
	if (!h)
		return -ENOMEM;
	free(s->thash);
	s->thash = h;
	s->thash_cap = cap;
	for (i = 0; i < s->nthreads; i++)
		s->thash[ses_thread_slot(s, s->threads[i].pid, s->threads[i].tid)] = i + 1;
	return 0;
}

/* Adds thread tid of pid named name (a copy) to the session's threads, unless it is
 * there already; 0 or -ENOMEM. */
static int ses_thread_add(struct nupp_session *s, pid_t pid, pid_t tid, const char *name)
{
	struct nupp_thread_name *t;
	char *n;

	if (ses_thread_known(s, pid, tid))
		return 0;
	if (s->nthreads == s->threads_cap) {
		size_t cap = s->threads_cap ? s->threads_cap * 2 : 16;

		t = realloc(s->threads, cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		s->threads = t;
		s->threads_cap = cap;
	}
	if (ses_thread_index_grow(s))
		return -ENOMEM;
	n = strdup(name);
	if (!n)
		return -ENOMEM;
	s->thash[ses_thread_slot(s, pid, tid)] = s->nthreads + 1;
	s->threads[s->nthreads++] = (struct nupp_thread_name){ .pid = pid, .tid = tid, .name = n };
	return 0;
}

/* Names the thread of a row the first time it is seen (its comm, read once; "" when
 * it is already gone); a thread seen before costs one hash lookup. 0 or -ENOMEM. */
static int ses_thread_name(struct nupp_session *s, pid_t pid, pid_t tid)
{
	char path[64], name[64] = "";
	size_t n;
	FILE *f;

	if (!tid || ses_thread_known(s, pid, tid))
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	f = fopen(path, "re");
	if (f) {
		n = fread(name, 1, sizeof(name) - 1, f);
		fclose(f);
		name[n] = 0;
		name[strcspn(name, "\n")] = 0;
	}
	return ses_thread_add(s, pid, tid, name);
}

/* Frees the session's thread names. */
static void ses_threads_free(struct nupp_session *s)
{
	size_t i;

	for (i = 0; i < s->nthreads; i++)
		free((char *)s->threads[i].name);
	free(s->threads);
	free(s->thash);
	s->threads = NULL;
	s->thash = NULL;
	s->nthreads = s->threads_cap = s->thash_cap = 0;
}

/* Moves the drained rows into the session's aggregate, with their zone ids named: each
 * row's strings and hash move, nothing is copied or hashed again. */
static int ses_merge(struct nupp_session *s, struct nupp_sample_set *raw)
{
	size_t i;
	int e = 0, j;

	for (i = 0; i < raw->n && !e; i++) {
		struct nupp_sample_row *r = &raw->rows[i];
		const char *zone = r->zone_path;
		char *end;
		unsigned long id;

		if (zone[0] == '#') {
			id = strtoul(zone + 1, &end, 10);
			if (!*end) {
				const char *p = nupp_zones_path(s->zones, r->pid, (__u32)id);

				if (p)
					zone = p;
			}
		}
		if (strncmp(r->stack, "[host];", 7) == 0) {
			struct ses_target *t = ses_target(s, r->pid, false);

			/* A process that has not run our LuaJIT (a wrapper, a command that is not
			 * LuaJIT) is not profiled, not even its host code. */
			if (!t || !t->counted) {
				raw->host_samples -= r->count < raw->host_samples ? r->count : raw->host_samples;
				continue;
			}
			if (s->o.lua_only)
				continue;
		}
		e = nupp_sample_set_take(&s->acc, raw, i, zone); /* r's strings move (or go) */
		if (!e)
			e = ses_thread_name(s, r->pid, r->tid);
	}
	if (!e)
		e = nupp_frame_table_merge(&s->acc.frames, &raw->frames);
	for (j = 0; j < NUPP_LOST__MAX; j++)
		s->acc.lost[j] += raw->lost[j];
	s->acc.host_samples += raw->host_samples;
	s->acc.cut_samples += raw->cut_samples;
	return e;
}

/* Reads every channel's counts now. */
static int ses_drain(struct nupp_session *s)
{
	struct nupp_sample_set raw = { 0 };
	double start = ses_now();
	int e = 0, i;

	for (i = 0; i < s->nt; i++)
		if (s->t[i].vmlist)
			nupp_zones_refresh(s->zones, s->t[i].pid);
	if (s->smp) {
		/* The drain records its frames straight into the session's table: a frame
		 * known from an earlier drain is looked up there, not copied and merged. */
		raw.frames = s->acc.frames;
		memset(&s->acc.frames, 0, sizeof(s->acc.frames));
		e = nupp_sampler_drain(s->smp, &raw);
		s->acc.frames = raw.frames;
		memset(&raw.frames, 0, sizeof(raw.frames));
		if (!e)
			e = ses_merge(s, &raw);
		nupp_sample_set_free(&raw);
	}
	if (!e && s->tr)
		e = nupp_trace_drain(s->tr, &s->ab);
	/* Set once it is done: the follower's events, read during a drain, may reclaim only
	 * the processes whose rows a finished drain took. */
	if (!e)
		s->drained = start;
	return e;
}

/* Looks for new VMs of the targets (and their zone ids). */
static void ses_scan(struct nupp_session *s, double now)
{
	int i;

	for (i = 0; i < s->nt; i++)
		if (s->t[i].attached)
			ses_arm_zones(s, &s->t[i]);
	s->next_scan = now + SES_FAST_MS / 1000.0;
}

/* One foreground step: events, new VMs, the drain at its cadence. */
static int ses_step(struct nupp_session *s, int timeout_ms)
{
	double now;
	bool fast = false;
	int e = 0, i;

	now = ses_now();
	for (i = 0; i < s->nt; i++)
		fast |= s->t[i].fast_until > now && !s->t[i].settled;
	/* Following processes without a sampler: their execs are read at least this often. */
	if ((fast || s->frb) && timeout_ms > SES_FAST_MS)
		timeout_ms = SES_FAST_MS;
	/* Not past the next drain. */
	if (timeout_ms > 0 && (s->next_drain - now) * 1000 < timeout_ms)
		timeout_ms = s->next_drain > now ? (int)((s->next_drain - now) * 1000) + 1 : 0;
	if (s->wake_fd >= 0 && timeout_ms > 0) {
		/* The caller's fd ends the wait too; the sampler's rings are read after. */
		struct pollfd p[2] = { { .fd = s->wake_fd, .events = POLLIN } };
		int n = 1;

		if (s->smp)
			p[n++] = (struct pollfd){ .fd = nupp_smp_epoll_fd(s->smp), .events = POLLIN };
		if (poll(p, n, timeout_ms) < 0 && errno != EINTR)
			return nupp_fail(-errno, "cannot wait for events: %s", strerror(errno));
		timeout_ms = 0;
	}
	if (s->smp)
		e = nupp_sampler_poll(s->smp, timeout_ms);
	else if (timeout_ms > 0)
		usleep((useconds_t)timeout_ms * 1000);
	if (e < 0 && e != -EINTR)
		return e;
	ses_follow_poll(s);
	now = ses_now();
	if (fast || now >= s->next_drain)
		ses_scan(s, now);
	if (now >= s->next_drain) {
		/* Names are read from the live target: keep them resolved as it runs. */
		e = ses_drain(s);
		s->next_drain = ses_now() + s->o.drain_ms / 1000.0;
	}
	return e;
}

/* -- Background sessions: the helper process ------------------------------------ */

enum { SES_REQ_SNAPSHOT = 'S', SES_REQ_STOP = 'T' };

/* Writes all of buf; 0 or -errno. */
static int ses_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EPIPE;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads all of buf; 0 or -errno (-EPIPE at end of file). */
static int ses_read_all(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EPIPE;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* A growable byte buffer for one message. */
struct ses_buf {
	char *p;
	size_t n, cap;
	int err;
};

static void ses_put(struct ses_buf *b, const void *data, size_t n)
{
	if (b->err)
		return;
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *np;

		while (cap < b->n + n)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np) {
			b->err = -ENOMEM;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
}

static void ses_put_u64(struct ses_buf *b, __u64 v)
{
	ses_put(b, &v, sizeof(v));
}

static void ses_put_str(struct ses_buf *b, const char *str)
{
	__u64 len = strlen(str);

	ses_put_u64(b, len);
	ses_put(b, str, len);
}

/* Serializes the rows and totals (the helper's answer). */
static int ses_send_sets(struct nupp_session *s, int fd)
{
	struct ses_buf b = { 0 };
	size_t i;
	int j, e;

	ses_put_u64(&b, s->acc.samples);
	for (j = 0; j < NUPP_LOST__MAX; j++)
		ses_put_u64(&b, s->acc.lost[j] + s->lost_before[j]);
	ses_put_u64(&b, s->acc.host_samples);
	ses_put_u64(&b, s->acc.cut_samples);
	ses_put_u64(&b, s->acc.n);
	for (i = 0; i < s->acc.n; i++) {
		const struct nupp_sample_row *r = &s->acc.rows[i];

		ses_put_u64(&b, (__u64)r->pid);
		ses_put_u64(&b, (__u64)r->tid);
		ses_put_u64(&b, r->count);
		ses_put_u64(&b, r->compiled);
		ses_put_u64(&b, r->interpreted);
		ses_put_u64(&b, r->ccode);
		ses_put_u64(&b, r->collecting);
		ses_put_u64(&b, r->compiling);
		ses_put_str(&b, r->zone_path);
		ses_put_str(&b, r->stack);
	}
	ses_put_u64(&b, s->ab.total_aborts);
	ses_put_u64(&b, s->ab.blacklisted);
	ses_put_u64(&b, s->ab.n);
	for (i = 0; i < s->ab.n; i++) {
		const struct nupp_abort_row *r = &s->ab.rows[i];

		ses_put_u64(&b, (__u64)r->severity);
		ses_put_u64(&b, r->count);
		ses_put_str(&b, r->reason);
		ses_put_str(&b, r->location);
		ses_put_str(&b, r->zone_path);
	}
	ses_put_u64(&b, nupp_zones_seen(s->zones, s->nt ? s->t[0].pid : 0));
	ses_put_u64(&b, s->nthreads);
	for (i = 0; i < s->nthreads; i++) {
		ses_put_u64(&b, (__u64)s->threads[i].pid);
		ses_put_u64(&b, (__u64)s->threads[i].tid);
		ses_put_str(&b, s->threads[i].name);
	}
	ses_put_u64(&b, s->acc.frames.n);
	for (i = 0; i < s->acc.frames.n; i++) {
		const struct nupp_frame_info *fi = &s->acc.frames.v[i];

		ses_put_str(&b, fi->name);
		ses_put_str(&b, fi->file);
		ses_put_u64(&b, (__u64)(__s64)fi->first_line);
		ses_put_u64(&b, (__u64)(__s64)fi->last_line);
	}
	if (b.err) {
		free(b.p);
		return b.err;
	}
	{
		__u64 len = b.n;

		e = ses_write_all(fd, &len, sizeof(len));
		if (!e)
			e = ses_write_all(fd, b.p, b.n);
	}
	free(b.p);
	return e;
}

/* Reads a u64 / a string of a message at *off. */
static int ses_get_u64(const char *m, size_t n, size_t *off, __u64 *v)
{
	if (*off + sizeof(*v) > n)
		return -EPROTO;
	memcpy(v, m + *off, sizeof(*v));
	*off += sizeof(*v);
	return 0;
}

static int ses_get_str(const char *m, size_t n, size_t *off, char **out)
{
	__u64 len;

	if (ses_get_u64(m, n, off, &len) || len > n - *off)
		return -EPROTO;
	*out = strndup(m + *off, len);
	*off += len;
	return *out ? 0 : -ENOMEM;
}

/* Reads the helper's answer into the session's sets (replacing them). */
static int ses_recv_sets(struct nupp_session *s, bool *zones_seen)
{
	__u64 len, v, nrows;
	size_t off = 0, i;
	char *m;
	int e, j;

	e = ses_read_all(s->sock, &len, sizeof(len));
	if (e || len > (1ull << 34))
		return nupp_fail(-EPIPE, "the session's helper process is gone (it exited or was killed)");
	m = malloc(len ? len : 1);
	if (!m)
		return -ENOMEM;
	e = ses_read_all(s->sock, m, len);
	if (e) {
		free(m);
		return nupp_fail(-EPIPE, "the session's helper process is gone (it exited or was killed)");
	}
	nupp_sample_set_free(&s->acc);
	nupp_abort_set_free(&s->ab);
	e = ses_get_u64(m, len, &off, &s->acc.samples);
	for (j = 0; !e && j < NUPP_LOST__MAX; j++)
		e = ses_get_u64(m, len, &off, &s->acc.lost[j]);
	if (!e)
		e = ses_get_u64(m, len, &off, &s->acc.host_samples);
	if (!e)
		e = ses_get_u64(m, len, &off, &s->acc.cut_samples);
	if (!e)
		e = ses_get_u64(m, len, &off, &nrows);
	for (i = 0; !e && i < nrows; i++) {
		struct nupp_sample_row r = { 0 };
		__u64 c[8];
		char *zone = NULL, *stack = NULL;

		for (j = 0; !e && j < 8; j++)
			e = ses_get_u64(m, len, &off, &c[j]);
		if (!e)
			e = ses_get_str(m, len, &off, &zone);
		if (!e)
			e = ses_get_str(m, len, &off, &stack);
		if (!e) {
			__u64 samples = s->acc.samples;

			r.pid = (pid_t)c[0];
			r.tid = (pid_t)c[1];
			r.count = c[2];
			r.compiled = c[3];
			r.interpreted = c[4];
			r.ccode = c[5];
			r.collecting = c[6];
			r.compiling = c[7];
			e = nupp_sample_set_add(&s->acc, zone, stack, &r);
			s->acc.samples = samples; /* the total came first */
		}
		free(zone);
		free(stack);
	}
	if (!e)
		e = ses_get_u64(m, len, &off, &s->ab.total_aborts);
	if (!e)
		e = ses_get_u64(m, len, &off, &s->ab.blacklisted);
	if (!e)
		e = ses_get_u64(m, len, &off, &nrows);
	for (i = 0; !e && i < nrows; i++) {
		char *reason = NULL, *loc = NULL, *zone = NULL;
		__u64 sev, count;

		e = ses_get_u64(m, len, &off, &sev);
		if (!e)
			e = ses_get_u64(m, len, &off, &count);
		if (!e)
			e = ses_get_str(m, len, &off, &reason);
		if (!e)
			e = ses_get_str(m, len, &off, &loc);
		if (!e)
			e = ses_get_str(m, len, &off, &zone);
		if (!e)
			e = nupp_abort_set_add(&s->ab, (enum nupp_severity)sev, reason, loc, zone, count);
		free(reason);
		free(loc);
		free(zone);
	}
	if (!e && ses_get_u64(m, len, &off, &v) == 0)
		*zones_seen = v != 0;
	if (!e)
		ses_threads_free(s);
	if (!e)
		e = ses_get_u64(m, len, &off, &nrows);
	for (i = 0; !e && i < nrows; i++) {
		__u64 pid, tid;
		char *name = NULL;

		e = ses_get_u64(m, len, &off, &pid);
		if (!e)
			e = ses_get_u64(m, len, &off, &tid);
		if (!e)
			e = ses_get_str(m, len, &off, &name);
		if (!e)
			e = ses_thread_add(s, (pid_t)pid, (pid_t)tid, name);
		free(name);
	}
	if (!e)
		e = ses_get_u64(m, len, &off, &nrows);
	for (i = 0; !e && i < nrows; i++) {
		__u64 first, last;
		char *name = NULL, *file = NULL;

		e = ses_get_str(m, len, &off, &name);
		if (!e)
			e = ses_get_str(m, len, &off, &file);
		if (!e)
			e = ses_get_u64(m, len, &off, &first);
		if (!e)
			e = ses_get_u64(m, len, &off, &last);
		if (!e)
			e = nupp_frame_table_add(&s->acc.frames, name, file, (int)(__s64)first, (int)(__s64)last);
		free(name);
		free(file);
	}
	free(m);
	return e ? nupp_fail(e, "cannot read the session helper's answer: %s", strerror(-e)) : 0;
}

/* The start time of process pid (clock ticks since boot, /proc/PID/stat's 22nd field),
 * 0 when it is gone: with the pid, it names one process, never a later one given its pid. */
static unsigned long long ses_start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long t = 0;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
	if (!p)
		return 0;
	for (field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p)
		t = strtoull(p + 1, NULL, 10);
	return t;
}

/* Whether the process that started the helper is gone. Its pidfd says so as it exits;
 * without one (a kernel before 5.3), its pid and start time are read once a second. A
 * child it forked keeps the socket open (it is closed on exec only), so the socket alone
 * would keep the helper sampling for a process that no longer exists. */
static bool ses_owner_gone(struct nupp_session *s, double now)
{
	if (s->owner_fd >= 0) {
		struct pollfd p = { .fd = s->owner_fd, .events = POLLIN };

		return poll(&p, 1, 0) > 0;
	}
	if (now < s->owner_next)
		return false;
	s->owner_next = now + 1.0;
	return ses_start_time(s->owner) != s->owner_start;
}

/* The helper's loop: poll and drain until told to stop or the profiled process is gone. */
static void ses_helper_main(struct nupp_session *s)
{
	for (;;) {
		struct pollfd p = { .fd = s->sock, .events = POLLIN };
		char req;

		/* Checked before each step reads the program's memory, so that the helper stops
		 * as the program exits, before its pid can name another process. */
		if (ses_owner_gone(s, ses_now()))
			break; /* the profiled process exited; a child of it may hold the socket */
		if (ses_step(s, 20) < 0)
			nupp_pr(NUPP_WARN, "session helper: %s\n", nupp_errmsg());
		if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if (ses_read_all(s->sock, &req, 1))
			break; /* the profiled process closed the session, or died */
		/* Both answers are fresh: what was sampled until the request. */
		ses_drain(s);
		s->next_drain = ses_now() + s->o.drain_ms / 1000.0;
		if (ses_send_sets(s, s->sock) || req == SES_REQ_STOP)
			break;
	}
	_exit(0);
}

/* Starts the helper process: it inherits the loaded channels and polls and drains them
 * for the process that started it; this process only pauses, asks and stops. Its own
 * CPU time is never sampled: it is another process, not a thread of the profiled one. */
static int ses_start_helper(struct nupp_session *s)
{
	int sv[2], st, e;
	pid_t mid, helper = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return nupp_fail(-errno, "cannot make the session's socket: %s", strerror(errno));
	/* Taken before the fork, so it names this process even if it dies meanwhile. */
	s->owner = getpid();
	s->owner_start = ses_start_time(s->owner);
	s->owner_fd = (int)syscall(SYS_pidfd_open, s->owner, 0);
	mid = fork();
	if (mid < 0) {
		e = -errno;
		close(sv[0]);
		close(sv[1]);
		if (s->owner_fd >= 0)
			close(s->owner_fd);
		s->owner_fd = -1;
		return nupp_fail(e, "cannot start the session's helper process: %s", strerror(-e));
	}
	if (mid == 0) {
		/* Twice forked, so the profiled program never sees (or reaps) it as its child. */
		pid_t h = fork();

		if (h != 0) {
			if (h > 0 && write(sv[1], &h, sizeof(h)) != sizeof(h))
				_exit(1);
			_exit(h > 0 ? 0 : 1);
		}
		close(sv[0]);
		setsid();
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		signal(SIGPIPE, SIG_IGN);
		s->sock = sv[1];
		s->is_helper = true;
		ses_helper_main(s);
	}
	close(sv[1]);
	if (s->owner_fd >= 0)
		close(s->owner_fd);
	s->owner_fd = -1;
	s->sock = sv[0];
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	if (ses_read_all(s->sock, &helper, sizeof(helper)) || helper <= 0) {
		close(s->sock);
		s->sock = -1;
		return nupp_fail(-ECHILD, "the session's helper process did not start");
	}
	s->helper = helper;
	/* It reads this process's memory (names, zone tables): allow it where Yama asks. */
	prctl(PR_SET_PTRACER, (unsigned long)helper, 0, 0, 0);
	return 0;
}

/* Asks the helper for the rows so far (req SNAPSHOT) or the last ones (STOP). */
static int ses_ask(struct nupp_session *s, char req, bool *zones_seen)
{
	int e;

	if (s->sock < 0)
		return nupp_fail(-EPIPE, "the session's helper process is gone");
	e = ses_write_all(s->sock, &req, 1);
	if (e)
		return nupp_fail(e, "the session's helper process is gone (it exited or was killed)");
	return ses_recv_sets(s, zones_seen);
}

/* -- The session's life -------------------------------------------------------- */

/* Starts the clock (and the helper of a background session). */
int nupp_session_start(struct nupp_session *s)
{
	if (s->started)
		return 0;
	s->t0 = ses_now();
	s->t0_wall = ses_wall();
	s->next_drain = s->t0 + s->o.drain_ms / 1000.0;
	s->started = true;
	if (s->o.background)
		return ses_start_helper(s);
	return 0;
}

/* Reads events and drains at the cadence, for at most timeout_ms. */
int nupp_session_poll(struct nupp_session *s, int timeout_ms)
{
	if (s->o.background)
		return nupp_fail(-EINVAL, "nupp_session_poll: a background session polls in its helper");
	if (!s->started)
		nupp_session_start(s);
	return ses_step(s, timeout_ms);
}

int nupp_session_wake_fd(struct nupp_session *s, int fd)
{
	if (s->o.background)
		return nupp_fail(-EINVAL, "nupp_session_wake_fd: a background session polls in its helper");
	s->wake_fd = fd;
	return 0;
}

/* Pauses or resumes recording (the BPF programs' flags: shared with a helper). */
int nupp_session_pause(struct nupp_session *s, bool paused)
{
	int e = 0;

	s->paused = paused;
	if (s->smp)
		e = nupp_sampler_pause(s->smp, paused);
	if (!e && s->tr)
		e = nupp_trace_pause(s->tr, paused);
	return e;
}

static bool ses_zones_seen_any(struct nupp_session *s)
{
	int i;

	for (i = 0; i < s->nt; i++)
		if (nupp_zones_seen(s->zones, s->t[i].pid))
			return true;
	return false;
}

/* A profile holding copies of the session's rows, and its meta. */
static struct nupp_profile *ses_profile(struct nupp_session *s, bool filter, int *err)
{
	struct nupp_profile *p = calloc(1, sizeof(*p));
	struct nupp_sample_set in = s->acc;
	int e = 0, j;

	if (!p) {
		*err = nupp_fail(-ENOMEM, "out of memory");
		return NULL;
	}
	for (j = 0; j < NUPP_LOST__MAX; j++)
		in.lost[j] += s->o.background ? 0 : s->lost_before[j];
	e = nupp_sample_set_filter(&in, filter ? s->zone_filter : NULL, filter ? s->root : NULL, &p->samples);
	for (j = 0; !e && j < (int)s->ab.n; j++) {
		const struct nupp_abort_row *r = &s->ab.rows[j];

		e = nupp_abort_set_add(&p->aborts, r->severity, r->reason, r->location, r->zone_path, r->count);
	}
	if (e) {
		nupp_session_profile_free(p);
		*err = nupp_fail(e, "out of memory");
		return NULL;
	}
	p->aborts.total_aborts = s->ab.total_aborts;
	p->aborts.blacklisted = s->ab.blacklisted;
	nupp_abort_set_sort(&p->aborts);
	p->meta.command = s->command;
	p->meta.target = s->target;
	p->meta.pids = s->pids;
	p->meta.npids = s->npids;
	p->meta.frequency_hz = s->o.freq_hz;
	p->meta.duration_sec = s->started ? ses_now() - s->t0 : 0;
	p->meta.start_time = s->started ? s->t0_wall : 0;
	p->meta.backend = "bpf";
	p->meta.luajit = nupp_luajit_build();
	p->meta.depth = s->o.depth;
	p->meta.aborts = s->tr != NULL;
	p->meta.include_benign = s->o.include_benign;
	p->meta.zone_filter = s->zone_filter;
	p->meta.root = s->root;
	p->meta.lines = s->o.lines;
	p->meta.full_filenames = s->o.full_filenames;
	p->meta.threads = s->threads;
	p->meta.nthreads = (int)s->nthreads;
	return p;
}

/* The aggregate so far. */
struct nupp_profile *nupp_session_snapshot(struct nupp_session *s, int *err)
{
	int e;

	if (s->stopped)
		return ses_profile(s, true, err);
	if (s->o.background && s->helper)
		e = ses_ask(s, SES_REQ_SNAPSHOT, &s->helper_zones);
	else
		e = ses_drain(s);
	if (e) {
		*err = e;
		return NULL;
	}
	return ses_profile(s, false, err);
}

/* Ends the session into its profile. */
struct nupp_profile *nupp_session_stop(struct nupp_session *s, int *err)
{
	int e = 0;

	if (!s->stopped) {
		if (s->o.background && s->helper) {
			e = ses_ask(s, SES_REQ_STOP, &s->helper_zones);
			close(s->sock);
			s->sock = -1;
			s->helper = 0;
		} else {
			ses_follow_poll(s);
			e = ses_drain(s);
		}
		s->stopped = true;
		if (e) {
			*err = e;
			return NULL;
		}
	}
	return ses_profile(s, true, err);
}

/* Whether a profiled process has loaded nupp.zone so far. */
bool nupp_session_zones_seen(struct nupp_session *s)
{
	return ses_zones_seen_any(s) || s->helper_zones;
}

/* Children that ran our LuaJIT and were not followed. */
void nupp_session_not_profiled(struct nupp_session *s, unsigned long long *forks, unsigned long long *too_many)
{
	*forks = s->forks_unfollowed;
	*too_many = s->unattached;
}

const char *nupp_session_unfollowed(struct nupp_session *s, int i)
{
	return i >= 0 && i < s->nunfollowed ? s->unfollowed[i] : NULL;
}

struct nupp_sampler *nupp_session_sampler(struct nupp_session *s)
{
	return s->smp;
}

struct nupp_trace *nupp_session_trace(struct nupp_session *s)
{
	return s->tr;
}

/* Frees a profile returned by a session. */
void nupp_session_profile_free(struct nupp_profile *p)
{
	if (!p)
		return;
	nupp_sample_set_free(&p->samples);
	nupp_abort_set_free(&p->aborts);
	free(p);
}

/* Closes one channel of a session (i: 0 the sampler, 1 the trace channel, 2 the
 * follower). */
static void ses_close_one(void *arg, size_t i)
{
	struct nupp_session *s = arg;

	if (i == 0) {
		nupp_sampler_close(s->smp);
	} else if (i == 1) {
		nupp_trace_close(s->tr);
	} else {
		ring_buffer__free(s->frb);
		follow_bpf__destroy(s->follow);
		if (s->fol_fd >= 0)
			close(s->fol_fd);
	}
}

/* Detaches and frees. */
void nupp_session_close(struct nupp_session *s)
{
	int i;

	if (!s)
		return;
	if (s->sock >= 0)
		close(s->sock); /* the helper sees the end of file and exits */
	/* The channels at once: each uprobe's detach waits for kernel grace periods, which
	 * detaches made side by side share (they are separate BPF objects). */
	nupp_parallel(ses_close_one, s, 3);
	nupp_zones_free(s->zones);
	nupp_sample_set_free(&s->acc);
	nupp_abort_set_free(&s->ab);
	ses_threads_free(s);
	for (i = 0; i < s->nunfollowed; i++)
		free(s->unfollowed[i]);
	free(s->zone_filter);
	free(s->root);
	free(s->command);
	free(s->target);
	free(s);
}

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
