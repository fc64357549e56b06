// SPDX-License-Identifier: GPL-2.0
/* Counts hits of each luajit:* USDT probe (the BPF cookie is the probe's index). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "nupp/abi.h"

char LICENSE[] SEC("license") = "GPL";

__u64 probe_hits[NUPP_PROBE__MAX];
__s32 probe_nargs[NUPP_PROBE__MAX];
const volatile __u32 target_tgid;

/* One program for every probe: counts the hit and the argument count libbpf parsed. */
SEC("usdt")
int probecheck_hit(struct pt_regs *ctx)
{
	__u64 i = bpf_usdt_cookie(ctx);

	if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	if (i < NUPP_PROBE__MAX) {
		__sync_fetch_and_add(&probe_hits[i], 1);
		probe_nargs[i] = bpf_usdt_arg_cnt(ctx);
	}
	return 0;
}
