// SPDX-License-Identifier: GPL-2.0
/* The process follower alone (bpf/follow.h), for a session without the sampler: the
 * sampler's object holds the same programs. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "follow.h"

char LICENSE[] SEC("license") = "GPL";
