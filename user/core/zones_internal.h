/* libnupp internals: reading nupp.zone's state of target processes (user/core/zones.c). */
#ifndef NUPP_ZONES_INTERNAL_H
#define NUPP_ZONES_INTERNAL_H

#include <stdbool.h>
#include <sys/types.h>
#include <linux/types.h>

#include "nupp/lj_layout.h"

struct nupp_zones;

/* A reader of the zone tables of any number of processes. */
struct nupp_zones *nupp_zones_new(void);
void nupp_zones_free(struct nupp_zones *z);

/* The address of pid's luajit_bpf_vmlist, found in its memory maps (object path: the ELF
 * object with our LuaJIT, NULL: search every mapped object). 0 and *addr; -ENOENT not
 * mapped (yet); -ENOTSUP a LuaJIT whose vmlist has no zone slots (rebuild it). */
int nupp_zones_find(struct nupp_zones *z, pid_t pid, const char *object, __u64 *addr);

/* Reads pid's vmlist (found before) in one read: 0, or -ENOENT unknown, -errno. */
int nupp_zones_vmlist(struct nupp_zones *z, pid_t pid, struct nupp_lj_vmlist *out);

/* The address of the zone_tv slot of the VM in vmlist slot i of pid (what the sampler
 * reads the current zone id through: nupp_zone_read, include/nupp/zone_abi.h), or 0. */
__u64 nupp_zones_id_addr(struct nupp_zones *z, pid_t pid, int slot);

/* Re-reads the tables that grew (a few bulk reads per VM). */
void nupp_zones_refresh(struct nupp_zones *z, pid_t pid);

/* The path of zone id of pid ("" for 0), or NULL when unknown. */
const char *nupp_zones_path(struct nupp_zones *z, pid_t pid, __u32 id);

/* Whether a VM of pid has published a zone table (nupp.zone loaded) so far. */
bool nupp_zones_seen(const struct nupp_zones *z, pid_t pid);

/* Forgets pid (it exited or exec'ed). */
void nupp_zones_forget(struct nupp_zones *z, pid_t pid);

/* The trace channel names its rows' zone ids with z from now on (user/core/trace.c). */
struct nupp_trace;
void nupp_trace_set_zones(struct nupp_trace *t, struct nupp_zones *z);

/* The trace channel counts, from now on, only the processes its map of tgids names
 * profiled (enum nupp_follow_value): returns that map's fd, which the session's process
 * follower shares, or -errno (user/core/trace.c). */
int nupp_trace_follow(struct nupp_trace *t);
/* nupp_trace_open, its map of tgids being the map tgids_fd (-1: its own): a session
 * shares it with the sampler's process follower (user/core/trace.c). */
struct nupp_trace_opts;
struct nupp_trace *nupp_trace_open_shared(const struct nupp_trace_opts *opts, int tgids_fd, int *err);

#endif /* NUPP_ZONES_INTERNAL_H */
