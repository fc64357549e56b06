// SPDX-License-Identifier: GPL-2.0
/* luajit:vm_open / vm_close consumer: reports each VM's g, L and layout to userspace. */
/* UAPI headers, not vmlinux.h: nothing here reads a kernel structure, and without CO-RE
 * relocations libbpf need not read the kernel's BTF (5.5 MB) to load this object. */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <stdbool.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "nupp/abi.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} vm_events SEC(".maps");

/* Sends one VM event; the layout is read from the target while the probe holds it. */
static __always_inline int vmwatch_emit(__u32 kind, __u64 g, __u64 L, __u64 layout_addr)
{
	struct nupp_vm_event *ev = bpf_ringbuf_reserve(&vm_events, sizeof(*ev), 0);
	__u64 id = bpf_get_current_pid_tgid();

	if (!ev)
		return 0;
	ev->kind = kind;
	ev->tgid = id >> 32;
	ev->tid = (__u32)id;
	ev->g = g;
	ev->L = L;
	ev->layout_addr = layout_addr;
	ev->layout_err = 0;
	if (layout_addr)
		ev->layout_err = bpf_probe_read_user(&ev->layout, sizeof(ev->layout), (void *)layout_addr);
	else
		__builtin_memset(&ev->layout, 0, sizeof(ev->layout));
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

/* luajit:vm_open(g, L, &luajit_bpf_layout), at the end of lua_newstate. */
SEC("usdt")
int BPF_USDT(vmwatch_open, __u64 g, __u64 L, __u64 layout)
{
	return vmwatch_emit(NUPP_VM_OPEN, g, L, layout);
}

/* luajit:vm_close(g), at the top of lua_close. */
SEC("usdt")
int BPF_USDT(vmwatch_close, __u64 g)
{
	return vmwatch_emit(NUPP_VM_CLOSE, g, 0, 0);
}
