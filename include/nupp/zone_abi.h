/* nupp.zone's memory as the process keeps it and as BPF and libnupp read it from outside:
 * the id -> path table of one VM. The current id of each VM is a __u32 in
 * luajit_bpf_vmlist.zone[slot] (include/nupp/lj_layout.h), the table's address in
 * luajit_bpf_vmlist.zone_table[slot]. lua/nupp/zone.lua mirrors this struct in its cdef.
 * Compiles as BPF and host C. */
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

/* The table header. Paths are records in the arena, in id order: a __u32 length, then
 * the path's bytes ("frame/render", no NUL). The writer appends a record, then raises
 * used, then npaths; a grown arena is a new copy, published after it is complete (the
 * old one stays allocated), so a reader never sees a record half written. */
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

#endif /* NUPP_ZONE_ABI_H */
