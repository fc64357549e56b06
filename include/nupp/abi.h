/* Map keys, values, events and limits shared by the BPF programs and libnupp.
 * Fixed-width types only; compiles as BPF (vmlinux.h) and as host C. */
#ifndef NUPP_ABI_H
#define NUPP_ABI_H

#include "nupp/lj_layout.h"

#define NUPP_MAX_TARGETS 64 /* processes profiled at once */

/* -- vm_open / vm_close events (bpf/vmwatch.bpf.c) ------------------------------ */

enum nupp_vm_event_kind { NUPP_VM_OPEN = 1, NUPP_VM_CLOSE = 2 };

struct nupp_vm_event {
	__u32 kind; /* enum nupp_vm_event_kind */
	__u32 tgid;
	__u32 tid;
	__s32 layout_err; /* bpf_probe_read_user of the layout: 0 or -errno */
	__u64 g;
	__u64 L;
	__u64 layout_addr;
	struct nupp_lj_layout layout;
};

/* -- The luajit:* USDT probes of our LuaJIT build (scripts/luajit-usdt.patch) -------- */

enum nupp_probe {
	NUPP_PROBE_VM_OPEN,
	NUPP_PROBE_VM_CLOSE,
	NUPP_PROBE_TRACE_START,
	NUPP_PROBE_TRACE_STOP,
	NUPP_PROBE_TRACE_ABORT,
	NUPP_PROBE_TRACE_BLACKLIST,
	NUPP_PROBE_TRACE_FLUSH,
	NUPP_PROBE_TRACE_FREE,
	NUPP_PROBE_PROTO_FREE,
	NUPP_PROBE_PROTO_NEW,
	NUPP_PROBE_TRACE_ABORT_BENIGN,
	NUPP_PROBE__MAX
};

#endif /* NUPP_ABI_H */
