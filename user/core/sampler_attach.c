/* What the sampler is attached to: the VM and prototype lifetime probes (USDT) of each
 * binary watched, the processes added with their VMs and layout (entered in the kernel's
 * procs map by the nupp_smp_proc_set program), a VM's zone id address, the process
 * follower's programs, and other ring buffers read in the sampler's polls. Reads no event
 * and no count (sampler_events.c, sampler_drain.c) and no target memory but its VMs'
 * discovery (nupp_vm_find). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "nupp/sampler.h"
#include "nupp_internal.h"
#include "sampler_internal.h"
#include "sampler_priv.h"
#include "sampler.skel.h"

/* Attaches the VM and prototype lifetime probes of binary for pid (-1: every process). */
static int smp_attach_probes(struct nupp_sampler *s, const char *binary, pid_t pid)
{
	/* proto_free before vm_open: a VM seen opening has its prototype frees watched, which
	 * its samples' frame cache relies on (bpf/sampler.bpf.c). Traces and prototypes are
	 * made without a probe: the first sample that meets one copies (a trace) or watches
	 * it (a prototype, whose free is then reported). */
	static const char *const names[SMP_PROBES] = { "proto_free", "vm_close", "vm_open" };
	struct bpf_program *progs[SMP_PROBES] = {
		s->skel->progs.nupp_smp_proto_free,
		s->skel->progs.nupp_smp_vm_close,
		s->skel->progs.nupp_smp_vm_open,
	};
	LIBBPF_OPTS(bpf_usdt_opts, vm_open_opts);
	struct smp_attach *a;
	int i, e;

	for (i = 0; i < s->nattach; i++)
		if (strcmp(s->attach[i].binary, binary) == 0 && (s->attach[i].pid == -1 || s->attach[i].pid == pid))
			return 0;
	/* vm_open finds a new VM's zone slot from &luajit_bpf_layout and its cookie. */
	vm_open_opts.usdt_cookie = nupp_vm_vmlist_cookie(binary);
	if (s->nattach == SMP_MAX_ATTACH)
		return nupp_fail(-ENOSPC, "too many watched binaries (%d)", SMP_MAX_ATTACH);
	a = &s->attach[s->nattach];
	memset(a, 0, sizeof(*a));
	snprintf(a->binary, sizeof(a->binary), "%s", binary);
	a->pid = pid;
	a->cookie = vm_open_opts.usdt_cookie;
	for (i = 0; i < SMP_PROBES; i++) {
		a->links[i] = bpf_program__attach_usdt(progs[i], pid, binary, "luajit", names[i],
						       progs[i] == s->skel->progs.nupp_smp_vm_open ? &vm_open_opts : NULL);
		if (!a->links[i]) {
			const char *name = names[i];

			e = -errno;
			while (i-- > 0)
				bpf_link__destroy(a->links[i]);
			return nupp_fail(e, "cannot attach to luajit:%s in %s: %s (is it our LuaJIT build?)", name,
					 binary, strerror(-e));
		}
	}
	s->nattach++;
	return 0;
}

/* Watches an ELF object with our probes for VMs opened by pid (-1: any process). */
int nupp_sampler_watch(struct nupp_sampler *s, const char *binary, pid_t pid)
{
	return smp_attach_probes(s, binary, pid > 0 ? pid : -1);
}

/* Makes the change a to a process's entry in the kernel (nupp_smp_proc_set); 0 or
 * -errno (the program's own: -ENOENT, -ENOSPC, -ESRCH). */
static int smp_proc_set(struct nupp_sampler *s, struct nupp_smp_proc_set *a)
{
	LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = a, .ctx_size_in = sizeof(*a));
	int e;

	e = bpf_prog_test_run_opts(bpf_program__fd(s->skel->progs.nupp_smp_proc_set), &run);
	if (e)
		return -errno;
	return (int)run.retval;
}

/* Samples every thread of a running process (VMs found with nupp_vm_find). */
int nupp_sampler_add_pid(struct nupp_sampler *s, pid_t pid)
{
	struct nupp_vm vms[NUPP_SMP_MAX_VMS];
	struct nupp_smp_proc_set a;
	struct nupp_smp_proc p;
	struct smp_target *t;
	__u32 key = (__u32)pid;
	int fd = bpf_map__fd(s->skel->maps.procs), n, i, e;

	if (pid <= 0)
		return nupp_fail(-EINVAL, "invalid PID %d", (int)pid);
	t = smp_target(s, pid);
	if (!t) {
		if (s->ntargets == NUPP_SMP_MAX_TARGETS)
			return nupp_fail(-ENOSPC, "too many target processes (%d)", NUPP_SMP_MAX_TARGETS);
		t = &s->targets[s->ntargets++];
		memset(t, 0, sizeof(*t));
		t->pid = pid;
		t->amap = nupp_addrmap_new(pid);
	}
	if (t->amap)
		nupp_addrmap_refresh(t->amap);
	/* Enter the tgid first, so a vm_open firing from now on is recorded by BPF. */
	memset(&p, 0, sizeof(p));
	if (bpf_map_update_elem(fd, &key, &p, BPF_NOEXIST) && errno != EEXIST)
		return nupp_fail(-errno, "cannot add PID %d to the sampler: %s (at most %d processes)", (int)pid,
				 strerror(errno), NUPP_SMP_MAX_TARGETS);
	n = nupp_vm_find(pid, vms, NUPP_SMP_MAX_VMS);
	if (n < 0)
		return n;
	if (n == 0)
		return 0; /* no VM yet: vm_open (nupp_sampler_watch) fills it in */
	/* Without the prototype lifetime probes no name could be proven. */
	e = smp_attach_probes(s, vms[0].path, pid);
	if (e)
		return e;
	memset(&a, 0, sizeof(a));
	a.tgid = key;
	a.set_layout = 1;
	a.lo = vms[0].layout;
	for (i = 0; i < n && i < NUPP_SMP_MAX_VMS; i++) {
		a.g[a.nvm] = vms[i].g;
		/* The frame cache needs this VM's prototype frees watched: its binary's probes. */
		a.fc_ok[a.nvm++] = strcmp(vms[i].path, vms[0].path) == 0;
	}
	/* Entries cached for an earlier process with this PID die. */
	__atomic_fetch_add(&s->skel->data->fc_epoch, 1, __ATOMIC_SEQ_CST);
	e = smp_proc_set(s, &a);
	if (e == -ENOSPC)
		nupp_pr(NUPP_WARN, "PID %d: more than %d VMs, the others are not sampled\n", (int)pid, NUPP_SMP_MAX_VMS);
	else if (e)
		return nupp_fail(e, "cannot update the VMs of PID %d: %s", (int)pid, strerror(-e));
	if (bpf_map_lookup_elem(fd, &key, &p))
		return nupp_fail(-errno, "PID %d left the sampler: %s", (int)pid, strerror(errno));
	t->lo = p.lo;
	t->have_layout = 1;
	return 0;
}

/* Stops sampling a process that is gone (nupp_internal.h). */
int nupp_smp_remove_pid(struct nupp_sampler *s, pid_t pid)
{
	struct smp_target *t = smp_target(s, pid);
	__u32 key = (__u32)pid;

	if (!t)
		return -ENOENT;
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.procs), &key);
	nupp_sym_free(t->sym);
	nupp_addrmap_free(t->amap);
	nupp_traces_free(t->traces);
	*t = s->targets[--s->ntargets];
	return 0;
}

/* Sets the address of a VM's current zone id (u32; 0 = no zones). */
int nupp_sampler_set_zone_addr(struct nupp_sampler *s, pid_t pid, __u64 g, __u64 zone_addr)
{
	struct nupp_smp_proc_set a;
	struct nupp_smp_proc p;
	__u32 key = (__u32)pid, i;
	int fd = bpf_map__fd(s->skel->maps.procs), e;

	if (bpf_map_lookup_elem(fd, &key, &p))
		return nupp_fail(-ENOENT, "PID %d is not sampled", (int)pid);
	/* Set already (by vm_open): nothing to change. */
	for (i = 0; i < p.nvm && i < NUPP_SMP_MAX_VMS; i++)
		if (p.g[i] == g && p.zone_addr[i] == zone_addr)
			return 0;
	memset(&a, 0, sizeof(a));
	a.tgid = key;
	a.set_zone = 1;
	a.zone_g = g;
	a.zone_addr = zone_addr;
	e = smp_proc_set(s, &a);
	if (e == -ESRCH || e == -ENOENT)
		return nupp_fail(-ENOENT, "PID %d has no VM %#llx", (int)pid, (unsigned long long)g);
	return e;
}

int nupp_smp_add_ring(struct nupp_sampler *s, int map_fd, int (*fn)(void *ctx, void *data, size_t size),
		      void *ctx)
{
	int e = ring_buffer__add(s->rb, map_fd, fn, ctx);

	return e ? nupp_fail(e, "cannot read a ring buffer with the sampler's: %s", strerror(-e)) : 0;
}

int nupp_smp_follow(struct nupp_sampler *s, bool subprocesses, int (*fn)(void *ctx, void *data, size_t size),
		    void *ctx)
{
	struct bpf_program *progs[SMP_FOL_PROGS] = { s->skel->progs.nupp_follow_fork,
						     s->skel->progs.nupp_follow_exec,
						     s->skel->progs.nupp_follow_exit };
	int i, e;

	if (s->flink[0])
		return 0;
	s->skel->bss->fol_subprocesses = subprocesses ? 1 : 0;
	/* Its ring first: programs attached are then always read (a failure leaves none). */
	if (!s->fol_ring) {
		e = nupp_smp_add_ring(s, bpf_map__fd(s->skel->maps.fol_events), fn, ctx);
		if (e)
			return e;
		s->fol_ring = true;
	}
	for (i = 0; i < SMP_FOL_PROGS; i++) {
		s->flink[i] = bpf_program__attach(progs[i]);
		if (!s->flink[i]) {
			e = -errno;
			while (i-- > 0) {
				bpf_link__destroy(s->flink[i]);
				s->flink[i] = NULL;
			}
			return nupp_fail(e, "cannot attach the process follower to sched_process_fork/exec/exit: %s",
					 strerror(-e));
		}
	}
	return 0;
}

bool nupp_smp_zone_slots(struct nupp_sampler *s, const char *binary)
{
	int i;

	for (i = 0; i < s->nattach; i++)
		if (strcmp(s->attach[i].binary, binary) == 0 && s->attach[i].cookie)
			return true;
	return false;
}

int nupp_smp_followed_fd(struct nupp_sampler *s)
{
	return bpf_map__fd(s->skel->maps.fol_followed);
}

