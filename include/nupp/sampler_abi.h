/* The sampler channel's BPF ABI: map keys, values, events and limits shared by
 * bpf/sampler.bpf.c and user/core/sampler*.c. Fixed-width types; compiles as BPF and host C.
 * Every type is prefixed nupp_smp_ (vmlinux.h already has struct key, struct node, BAD). */
#ifndef NUPP_SAMPLER_ABI_H
#define NUPP_SAMPLER_ABI_H

#include "nupp/lj_layout.h"
#include "nupp/lost.h"
#include "nupp/proto_gen.h"

#define NUPP_SMP_MAX_DEPTH 256   /* frames per stack at most, a power of two (index masking) */
#define NUPP_SMP_DEFAULT_DEPTH 64 /* frames per stack by default */
#define NUPP_SMP_MAX_VMS 8       /* VMs per process */
#define NUPP_SMP_MAX_CORO 4      /* coroutine levels chained through resume/wrap */
#define NUPP_SMP_MAX_TARGETS 256 /* processes sampled at once */
#define NUPP_SMP_MAX_THREADS 4096 /* thread -> stack mapping cache */
#define NUPP_SMP_MAX_CPUS 1024   /* CPUs (in-flight markers), a power of two */
/* Frame cache entries per CPU (2 ways a set, a power of two): the sampler's fcache map
 * holds fc_ncpu times as many, CPU c's from c * NUPP_SMP_FC_ENTRIES. */
#define NUPP_SMP_FC_ENTRIES 16384
/* Function cache entries per CPU (fncache, likewise): what walks read of functions. */
#define NUPP_SMP_FNC_ENTRIES 4096
/* The counts, stacks, host and loss maps hold two buffers: BPF counts into buffer
 * (epoch & 1), userspace flips the epoch, waits until no sample of the old buffer is in
 * flight, and reads and empties the old buffer while nothing writes it. A key says its
 * buffer: the top bit of a count key's tgid and of a stack hash, a host key's buf. */
#define NUPP_SMP_NBUF 2
#define NUPP_SMP_TGID_BUF 0x80000000u
#define NUPP_SMP_STACK_BUF (1ull << 63)

/* The marks of the stacks BPF sent (the stacks map): a direct-mapped array of stack keys,
 * half a buffer's, of slots per half (a power of two, nupp_smp_stack_slots); 0 marks
 * none. A stack whose slot holds another stack's is sent again when it is met again, and
 * userspace keeps the first copy: a mark costs a write, not an allocation, and a collision
 * costs a send. */
#define NUPP_SMP_STK_SLOTS_MAX (1u << 22)
/* Distinct stacks a buffer's counts map holds unless told (--max-stacks). */
#define NUPP_SMP_DEFAULT_STACKS 16384u

/* Slots per half for max_stacks stacks a buffer: twice as many, a power of two. */
static inline __u32 nupp_smp_stack_slots(__u32 max_stacks)
{
	__u32 n = 64;

	while (n < NUPP_SMP_STK_SLOTS_MAX && n < 2ull * max_stacks)
		n *= 2;
	return n;
}

/* The slot of stack key k (its buffer in its top bit) among 2 x slots. */
static inline __attribute__((always_inline)) __u32 nupp_smp_stack_slot(__u64 k, __u32 slots)
{
	__u32 i = (__u32)((k * 0x9e3779b97f4a7c15ull) >> 32) & (slots - 1);

	return (k & NUPP_SMP_STACK_BUF) ? slots + i : i;
}

/* Indexes of the lost counters: those of enum nupp_lost (nupp/lost.h). */
#define NUPP_SMP_LOST_NO_VM NUPP_LOST_NO_VM
#define NUPP_SMP_LOST_READ_FAULT NUPP_LOST_READ_FAULT
#define NUPP_SMP_LOST_BAD_FRAME NUPP_LOST_BAD_FRAME
#define NUPP_SMP_LOST_TRUNCATED NUPP_LOST_TRUNCATED
#define NUPP_SMP_LOST_MAP_FULL NUPP_LOST_MAP_FULL
/* A new stack the stack ring had no room for: reported as NUPP_LOST_MAP_FULL, but its
 * stack was not marked sent (no counts map overflowed, nothing to sweep). */
#define NUPP_SMP_LOST_RING_FULL 5
#define NUPP_SMP_LOST_N 6

/* Frame kinds. */
enum nupp_smp_frame_kind {
	NUPP_SMP_LUA = 1,  /* ptr = GCproto*, pos = bytecode index or -1 */
	NUPP_SMP_FF = 2,   /* ptr = ffid of a builtin ("fast function") */
	NUPP_SMP_C = 3,    /* ptr = lua_CFunction address */
	NUPP_SMP_CORO = 4, /* separator: frames below belong to the resumer; ptr = coroutine L */
	NUPP_SMP_HOST = 5, /* native code outside every VM; ptr = user IP (userspace only) */
};

/* One frame, innermost first in a stack. */
struct nupp_smp_frame {
	__u64 ptr;       /* see enum nupp_smp_frame_kind */
	__u64 chunkname; /* LUA: GCstr* of the chunk name (fingerprint) */
	__s32 firstline; /* LUA: fingerprint */
	__u32 sizebc;    /* LUA: fingerprint */
	__s32 pos;       /* LUA: index of the current (or calling) bytecode, -1 unknown */
	__u8 kind;       /* enum nupp_smp_frame_kind */
	__u8 link;       /* frame type of the link that called it (FRAME_LUA, FRAME_CONT ...) */
	__u16 pad;
};

/* Stack flags. */
#define NUPP_SMP_F_TRACE 1u   /* sampled on a trace: frames[0] is the trace's start frame */
#define NUPP_SMP_F_MCODE 2u   /* ... and the IP was in the trace's machine code (mcofs valid) */
#define NUPP_SMP_F_REGS 4u    /* leaf from the interpreter's registers */
#define NUPP_SMP_F_LBASE 8u   /* started from L->base (after another start failed) */
#define NUPP_SMP_F_RBP 16u    /* started from rbp (INTERP in a C helper) */
#define NUPP_SMP_F_STRICT 32u /* INTERP (or RECORD) outside registers mode: leaf matched rbx */
#define NUPP_SMP_F_CUT 64u    /* deeper than the depth: the leaf-most frames are kept */
/* INTERP in a C helper the interpreter called (IP outside its code, or in the VM's own
 * code below its C frame; the return address below its C frame inside it): started from
 * L->base with SAVE_PC; callsite is that return address, and userspace keeps the stack
 * only if that call site syncs both (L->base only: the leaf loses its position). */
#define NUPP_SMP_F_HELPER 128u
/* On a trace, in a C function the trace called: mcofs is that call's return address
 * minus one (inside the call instruction), so the call site's snapshot applies. */
#define NUPP_SMP_F_MCALL 256u
/* ... with HELPER: the helper made a protected call (lj_vm_cpcall: the JIT compiler
 * started by lj_trace_hot, lj_dispatch_call, lj_dispatch_ins or lj_dispatch_stitch) and
 * the sample is under it: SAVE_PC and callsite are those of the C frame below the
 * protected call's, so the helper synced both if it had by the time of that call. */
#define NUPP_SMP_F_CPCALL 512u
/* ... with HELPER: SAVE_PC is not inside the leaf Lua function at L->base (pos -1): the
 * stack is the helper's only if its call stored L->base (SAVE_PC need not be synced). */
#define NUPP_SMP_F_NOPC 1024u

/* A walked stack, the value of the stacks map (keyed by its 64-bit hash). */
struct nupp_smp_stack {
	__u32 depth;   /* frames used */
	__u32 flags;   /* NUPP_SMP_F_* */
	__u32 traceno; /* trace number (flags & TRACE) */
	__u32 mcofs;   /* IP - T->mcode (flags & MCODE) */
	__u64 trace;   /* GCtrace* */
	__u64 mcode;   /* T->mcode */
	/* The process's prototype generation when sampled (nupp_smp_proc.pgen): names each
	 * GCproto* of the frames as the incarnation alive then (part of the stack hash). */
	__u64 pgen;
	__u64 callsite; /* flags & HELPER: return address into the interpreter */
	__u64 g;        /* the VM's global_State */
	/* flags & TRACE: the trace's serial (GCtrace.serial: unique in the process, so with
	 * trace, traceno and mcode it names this incarnation of the trace; 0 unknown) */
	__u32 tserial;
	__u32 pad_t;
	struct nupp_smp_frame frames[NUPP_SMP_MAX_DEPTH];
};

/* Bytes of a stack value with room for depth frames (the stacks maps' value size). */
#define NUPP_SMP_STACK_SIZE(depth) \
	(sizeof(struct nupp_smp_stack) - sizeof(struct nupp_smp_frame) * (NUPP_SMP_MAX_DEPTH - (depth)))

/* A stack sent on the sampler's stack ring (stk_ring) when a buffer first counts it: its
 * key (with the buffer bit), then the stack up to its depth. The stacks map holds only the
 * key, in the stack's slot, as a mark that it was sent. */
struct nupp_smp_stack_rec {
	__u64 key;
	struct nupp_smp_stack st;
};

/* A CPU's in-flight marker (odd while a sample runs there), one cache line each. */
struct nupp_smp_inflight {
	__u64 n;
	/* The CPU's last CPU-clock tick: its time (bpf_ktime_get_ns), the steal clock then
	 * (ns the hypervisor kept the CPU from running), the time counted by ticks but
	 * stolen, not yet taken off, how late recent ticks were that no steal shown has
	 * matched yet, and until when that lateness may still be matched
	 * (nupp_smp_steal_tick). */
	__u64 tick_ns, steal_ns, debt_ns, late_ns;
	__u64 task; /* the thread that tick interrupted (pid_tgid) */
	__u64 late_until;
	__u64 pad;
} __attribute__((aligned(64)));

/* How long after a late tick the steal clock may still show the time that tick stood
 * for: the scheduler reads it at its own ticks (10 ms apart at HZ=100, the slowest). */
#define NUPP_SMP_STEAL_LAG_NS 10000000ull

/* A CPU-clock sample fires every period of wall time on its CPU, so time a hypervisor
 * takes from a virtual CPU (steal) would be counted as the CPU time of the task it
 * interrupted. At a tick at now (ns), the steal clock at steal: the tick counts one
 * period for the interval since the CPU's previous tick, in which the task ran that
 * interval less what was stolen; a tick late by more than a period (after a long steal)
 * still counts one, so the stolen time beyond what is late was counted, and goes to the
 * CPU's debt. A tick is dropped (returns 1) while the debt holds a period, so the samples
 * count the time tasks ran. The steal clock is read as the scheduler last saw it (up to
 * one scheduler tick behind, many sample periods at a high rate): stolen time is matched
 * with the lateness of the ticks of the last NUPP_SMP_STEAL_LAG_NS that no steal shown
 * matched yet. The scheduler takes its reading at a switch of threads too, so what
 * shows at the first tick of another thread (task, the tick's pid_tgid) may have been
 * stolen from the one before: it is not charged, and the debt of the one before goes
 * with it. */
static inline int nupp_smp_steal_tick(struct nupp_smp_inflight *f, __u64 now, __u64 steal, __u64 period,
				      __u64 task)
{
	__u64 dt = now - f->tick_ns, ds = steal - f->steal_ns, late, use;
	int fresh = !f->tick_ns || f->task != task; /* the CPU's first tick, or another thread's */

	f->tick_ns = now;
	f->steal_ns = steal;
	if (fresh || !period) {
		f->task = task;
		f->debt_ns = 0;
		f->late_ns = 0;
		f->late_until = 0;
		return 0;
	}
	if (now > f->late_until)
		f->late_ns = 0; /* lateness too old to be stolen time still to show */
	late = dt > period ? dt - period : 0;
	if (late) {
		f->late_ns += late;
		f->late_until = now + NUPP_SMP_STEAL_LAG_NS;
	}
	if ((__s64)ds > 0) {
		use = ds < f->late_ns ? ds : f->late_ns;
		f->late_ns -= use;
		f->debt_ns += ds - use;
		if (f->debt_ns > 64 * period) /* a burst is taken off the next 64 ticks at most */
			f->debt_ns = 64 * period;
	}
	if (f->debt_ns < period)
		return 0;
	f->debt_ns -= period;
	return 1;
}

/* Key of the host maps: a sample of native code outside every VM (value: __u64 count). */
struct nupp_smp_host_key {
	__u32 tgid;
	__u32 buf; /* buffer, 0 or 1 */
	__u64 ip;  /* user instruction pointer */
	__u32 tid; /* the thread sampled */
	__u32 pad; /* 0 */
};

/* The five states of a sample (seed: profile.Sample). */
enum nupp_smp_state {
	NUPP_SMP_COMPILED,    /* vmstate >= 0 */
	NUPP_SMP_INTERPRETED, /* INTERP */
	NUPP_SMP_CCODE,       /* C */
	NUPP_SMP_COLLECTING,  /* GC */
	NUPP_SMP_COMPILING,   /* EXIT, RECORD, OPT, ASM */
	NUPP_SMP_NSTATES
};

/* Key of the counts map. */
struct nupp_smp_count_key {
	__u32 tgid;
	__u32 zone;  /* zone path id, 0 = "" */
	__u64 stack; /* hash of the stack = key of the stacks map */
	__u32 tid;   /* the thread sampled */
	__u32 pad;   /* 0 */
};

/* Value of the counts map. */
struct nupp_smp_count {
	__u64 n[NUPP_SMP_NSTATES];
};

/* Per-process value of the procs map (the tgid filter). */
struct nupp_smp_proc {
	__u32 nvm;      /* slots of g[] used (0: no VM known yet); a closed VM leaves 0 */
	__u32 layout_ok;
	__u64 g[NUPP_SMP_MAX_VMS];
	/* 1 when luajit:proto_free of the VM's LuaJIT is attached for this process, so the
	 * walker's frame cache may be used for its samples (include/nupp/walk.h). */
	__u8 fc_ok[NUPP_SMP_MAX_VMS];
	__u64 zone_addr[NUPP_SMP_MAX_VMS]; /* the VM's vmlist zone_tv slot (nupp_zone_read), 0 = none */
	/* Prototype generation, +1 for every free of a prototype a sample or a trace copy
	 * met; the protocol is nupp/proto_gen.h's. */
	__u64 pgen;
	/* proto_free events lost (ring buffer full): when it grows, userspace forgets what it
	 * knew of the process's prototypes and refuses samples up to the current generation
	 * (which is past every lost one: a generation is taken before its event is sent). */
	__u64 nlost;
	/* Prototypes met that were freed (as pgen, nupp/proto_gen.h): the walker's frame
	 * cache count (fc_pg). */
	__u64 pfrees;
	struct nupp_lj_layout lo;
};

/* What userspace changes in a process's entry (nupp_sampler_add_pid, _set_zone_addr),
 * given to the syscall program nupp_smp_proc_set, which makes the change in place: a
 * whole entry read and written back could undo what the probes added meanwhile (pgen,
 * pfrees, nlost, a VM opened), and a generation that goes back could name a frame by
 * another incarnation of its address. */
struct nupp_smp_proc_set {
	__u32 tgid;
	__u32 nvm;                    /* VMs in g[]: each added unless known */
	__u64 g[NUPP_SMP_MAX_VMS];
	__u8 fc_ok[NUPP_SMP_MAX_VMS]; /* 1: set that VM's fc_ok */
	__u32 set_layout;             /* 1: take lo unless the entry has a layout */
	__u32 set_zone;               /* 1: the zone slot of VM zone_g is zone_addr */
	__u64 zone_g;
	__u64 zone_addr;
	struct nupp_lj_layout lo;
};

/* Events sent to userspace (VM open/close, prototypes met and freed, trace copies). */
enum nupp_smp_event_kind {
	NUPP_SMP_EV_VM_OPEN = 1,
	NUPP_SMP_EV_VM_CLOSE,
	NUPP_SMP_EV_TRACE_COPY, /* struct nupp_smp_trace_event: a trace at its first sample */
	NUPP_SMP_EV_UNUSED4,    /* (a trace freed, no longer sent) */
	NUPP_SMP_EV_UNUSED5,    /* (a trace flush, no longer sent) */
	NUPP_SMP_EV_PROTO_NEW,  /* struct nupp_smp_proto_event + the chunk name: a prototype
				 * met by a sample or a trace copy for the first time, alive */
	NUPP_SMP_EV_PROTO_FREE, /* struct nupp_smp_proto_event + the prototype's allocation:
				 * a prototype met before dies */
	/* After a PROTO_FREE of a closing VM (lua_close frees prototypes before strings), or
	 * a PROTO_COPY: struct nupp_smp_proto_event + its string constants (struct
	 * nupp_smp_kstr each), so functions named by a constant of a caller are named after
	 * the process exits. */
	NUPP_SMP_EV_PROTO_KSTR,
	/* After a PROTO_NEW: struct nupp_smp_proto_event (pgen the same) + the prototype's
	 * allocation as the sample found it, then a PROTO_KSTR of its string constants: a
	 * prototype met last before the process exits is named without reading it. */
	NUPP_SMP_EV_PROTO_COPY,
};

struct nupp_smp_event {
	__u32 kind;
	__u32 tgid;
	__u64 g;
	__u64 trace; /* GCtrace* */
	__u64 mcode;
	__u32 traceno;
	__u32 serial; /* TRACE_COPY: the trace's serial (GCtrace.serial) */
	/* TRACE_COPY: the process's prototype generation when the copy was made (the trace,
	 * and so the prototypes of its functions, alive then). */
	__u64 pgen;
};

/* NUPP_SMP_EV_TRACE_COPY carries what naming the trace's samples needs, copied by BPF
 * while the trace is certainly alive (in its first sample: the sampled thread runs it):
 * the trace itself (GCtrace, IR, snapshots and snapshot map, one block from T on,
 * lj_trace.c trace_save) and the identity of the functions of its snapshots' frames. */
#define NUPP_SMP_TRACE_MAX 24576 /* bytes of the trace copied; a larger one is not copied */
#define NUPP_SMP_TRACE_FNS 64    /* functions named (a power of two); more: the trace is not */

/* A function of a trace's frames (a KGC constant in a frame's function slot), or a
 * prototype: with fn 0 the trace's start prototype (T->startpt), with fn odd the
 * prototype at fn - 1 that a call specialised to a prototype guards (an IR_KGC of type
 * IRT_PROTO; GC objects are 8-byte aligned, so no GCfunc* is odd). */
#define NUPP_SMP_TRACE_FN_PROTO 1ull /* tag of a prototype's fn */
struct nupp_smp_trace_fn {
	__u64 fn;        /* GCfunc*; 0: the start prototype; odd: the prototype fn - 1 */
	__u64 ptr;       /* LUA: GCproto*; C: lua_CFunction; FF: ffid */
	__u64 chunkname; /* LUA: the prototype's fingerprint */
	__s32 firstline;
	__u32 sizebc;
	__u32 sizept;    /* LUA: bytes of the prototype's allocation */
	__u8 kind;       /* enum nupp_smp_frame_kind; 0: not a function, or not readable */
	__u8 pad[3];
};

/* Offset in data[] of the function table of a trace copy of size bytes. */
#define NUPP_SMP_TRACE_FN_OFS(size) (((size) + 7u) & ~7u)

/* The TRACE_COPY event: a struct nupp_smp_event (trace, traceno, mcode, serial, pgen),
 * then the copy: the trace (size bytes from T on), then from NUPP_SMP_TRACE_FN_OFS(size)
 * its nfn functions. Only what is used is sent. */
struct nupp_smp_trace_event {
	struct nupp_smp_event h;
	__u32 size;  /* bytes of the trace in data[]; 0: not copied */
	__u32 nfn;   /* functions after it; NUPP_SMP_TRACE_FNS + 1: more did not fit (none sent: the trace is then read from the target) */
	/* A side trace's root start prototype (the GCproto of the frame it starts in,
	 * J->trace[T->root]->startpt, read with the copy); 0 for a root trace. */
	__u64 start0;
	__u8 data[NUPP_SMP_TRACE_MAX + NUPP_SMP_TRACE_FNS * sizeof(struct nupp_smp_trace_fn)];
};

/* What became of each copy of a trace at its first sample (the sampler's tcopy[]
 * counters, one per outcome): sent with a whole copy, or why not. A trace without a copy
 * is read from the target by userspace when it names the sample, if the trace still
 * lives then. */
enum nupp_smp_tcopy {
	NUPP_SMP_TC_COPIED,    /* sent with the whole trace and its functions */
	NUPP_SMP_TC_UNWATCHED, /* a function's prototype could not be watched (map full) */
	NUPP_SMP_TC_HDRFAULT,  /* the GCtrace header could not be read */
	NUPP_SMP_TC_SHAPE,     /* IR, snapshots and map are not one block after the header */
	NUPP_SMP_TC_TOOBIG,    /* larger than NUPP_SMP_TRACE_MAX */
	NUPP_SMP_TC_FAULT,     /* the block could not be read */
	NUPP_SMP_TC_FNS,       /* more functions than NUPP_SMP_TRACE_FNS */
	NUPP_SMP_TC_RINGFULL,  /* the event was not sent (ring buffer full) */
	NUPP_SMP_TC_N
};

/* What the samples' walks did, summed per CPU (the sampler's wstat map: one value of
 * NUPP_SMP_WS_N counters per CPU), for diagnosis (nupp-bpf -v record, the benchmarks). */
enum nupp_smp_wstat {
	NUPP_SMP_WS_SAMPLES,   /* samples of a VM walked (host code and early losses not) */
	NUPP_SMP_WS_WALKS,     /* walks (a retry from another base is a second one) */
	NUPP_SMP_WS_FRAMES,    /* frames of the stacks reported */
	NUPP_SMP_WS_HITS,      /* frames taken from the frame cache */
	NUPP_SMP_WS_FILLS,     /* frame cache entries filled */
	NUPP_SMP_WS_LOOKS,     /* frame cache set lookups */
	NUPP_SMP_WS_STALE,     /* entries of the key refused by a prototype free */
	NUPP_SMP_WS_PGREADS,   /* free generations read */
	NUPP_SMP_WS_READS,     /* reads of target memory by the walks */
	NUPP_SMP_WS_RBYTES,    /* ... bytes */
	NUPP_SMP_WS_RWIN,      /* ... of them: Lua stack windows */
	NUPP_SMP_WS_RCODE,     /* ... bytecode around a return PC */
	NUPP_SMP_WS_RFN,       /* ... GCfunc and GCproto */
	NUPP_SMP_WS_NEWSTACK,  /* stacks stored (a stack not counted in this buffer yet) */
	NUPP_SMP_WS_NEWCOUNT,  /* counts created */
	NUPP_SMP_WS_WALK_NS,   /* time in the walks (timed samples only, rodata time_stats) */
	NUPP_SMP_WS_STORE_NS,  /* time storing the stack and its count (ditto) */
	NUPP_SMP_WS_TIMED,     /* samples timed */
	NUPP_SMP_WS_STOLEN,    /* samples of a target dropped as time the hypervisor took */
	NUPP_SMP_WS_COPY_NS,   /* of STORE_NS: copying traces met for the first time (timed samples) */
	NUPP_SMP_WS_FNHITS,    /* functions whose facts came from the frame cache (not read) */
	/* Of STORE_NS: counting the stack (its mark, its send when new, its count), and
	 * timed samples that sent a new stack with their part of it: what a new stack costs
	 * beside a known one in one run, trace copies apart. */
	NUPP_SMP_WS_COUNT_NS,
	NUPP_SMP_WS_NEW_TIMED,
	NUPP_SMP_WS_NEW_NS,
	/* Of NEW_NS: marking the stack sent (the stacks map), and sending it (the ring). */
	NUPP_SMP_WS_MARK_NS,
	NUPP_SMP_WS_RING_NS,
	NUPP_SMP_WS_N
};

/* Prototypes watched at once, all processes together (the sampler's pseen map: those met
 * by a sample or a trace copy and not freed since). A sample that meets one more is lost
 * (mapFull). */
#define NUPP_SMP_PSEEN_MAX 65536

/* Bytes of a chunk name sent with NUPP_SMP_EV_PROTO_NEW (longer names are cut: they are
 * marked so and never used to name a frame). */
#define NUPP_SMP_CHUNK_MAX 256
/* Bytes of a prototype's allocation (sizept) sent with NUPP_SMP_EV_PROTO_FREE; a power of
 * two. A larger prototype's copy is cut: what lies beyond cannot name a frame. */
#define NUPP_SMP_PT_MAX 16384

/* A string constant in a NUPP_SMP_EV_PROTO_KSTR event: len bytes of it follow. */
struct nupp_smp_kstr {
	__u16 idx;  /* constant index: the GCRef at k[-1 - idx] (proto_kgc(pt, ~idx)) */
	__u8 len;   /* bytes sent */
	__u8 whole; /* 1 if the string is len bytes long (else it was cut: unusable) */
};
#define NUPP_SMP_KSTR_LEN 96   /* bytes of a constant sent at most */
#define NUPP_SMP_KSTR_N 128    /* constants of a prototype looked at */
#define NUPP_SMP_KSTR_DATA 4096 /* bytes of entries per event */

/* A prototype created or freed; data[size] follows the header. */
struct nupp_smp_proto_event {
	__u32 kind; /* NUPP_SMP_EV_PROTO_NEW or _FREE (first, like nupp_smp_event) */
	__u32 tgid;
	__u64 g;
	__u64 pt;        /* GCproto* */
	__u64 pgen;      /* NEW: the generation of the sample that met it; FREE: the
			  * generation it ends (generations count the frees of prototypes met) */
	__u64 chunkname; /* GCstr* (fingerprint) */
	__s32 firstline; /* fingerprint */
	__u32 sizebc;    /* fingerprint */
	__u32 full;      /* bytes of the whole: the chunk name's length, or sizept */
	__u32 size;      /* bytes of data[] sent (<= full) */
};

#endif /* NUPP_SAMPLER_ABI_H */
