// SPDX-License-Identifier: GPL-2.0
/* Bench programs for bench_floor.sh: the parts every sample of a LuaJIT stack pays (the
 * target filter, the user registers, user reads, map lookups, the count), alone and
 * stacked, each a perf_event program of its own so bpf_stats prices it on this machine. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

/* -- Limits, shared with floor.c through the skeleton's .bss ---------------------- */

#define FLOOR_WINDOW 512 /* bytes of the stack window read by "read512" */
#define FLOOR_FC 4096    /* entries of the lookup table: the sampler's frame cache size */
#define FLOOR_FC_SIZE 64 /* bytes per entry, as the sampler's frame cache */
#define FLOOR_NVAR 16    /* slots of faults[], one per program */

/* Failed user reads, by program (its row in floor.c's table): a read that faults
 * takes another path in the kernel, so a figure with faults is not the floor. */
__u64 faults[FLOOR_NVAR];
/* Every value the programs read ends here, so none of the work is dead code. */
__u64 sink;

/* -- Maps -------------------------------------------------------------------------- */

/* The target filter, as the sampler's procs map: keyed by tgid, filled by floor.c. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} targets SEC(".maps");

/* Key of the counts map: 24 bytes, as the sampler's nupp_smp_count_key. */
struct floor_count_key {
	__u32 tgid;
	__u32 zone;
	__u64 stack;
	__u32 tid;
	__u32 pad;
};

/* The counts map: floor.c stores the one key the programs count, so every lookup hits
 * (the sampler's common case: a stack seen before). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct floor_count_key);
	__type(value, __u64);
} counts SEC(".maps");

/* Per-CPU scratch for the stack window, as the sampler's scratch map. */
struct floor_window {
	__u8 b[FLOOR_WINDOW];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct floor_window);
} window SEC(".maps");

/* A per-CPU table as the sampler's frame cache: the cheapest per-frame work there is. */
struct floor_fc_entry {
	__u64 w[FLOOR_FC_SIZE / 8];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FLOOR_FC);
	__type(key, __u32);
	__type(value, struct floor_fc_entry);
} fcache SEC(".maps");

/* The same, of the sampler's frame cache size (16384 entries, 1 MB per CPU), looked up
 * at random entries: a walk through functions met in no particular order. */
#define FLOOR_FC_BIG 16384

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FLOOR_FC_BIG);
	__type(key, __u32);
	__type(value, struct floor_fc_entry);
} fcache_big SEC(".maps");

/* The same entries in a plain ARRAY (one block of memory, a CPU's region of it): a
 * lookup is one address computation, not a per-CPU pointer read first. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FLOOR_FC_BIG);
	__type(key, __u32);
	__type(value, struct floor_fc_entry);
} fcache_flat SEC(".maps");

/* The same 1 MB as 64 plain ARRAYs of 16 KB, reached through an ARRAY_OF_MAPS: each is
 * small enough for kmalloc, so it lies in the kernel's direct map (large pages), where a
 * large ARRAY lies in vmalloc space (4 KB pages). floor.c creates and inserts them. */
#define FLOOR_KM_INNER 256
#define FLOOR_KM_N 64
struct floor_km_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FLOOR_KM_INNER);
	__type(key, __u32);
	__type(value, struct floor_fc_entry);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, FLOOR_KM_N);
	__type(key, __u32);
	__array(values, struct floor_km_inner);
} fcache_km SEC(".maps");

/* -- Stacked steps: each variant is the previous one plus one step ----------------- */

/* User registers of the sample, as the sampler takes them. */
struct floor_regs {
	__u64 ip, bx, dx, bp, r14, sp;
};

/* Step 2: the target filter. Returns the tgid, or 0 for another process. */
static __always_inline __u32 floor_filter(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	return bpf_map_lookup_elem(&targets, &tgid) ? tgid : 0;
}

/* Step 3: the user registers, also for samples taken in kernel mode. Returns 0 if none. */
static __always_inline int floor_get_regs(struct floor_regs *r)
{
	struct pt_regs *ur = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());

	if (!ur)
		return 0;
	r->ip = ur->ip;
	r->bx = ur->bx;
	r->dx = ur->dx;
	r->bp = ur->bp;
	r->r14 = ur->r14;
	r->sp = ur->sp;
	sink += r->ip ^ r->bx ^ r->dx ^ r->bp ^ r->r14;
	return 1;
}

/* Step 4: one 16-byte user read (a frame header's size), at the user stack pointer. */
static __always_inline void floor_read16(const struct floor_regs *r, __u32 v)
{
	__u64 hdr[2];

	if (bpf_probe_read_user(hdr, sizeof(hdr), (const void *)r->sp))
		faults[v] += 1;
	else
		sink += hdr[0] ^ hdr[1];
}

/* Step 5: a 512-byte stack window read into per-CPU scratch. */
static __always_inline void floor_read512(const struct floor_regs *r, __u32 v)
{
	__u32 zero = 0;
	struct floor_window *win = bpf_map_lookup_elem(&window, &zero);

	if (!win)
		return;
	if (bpf_probe_read_user(win->b, sizeof(win->b), (const void *)r->sp))
		faults[v] += 1;
	else
		sink += win->b[0];
}

/* Step 6: the count: one lookup of a 24-byte key and an atomic add on its value. */
static __always_inline void floor_count(__u32 tgid)
{
	struct floor_count_key key = { .tgid = tgid, .zone = 0, .stack = 1 };
	__u64 *n = bpf_map_lookup_elem(&counts, &key);

	if (n)
		__sync_fetch_and_add(n, 1);
}

/* Variant 1: nothing; the cost of running a program and of bpf_stats' own clock reads. */
SEC("perf_event")
int floor_empty(struct bpf_perf_event_data *ctx)
{
	return 0;
}

/* bpf_get_current_pid_tgid alone (splits variant 2 into its helper and its lookup). */
SEC("perf_event")
int floor_pid(struct bpf_perf_event_data *ctx)
{
	sink += bpf_get_current_pid_tgid();
	return 0;
}

/* Variant 2: the target filter. */
SEC("perf_event")
int floor_filt(struct bpf_perf_event_data *ctx)
{
	sink += floor_filter();
	return 0;
}

/* Variant 3: the filter and the user registers. */
SEC("perf_event")
int floor_regs(struct bpf_perf_event_data *ctx)
{
	struct floor_regs r;

	if (floor_filter())
		floor_get_regs(&r);
	return 0;
}

/* Variant 4: variant 3 and a 16-byte user read. */
SEC("perf_event")
int floor_rd16(struct bpf_perf_event_data *ctx)
{
	struct floor_regs r;

	if (floor_filter() && floor_get_regs(&r))
		floor_read16(&r, 4);
	return 0;
}

/* Variant 5: variant 4 and a 512-byte stack window read into per-CPU scratch. */
SEC("perf_event")
int floor_win(struct bpf_perf_event_data *ctx)
{
	struct floor_regs r;

	if (floor_filter() && floor_get_regs(&r)) {
		floor_read16(&r, 5);
		floor_read512(&r, 5);
	}
	return 0;
}

/* Variant 6: variant 5 and the count: a whole sample with no frame walked. */
SEC("perf_event")
int floor_cnt(struct bpf_perf_event_data *ctx)
{
	struct floor_regs r;
	__u32 tgid = floor_filter();

	if (tgid && floor_get_regs(&r)) {
		floor_read16(&r, 6);
		floor_read512(&r, 6);
		floor_count(tgid);
	}
	return 0;
}

/* -- Repeated steps: the cost of one more of a kind --------------------------------- */

/* Variant 7: n 8-byte user reads up the user stack (the user registers first). */
static __always_inline void floor_reads(__u32 n, __u32 v)
{
	struct floor_regs r;
	__u64 x;
	__u32 i;

	if (!floor_get_regs(&r))
		return;
	/* One loop shape for every n: the per-read figure includes a walker's loop step. */
#pragma clang loop unroll(disable)
	for (i = 0; i < n; i++) {
		if (bpf_probe_read_user(&x, sizeof(x), (const void *)(r.sp + 8 * i)))
			faults[v] += 1;
		else
			sink += x;
	}
}

/* Variant 8: n lookups of distinct entries of the per-CPU frame-cache-like table. */
static __always_inline void floor_lookups(__u32 n)
{
	struct floor_fc_entry *e;
	__u32 i, k;

#pragma clang loop unroll(disable)
	for (i = 0; i < n; i++) {
		k = (i * 97) & (FLOOR_FC - 1);
		e = bpf_map_lookup_elem(&fcache, &k);
		if (e)
			sink += e->w[0];
	}
}

/* Variant 7, N = 1. */
SEC("perf_event")
int floor_rd8x1(struct bpf_perf_event_data *ctx)
{
	floor_reads(1, 7);
	return 0;
}

/* Variant 7, N = 8. */
SEC("perf_event")
int floor_rd8x8(struct bpf_perf_event_data *ctx)
{
	floor_reads(8, 8);
	return 0;
}

/* Variant 7, N = 32. */
SEC("perf_event")
int floor_rd8x32(struct bpf_perf_event_data *ctx)
{
	floor_reads(32, 9);
	return 0;
}

/* Variant 8, N = 1: what a first lookup costs over an empty program. */
SEC("perf_event")
int floor_lk1(struct bpf_perf_event_data *ctx)
{
	floor_lookups(1);
	return 0;
}

/* Variant 8, N = 8. */
SEC("perf_event")
int floor_lk8(struct bpf_perf_event_data *ctx)
{
	floor_lookups(8);
	return 0;
}

/* Variant 8, N = 32. */
SEC("perf_event")
int floor_lk32(struct bpf_perf_event_data *ctx)
{
	floor_lookups(32);
	return 0;
}

/* Variant 10: n lookups of random entries of the first range (a power of two) of a
 * frame-cache-sized table (fcache_big or fcache_flat). */
static __always_inline void floor_rlookups_in(void *map, __u32 n, __u32 range)
{
	struct floor_fc_entry *e;
	__u32 i, k;

#pragma clang loop unroll(disable)
	for (i = 0; i < n; i++) {
		k = bpf_get_prandom_u32() & (range - 1);
		e = bpf_map_lookup_elem(map, &k);
		if (e)
			sink += e->w[0];
	}
}

/* ... of all FLOOR_FC_BIG entries. */
static __always_inline void floor_rlookups(void *map, __u32 n)
{
	floor_rlookups_in(map, n, FLOOR_FC_BIG);
}

/* Variant 10, N = 32 random entries of the first 1024 of the ARRAY (64 KB): the smallest
 * table that could hold the frames of thousands of functions (16 bytes each). */
SEC("perf_event")
int floor_lka32s(struct bpf_perf_event_data *ctx)
{
	floor_rlookups_in(&fcache_flat, 32, 1024);
	return 0;
}

/* Variant 10, N = 32 random entries of the first 4096 of the ARRAY (256 KB). */
SEC("perf_event")
int floor_lka32m(struct bpf_perf_event_data *ctx)
{
	floor_rlookups_in(&fcache_flat, 32, 4096);
	return 0;
}

/* Variant 10, N = 32 random entries of 16384 of a PERCPU_ARRAY. */
SEC("perf_event")
int floor_lkr32(struct bpf_perf_event_data *ctx)
{
	floor_rlookups(&fcache_big, 32);
	return 0;
}

/* Variant 10, N = 32 random entries of 16384 of a plain ARRAY. */
SEC("perf_event")
int floor_lka32(struct bpf_perf_event_data *ctx)
{
	floor_rlookups(&fcache_flat, 32);
	return 0;
}

/* Variant 10, N = 32 random entries of the 1 MB as 64 ARRAYs of 16 KB (fcache_km). */
SEC("perf_event")
int floor_lkm32(struct bpf_perf_event_data *ctx)
{
	struct floor_fc_entry *e;
	__u32 i, k, o;
	void *m;

#pragma clang loop unroll(disable)
	for (i = 0; i < 32; i++) {
		k = bpf_get_prandom_u32() & (FLOOR_FC_BIG - 1);
		o = k / FLOOR_KM_INNER;
		m = bpf_map_lookup_elem(&fcache_km, &o);
		if (!m)
			continue;
		k &= FLOOR_KM_INNER - 1;
		e = bpf_map_lookup_elem(m, &k);
		if (e)
			sink += e->w[0];
	}
	return 0;
}

/* Variant 10, N = 32, the prandom calls alone (no lookup): what lkr32 adds to them. */
SEC("perf_event")
int floor_rnd32(struct bpf_perf_event_data *ctx)
{
	__u32 i;

#pragma clang loop unroll(disable)
	for (i = 0; i < 32; i++)
		sink += bpf_get_prandom_u32() & (FLOOR_FC_BIG - 1);
	return 0;
}

/* Variant 9: bpf_ktime_get_ns alone (a clock read, as the run-time statistics take). */
SEC("perf_event")
int floor_ktime(struct bpf_perf_event_data *ctx)
{
	sink += bpf_ktime_get_ns();
	return 0;
}
