/* nupp.zone's memory as the process keeps it and as BPF and libnupp read it from outside:
 * the id -> path table of one VM, and the number that holds the VM's current zone id.
 * luajit_bpf_vmlist.zone_tv[slot] (include/nupp/lj_layout.h) holds the address of that
 * number, luajit_bpf_vmlist.zone_table[slot] the table's. Compiles as BPF and host C;
 * lua/nupp/zone.lua reads the struct through the generated nupp/cdef.lua. */
#ifndef NUPP_ZONE_ABI_H
#define NUPP_ZONE_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define NUPP_ZONE_MAGIC 0x454e4f5au /* "ZONE" */
#define NUPP_ZONE_VERSION 1u
/* A zone id is (slot + 1) << NUPP_ZONE_SLOT_SHIFT | n: the VM's vmlist slot and the
 * path's number n (1, 2, ...) in that VM's table, so ids are unique in a process. */
#define NUPP_ZONE_SLOT_SHIFT 24
#define NUPP_ZONE_N_MASK ((1u << NUPP_ZONE_SLOT_SHIFT) - 1)
/* Bytes of one path kept (longer paths are cut there). */
#define NUPP_ZONE_PATH_MAX 1024
/* A zone id is below 2^32 (17 << 24 at most). */
#define NUPP_ZONE_ID_BITS 32

/* The table header. Paths are records in the arena, in id order: a __u32 length, then
 * the path's bytes ("frame/render", no NUL). The writer appends a record, then raises
 * used, then npaths; a grown arena is a new copy, published after it is complete (the
 * old one stays allocated), so a reader never sees a record half written. */
/* ffi:begin */
struct nupp_zone_table {
	__u32 magic;   /* NUPP_ZONE_MAGIC */
	__u32 version; /* NUPP_ZONE_VERSION */
	__u64 g;       /* the VM's global_State: the table is valid only while vmlist.g[slot] == g */
	__u64 arena;   /* address of the records */
	__u32 npaths;  /* records complete */
	__u32 used;    /* bytes of the arena written */
	__u32 cap;     /* bytes of the arena */
	__u32 slot;    /* the VM's vmlist slot */
	__u64 nonce;   /* differs for every table ever made in the process */
};
/* ffi:end */

/* -- The current zone id: a Lua number --------------------------------------------
 * nupp.zone keeps the id in t[1] of a Lua table of its own: a push or pop is one table
 * store (TSETB in the interpreter, ASTORE when compiled), no FFI store, no system call,
 * no probe. LuaJIT numbers are IEEE doubles in x86-64 builds (LJ_DUALNUM 0, checked by
 * zone.lua against the exported layout), so the 8 bytes of that TValue are the double
 * of the id; BPF has no floating point, so it is decoded with integer operations. */

/* The zone id held by the 8 bytes of a Lua number: 0 and *id when they are the double of
 * an integer in [0, 2^32), else -1 (not a number, negative, fractional, too large). */
static inline __attribute__((always_inline)) int nupp_zone_id_of_number(__u64 bits, __u32 *id)
{
	__u64 mant;
	__u32 e;

	*id = 0;
	if (bits == 0)
		return 0; /* +0.0 */
	if (bits >> 63)
		return -1; /* negative (or -0.0, which zone.lua never stores) */
	e = (__u32)(bits >> 52) & 0x7ff;
	if (e < 1023 || e >= 1023 + NUPP_ZONE_ID_BITS)
		return -1; /* below 1 (a fraction or subnormal), >= 2^32, Inf or NaN (a tagged value) */
	e -= 1023;
	mant = (bits & ((1ull << 52) - 1)) | (1ull << 52);
	if (mant & ((1ull << (52 - e)) - 1))
		return -1; /* bits below the binary point */
	*id = (__u32)(mant >> (52 - e));
	return 0;
}

/* How the reader below reads the target's memory: 0 or -errno (bpf_probe_read_user in
 * BPF; unit tests define a fake-memory reader before including this header). */
#if !defined(NUPP_ZONE_READ) && defined(__VMLINUX_H__)
#define NUPP_ZONE_READ(dst, size, addr) bpf_probe_read_user(dst, size, (const void *)(unsigned long)(addr))
#endif

#ifdef NUPP_ZONE_READ
/* The current zone id of a VM, from the address of its luajit_bpf_vmlist.zone_tv slot:
 * 0 and *id (0 when the VM has no zone module), or -1 when a read fails or the number
 * there is not a zone id. Two reads: the slot, then the number it points to. */
static inline __attribute__((always_inline)) int nupp_zone_read(__u64 slot_addr, __u32 *id)
{
	__u64 tv = 0, bits = 0;

	*id = 0;
	if (NUPP_ZONE_READ(&tv, sizeof(tv), slot_addr))
		return -1;
	if (!tv)
		return 0;
	if (NUPP_ZONE_READ(&bits, sizeof(bits), tv))
		return -1;
	return nupp_zone_id_of_number(bits, id);
}
#endif

#endif /* NUPP_ZONE_ABI_H */
