/* The luajit:vm_open consumer: learns g, L and the layout of each VM as it opens. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>

#include "nupp/abi.h"
#include "nupp_internal.h"
#include "vmwatch.skel.h"

#define VMWATCH_QUEUE 16

struct nupp_vmwatch {
	struct vmwatch_bpf *skel;
	struct ring_buffer *rb;
	struct nupp_vm queue[VMWATCH_QUEUE];
	int head, count;
	char binary[512];
};

/* Ring buffer callback: queues each vm_open as a struct nupp_vm. */
static int vmwatch_on_event(void *ctx, void *data, size_t size)
{
	struct nupp_vmwatch *w = ctx;
	const struct nupp_vm_event *ev = data;
	struct nupp_vm *vm;

	if (size < sizeof(*ev) || ev->kind != NUPP_VM_OPEN)
		return 0;
	if (w->count == VMWATCH_QUEUE) {
		nupp_pr(NUPP_WARN, "vm_open queue full, dropping VM of PID %u\n", ev->tgid);
		return 0;
	}
	vm = &w->queue[(w->head + w->count++) % VMWATCH_QUEUE];
	memset(vm, 0, sizeof(*vm));
	vm->pid = (pid_t)ev->tgid;
	vm->g = ev->g;
	vm->L = ev->L;
	vm->layout_addr = ev->layout_addr;
	if (ev->layout_err == 0)
		vm->layout = ev->layout;
	snprintf(vm->path, sizeof(vm->path), "%s", w->binary);
	return 0;
}

/* Attaches to luajit:vm_open / vm_close of a binary. */
struct nupp_vmwatch *nupp_vmwatch_open(const struct nupp_vmwatch_opts *opts, int *err)
{
	struct nupp_vmwatch *w = calloc(1, sizeof(*w));
	pid_t pid = opts->pid > 0 ? opts->pid : -1;
	struct bpf_link *l;
	int e;

	if (!w) {
		*err = -ENOMEM;
		return NULL;
	}
	snprintf(w->binary, sizeof(w->binary), "%s", opts->binary);
	w->skel = vmwatch_bpf__open_and_load();
	if (!w->skel) {
		e = -errno;
		nupp_fail(e, "cannot load the vm_open BPF program: %s (CAP_BPF and CAP_PERFMON are required; run with sudo)",
			  strerror(-e));
		goto fail;
	}
	l = bpf_program__attach_usdt(w->skel->progs.vmwatch_open, pid, opts->binary, "luajit", "vm_open", NULL);
	if (!l) {
		e = -errno;
		nupp_fail(e, "cannot attach to luajit:vm_open in %s: %s (is it our LuaJIT build?)", opts->binary,
			  strerror(-e));
		goto fail;
	}
	w->skel->links.vmwatch_open = l;
	l = bpf_program__attach_usdt(w->skel->progs.vmwatch_close, pid, opts->binary, "luajit", "vm_close", NULL);
	if (!l) {
		e = -errno;
		nupp_fail(e, "cannot attach to luajit:vm_close in %s: %s", opts->binary, strerror(-e));
		goto fail;
	}
	w->skel->links.vmwatch_close = l;
	w->rb = ring_buffer__new(bpf_map__fd(w->skel->maps.vm_events), vmwatch_on_event, w, NULL);
	if (!w->rb) {
		e = -errno;
		nupp_fail(e, "cannot open the vm_open ring buffer: %s", strerror(-e));
		goto fail;
	}
	return w;
fail:
	nupp_vmwatch_close(w);
	*err = e;
	return NULL;
}

/* Waits up to timeout_ms for the next VM opened: 1 and *out, 0 on timeout, -errno. */
int nupp_vmwatch_next(struct nupp_vmwatch *w, int timeout_ms, struct nupp_vm *out)
{
	if (!w->count) {
		int n = ring_buffer__poll(w->rb, timeout_ms);

		if (n < 0 && n != -EINTR)
			return n;
	}
	if (!w->count)
		return 0;
	*out = w->queue[w->head];
	w->head = (w->head + 1) % VMWATCH_QUEUE;
	w->count--;
	return 1;
}

/* Detaches and frees. */
void nupp_vmwatch_close(struct nupp_vmwatch *w)
{
	if (!w)
		return;
	ring_buffer__free(w->rb);
	vmwatch_bpf__destroy(w->skel);
	free(w);
}
