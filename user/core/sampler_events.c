/* The sampler's event ring and polls: VM opens and closes, prototype lifetimes and trace
 * copies, each handed to its target's address map, symbolizer and trace cache (made here
 * when a target first needs them), and the prototypes met read ahead at a bounded rate.
 * Names no stack and reads no count: that is the drain's (sampler_drain.c, sampler_name.c). */
#include <errno.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "nupp/sampler.h"
#include "nupp_internal.h"
#include "sampler_internal.h"
#include "sampler_priv.h"
#include "sampler.skel.h"

/* Prototypes met read at once a second at most (smp_prefetch). */
#define SMP_PREFETCH_RATE 4096
/* Returned by the ring buffer callback when the poll's budget is spent. */
#define SMP_EV_BUDGET (-EOVERFLOW)

/* process_vm_readv reader for the symbolizer and trace cache. */
static int smp_read(void *ctx, __u64 addr, void *buf, size_t len)
{
	return nupp_vm_read((pid_t)(long)ctx, addr, buf, len);
}

/* Vectored process_vm_readv reader for the symbolizer. */
static int smp_readv(void *ctx, const struct nupp_read_seg *seg, int n)
{
	return nupp_vm_readv((pid_t)(long)ctx, seg, n);
}

/* The target entry of pid, or NULL. */
struct smp_target *smp_target(struct nupp_sampler *s, pid_t pid)
{
	int i;

	for (i = 0; i < s->ntargets; i++)
		if (s->targets[i].pid == pid)
			return &s->targets[i];
	return NULL;
}

/* A prototype met or freed: the symbolizer learns which incarnation a generation saw. */
static void smp_on_proto(struct nupp_sampler *s, struct smp_target *t, const struct nupp_smp_proto_event *ev,
			 size_t size)
{
	const char *data = (const char *)(ev + 1);
	int e;

	if (smp_target_ready(s, t) && !t->sym)
		return; /* no symbolizer (ENOMEM): nothing of the process is named */
	if (size < sizeof(*ev) || size - sizeof(*ev) < ev->size) {
		t->reset = 1; /* a free not recorded is a lost free: start over at the drain */
		return;
	}
	if (ev->kind == NUPP_SMP_EV_PROTO_KSTR)
		e = nupp_sym_kstrs(t->sym, ev->pt, ev->pgen, data, ev->size);
	else if (ev->kind == NUPP_SMP_EV_PROTO_NEW)
		e = nupp_sym_born(t->sym, ev->pt, ev->pgen, ev->chunkname, ev->firstline, ev->sizebc, data, ev->size,
				  ev->full);
	else if (ev->kind == NUPP_SMP_EV_PROTO_COPY)
		e = nupp_sym_copied(t->sym, ev->pt, ev->pgen, ev->chunkname, ev->firstline, ev->sizebc, data,
				    ev->size, ev->full);
	else
		e = nupp_sym_freed(t->sym, ev->pt, ev->pgen, ev->chunkname, ev->firstline, ev->sizebc, data,
				   ev->size, ev->full);
	if (e)
		nupp_pr(NUPP_DEBUG, "PID %d: prototype event: %s\n", (int)t->pid, strerror(-e));
}

static void smp_handle_event(struct nupp_sampler *s, void *data, size_t size);

/* Ring buffer callback: handles the event; once the poll's budget is spent, stops the
 * poll (libbpf has consumed this event already; the rest wait for the next poll). */
int smp_on_event(void *ctx, void *data, size_t size)
{
	struct nupp_sampler *s = ctx;

	smp_handle_event(s, data, size);
	s->ev_handled++;
	return --s->ev_left > 0 ? 0 : SMP_EV_BUDGET;
}

/* A VM, trace or prototype lifetime event. */
static void smp_handle_event(struct nupp_sampler *s, void *data, size_t size)
{
	const struct nupp_smp_event *ev = data;
	struct smp_target *t;

	if (size < sizeof(__u32) * 2)
		return;
	t = smp_target(s, (pid_t)ev->tgid);
	if (!t)
		return;
	if (ev->kind == NUPP_SMP_EV_PROTO_NEW || ev->kind == NUPP_SMP_EV_PROTO_FREE ||
	    ev->kind == NUPP_SMP_EV_PROTO_KSTR || ev->kind == NUPP_SMP_EV_PROTO_COPY) {
		smp_on_proto(s, t, data, size);
		return;
	}
	if (size < sizeof(*ev))
		return;
	switch (ev->kind) {
	case NUPP_SMP_EV_VM_CLOSE:
		/* The process's code is mapped now; it may be gone by the next drain. */
		if (t->amap)
			nupp_addrmap_refresh(t->amap);
		break;
	case NUPP_SMP_EV_VM_OPEN:
		if (t->amap)
			nupp_addrmap_refresh(t->amap);
		if (!t->have_layout) {
			struct nupp_smp_proc p;
			__u32 key = ev->tgid;

			if (!bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.procs), &key, &p) && p.layout_ok) {
				t->lo = p.lo;
				t->have_layout = 1;
			}
		}
		break;
	case NUPP_SMP_EV_TRACE_COPY:
		/* A trace as BPF copied it at its first sample (struct nupp_smp_trace_event),
		 * decoded when the drain names that sample. One not kept costs only a read of
		 * the trace then, if it still lives. */
		if (!smp_target_ready(s, t)) {
			int e = nupp_traces_add_copy(t->traces, data, size);

			if (e)
				nupp_pr(NUPP_DEBUG, "PID %d: trace copy not kept: %s\n", (int)t->pid, strerror(-e));
		}
		break;
	}
}

/* Reads the prototypes met since the last poll while they live, SMP_PREFETCH_RATE a
 * second at most (a target that makes prototypes without pause has most of them read
 * when a sample needs them). */
static void smp_prefetch(struct nupp_sampler *s)
{
	__u64 now = smp_now_us();
	int i;

	for (i = 0; i < s->ntargets; i++) {
		struct smp_target *t = &s->targets[i];

		if (!t->sym)
			continue;
		if (!t->pf_us)
			t->pf_tokens = SMP_PREFETCH_RATE;
		else
			t->pf_tokens += (double)(now - t->pf_us) * SMP_PREFETCH_RATE / 1e6;
		if (t->pf_tokens > SMP_PREFETCH_RATE)
			t->pf_tokens = SMP_PREFETCH_RATE;
		t->pf_us = now;
		t->pf_tokens -= nupp_sym_prefetch(t->sym, (int)t->pf_tokens);
	}
}

int nupp_smp_epoll_fd(struct nupp_sampler *s)
{
	return ring_buffer__epoll_fd(s->rb);
}

/* Services ring buffers (VM, trace and prototype lifetime events) for up to timeout_ms,
 * at most SMP_POLL_EVENTS events. */
int nupp_sampler_poll(struct nupp_sampler *s, int timeout_ms)
{
	int n;

	s->ev_left = SMP_POLL_EVENTS;
	n = ring_buffer__poll(s->rb, timeout_ms);
	/* Prototype events do not wake us (bpf/sampler.bpf.c): read what is there. */
	if (n >= 0 && s->ev_left > 0)
		n = ring_buffer__consume(s->rb);
	smp_prefetch(s);
	return n < 0 && n != -EINTR && n != SMP_EV_BUDGET ? n : 0;
}

/* Handles the events sent so far, up to max: 0 when none is left, 1 when the budget ran
 * out first (the target sends faster than we read). */
int smp_consume(struct nupp_sampler *s, long max)
{
	int n;

	s->ev_left = max;
	n = ring_buffer__consume(s->rb);
	return n == SMP_EV_BUDGET;
}

/* Makes sure a target has its symbolizer and trace cache. */
int smp_target_ready(struct nupp_sampler *s, struct smp_target *t)
{
	if (!t->have_layout) {
		struct nupp_smp_proc p;
		__u32 key = (__u32)t->pid;

		if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.procs), &key, &p) || !p.layout_ok)
			return -ENOENT;
		t->lo = p.lo;
		t->have_layout = 1;
	}
	if (!t->sym) {
		t->sym = nupp_sym_new(t->pid, &t->lo, s->opts.lines, smp_read, (void *)(long)t->pid);
		if (t->sym) {
			nupp_sym_set_full_filenames(t->sym, s->opts.full_filenames);
			nupp_sym_set_readv(t->sym, smp_readv);
		}
		if (t->sym && t->amap)
			nupp_sym_set_addrmap(t->sym, t->amap);
	}
	if (!t->traces)
		t->traces = nupp_traces_new(&t->lo, smp_read, (void *)(long)t->pid);
	if (t->traces && t->sym)
		nupp_traces_set_sym(t->traces, t->sym);
	return t->sym && t->traces ? 0 : -ENOMEM;
}

