/* Probe check: attaches a counter to every luajit:* USDT probe of a binary. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>

#include "nupp/abi.h"
#include "nupp_internal.h"
#include "probecheck.skel.h"

/* The probe names of scripts/luajit-usdt.patch, indexed by enum nupp_probe. */
const char *const nupp_probe_names[] = {
	[NUPP_PROBE_VM_OPEN] = "vm_open",
	[NUPP_PROBE_VM_CLOSE] = "vm_close",
	[NUPP_PROBE_TRACE_START] = "trace_start",
	[NUPP_PROBE_TRACE_STOP] = "trace_stop",
	[NUPP_PROBE_TRACE_ABORT] = "trace_abort",
	[NUPP_PROBE_TRACE_BLACKLIST] = "trace_blacklist",
	[NUPP_PROBE_TRACE_FLUSH] = "trace_flush",
	[NUPP_PROBE_TRACE_FREE] = "trace_free",
	[NUPP_PROBE_PROTO_FREE] = "proto_free",
	[NUPP_PROBE_PROTO_NEW] = "proto_new",
	[NUPP_PROBE_TRACE_ABORT_BENIGN] = "trace_abort_benign",
};
_Static_assert(NUPP_PROBE__MAX == NUPP_PROBES, "probe table and count disagree");

struct nupp_probecheck {
	struct probecheck_bpf *skel;
	struct bpf_link *links[NUPP_PROBES];
};

/* Attaches a counter to every luajit:* probe of binary for pid. */
struct nupp_probecheck *nupp_probecheck_open(const char *binary, pid_t pid, int attach_err[NUPP_PROBES],
					     int *err)
{
	struct nupp_probecheck *pc = calloc(1, sizeof(*pc));
	int i;

	if (!pc) {
		*err = -ENOMEM;
		return NULL;
	}
	pc->skel = probecheck_bpf__open();
	if (!pc->skel) {
		*err = -errno;
		goto fail;
	}
	pc->skel->rodata->target_tgid = pid > 0 ? (__u32)pid : 0;
	if (probecheck_bpf__load(pc->skel)) {
		*err = -errno;
		nupp_fail(*err, "cannot load the probe-check BPF program: %s (CAP_BPF and CAP_PERFMON are required)",
			  strerror(-*err));
		goto fail;
	}
	for (i = 0; i < NUPP_PROBES; i++) {
		LIBBPF_OPTS(bpf_usdt_opts, o, .usdt_cookie = (__u64)i);

		pc->links[i] = bpf_program__attach_usdt(pc->skel->progs.probecheck_hit, pid > 0 ? pid : -1, binary,
							"luajit", nupp_probe_names[i], &o);
		attach_err[i] = pc->links[i] ? 0 : -errno;
	}
	return pc;
fail:
	nupp_probecheck_close(pc);
	return NULL;
}

/* Hits and decoded argument count of probe i so far. */
int nupp_probecheck_read(struct nupp_probecheck *pc, int i, __u64 *hits, int *nargs)
{
	if (i < 0 || i >= NUPP_PROBES)
		return -EINVAL;
	*hits = pc->skel->bss->probe_hits[i];
	*nargs = *hits ? pc->skel->bss->probe_nargs[i] : -1;
	return 0;
}

/* Detaches and frees. */
void nupp_probecheck_close(struct nupp_probecheck *pc)
{
	int i;

	if (!pc)
		return;
	for (i = 0; i < NUPP_PROBES; i++)
		bpf_link__destroy(pc->links[i]);
	probecheck_bpf__destroy(pc->skel);
	free(pc);
}
