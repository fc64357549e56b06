// SPDX-License-Identifier: GPL-2.0
/* nupp-bpf doctor: the two kinds of program record relies on (a CPU-clock perf_event
 * program and a uprobe), in their smallest form, so each can be tried on its own. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

__u64 ticks;       /* CPU-clock samples seen */
__u64 uprobe_hits; /* calls of the probed function seen */

/* Counts a CPU-clock sample. */
SEC("perf_event")
int doctor_tick(void *ctx)
{
	__sync_fetch_and_add(&ticks, 1);
	return 0;
}

/* Counts a call of the function the uprobe is on. */
SEC("uprobe")
int doctor_uprobe(struct pt_regs *ctx)
{
	__sync_fetch_and_add(&uprobe_hits, 1);
	return 0;
}
