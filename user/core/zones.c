/* Reading nupp.zone from outside a process: the vmlist slots where each VM keeps the
 * address of its current zone id and of its id -> path table, and the tables themselves,
 * in a few bulk reads per drain (include/nupp/zone_abi.h). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/zone_abi.h"
#include "nupp_internal.h"
#include "zones_internal.h"

#define ZONES_MAX_PROCS 256

/* The paths of one VM's table, as last read. */
struct zones_table {
	__u64 addr, g, nonce;
	__u32 npaths;
	char **paths; /* paths[n - 1] is id n's */
};

/* One process: its vmlist and its VMs' tables. */
struct zones_proc {
	pid_t pid;
	__u64 vmlist;
	bool seen;
	struct zones_table t[NUPP_LJ_VMLIST_MAX];
};

struct nupp_zones {
	struct zones_proc p[ZONES_MAX_PROCS];
	int n;
};

/* A reader of the zone tables of any number of processes. */
struct nupp_zones *nupp_zones_new(void)
{
	return calloc(1, sizeof(struct nupp_zones));
}

/* Frees one table's paths. */
static void zones_table_clear(struct zones_table *t)
{
	__u32 i;

	for (i = 0; i < t->npaths; i++)
		free(t->paths[i]);
	free(t->paths);
	memset(t, 0, sizeof(*t));
}

/* Forgets pid (it exited or exec'ed). */
void nupp_zones_forget(struct nupp_zones *z, pid_t pid)
{
	int i, j;

	for (i = 0; z && i < z->n; i++)
		if (z->p[i].pid == pid) {
			for (j = 0; j < NUPP_LJ_VMLIST_MAX; j++)
				zones_table_clear(&z->p[i].t[j]);
			z->p[i] = z->p[--z->n];
			return;
		}
}

void nupp_zones_free(struct nupp_zones *z)
{
	while (z && z->n)
		nupp_zones_forget(z, z->p[0].pid);
	free(z);
}

/* The entry of pid, created when create is set; NULL if none. */
static struct zones_proc *zones_proc(struct nupp_zones *z, pid_t pid, bool create)
{
	int i;

	for (i = 0; i < z->n; i++)
		if (z->p[i].pid == pid)
			return &z->p[i];
	if (!create || z->n == ZONES_MAX_PROCS)
		return NULL;
	memset(&z->p[z->n], 0, sizeof(z->p[0]));
	z->p[z->n].pid = pid;
	return &z->p[z->n++];
}

/* Finds pid's luajit_bpf_vmlist in its memory maps. */
int nupp_zones_find(struct nupp_zones *z, pid_t pid, const char *object, __u64 *addr)
{
	struct nupp_map *maps = NULL;
	struct zones_proc *p = zones_proc(z, pid, true);
	__u64 value = 0, size = 0, off;
	int n, i, e = -ENOENT;

	if (!p)
		return nupp_fail(-ENOSPC, "too many processes with zones (%d)", ZONES_MAX_PROCS);
	if (p->vmlist) {
		*addr = p->vmlist;
		return 0;
	}
	n = nupp_maps_read(pid, &maps);
	if (n < 0)
		return n;
	for (i = 0; i < n; i++) {
		const char *path = maps[i].path;

		if (path[0] != '/' || (i > 0 && strcmp(path, maps[i - 1].path) == 0) || strstr(path, " (deleted)"))
			continue;
		if (object && strcmp(path, object) != 0)
			continue;
		if (nupp_elf_sym(path, NUPP_LJ_VMLIST_SYMBOL, &value, &size) || nupp_elf_vaddr_to_off(path, value, &off))
			continue;
		if (size < sizeof(struct nupp_lj_vmlist)) {
			e = nupp_fail(-ENOTSUP, "%s has no zone slots in luajit_bpf_vmlist: rebuild it with this "
				      "nupp-bpf's scripts/build-luajit", path);
			break;
		}
		p->vmlist = nupp_maps_addr(maps, n, path, off);
		e = p->vmlist ? 0 : -ENOENT;
		break;
	}
	free(maps);
	if (!e)
		*addr = p->vmlist;
	return e;
}

/* Reads pid's vmlist in one read. */
int nupp_zones_vmlist(struct nupp_zones *z, pid_t pid, struct nupp_lj_vmlist *out)
{
	struct zones_proc *p = zones_proc(z, pid, false);
	int e, i;

	if (!p || !p->vmlist)
		return -ENOENT;
	e = nupp_vm_read(pid, p->vmlist, out, sizeof(*out));
	if (e)
		return e;
	if (out->magic != NUPP_LJ_LAYOUT_MAGIC)
		return -EINVAL;
	for (i = 0; i < NUPP_LJ_VMLIST_MAX; i++)
		if (out->g[i] && out->zone_table[i])
			p->seen = true;
	return 0;
}

/* The address of the zone_tv slot (where the current zone id is found) of the VM in
 * vmlist slot i of pid, or 0. */
__u64 nupp_zones_id_addr(struct nupp_zones *z, pid_t pid, int slot)
{
	struct zones_proc *p = zones_proc(z, pid, false);

	if (!p || !p->vmlist || slot < 0 || slot >= NUPP_LJ_VMLIST_MAX)
		return 0;
	return p->vmlist + offsetof(struct nupp_lj_vmlist, zone_tv) + (__u64)slot * sizeof(__u64);
}

/* Reads one VM's table anew when it grew or changed: header, then the arena, one read each. */
static void zones_read_table(pid_t pid, __u64 g, __u64 addr, int slot, struct zones_table *t)
{
	struct nupp_zone_table h;
	char *arena = NULL, **paths = NULL;
	__u32 n = 0, off = 0;

	if (!addr || !g) {
		zones_table_clear(t);
		return;
	}
	if (nupp_vm_read(pid, addr, &h, sizeof(h)) || h.magic != NUPP_ZONE_MAGIC || h.version != NUPP_ZONE_VERSION ||
	    h.g != g || h.slot != (__u32)slot || h.used > h.cap || h.used > (64u << 20))
		return; /* not (yet) a table of this VM: keep what was read */
	if (t->addr == addr && t->nonce == h.nonce && t->g == g && t->npaths == h.npaths)
		return;
	if (t->addr != addr || t->nonce != h.nonce || t->g != g)
		zones_table_clear(t);
	arena = malloc(h.used ? h.used : 1);
	if (!arena || (h.used && nupp_vm_read(pid, h.arena, arena, h.used)))
		goto out;
	paths = calloc(h.npaths ? h.npaths : 1, sizeof(*paths));
	if (!paths)
		goto out;
	while (n < h.npaths && off + 4 <= h.used) {
		__u32 len;

		memcpy(&len, arena + off, 4);
		if (len > NUPP_ZONE_PATH_MAX || off + 4 + len > h.used)
			break;
		paths[n] = strndup(arena + off + 4, len);
		if (!paths[n])
			break;
		off += 4 + len;
		n++;
	}
	zones_table_clear(t);
	t->addr = addr;
	t->g = g;
	t->nonce = h.nonce;
	t->npaths = n;
	t->paths = paths;
	paths = NULL;
out:
	free(paths);
	free(arena);
}

/* Re-reads the tables that grew. */
void nupp_zones_refresh(struct nupp_zones *z, pid_t pid)
{
	struct zones_proc *p = zones_proc(z, pid, false);
	struct nupp_lj_vmlist vl;
	int i;

	if (!p || nupp_zones_vmlist(z, pid, &vl))
		return;
	for (i = 0; i < NUPP_LJ_VMLIST_MAX; i++)
		if (vl.g[i] && vl.zone_table[i])
			zones_read_table(pid, vl.g[i], vl.zone_table[i], i, &p->t[i]);
}

/* The path of zone id of pid ("" for 0), or NULL when unknown. */
const char *nupp_zones_path(struct nupp_zones *z, pid_t pid, __u32 id)
{
	struct zones_proc *p;
	__u32 slot = (id >> NUPP_ZONE_SLOT_SHIFT) - 1, n = id & NUPP_ZONE_N_MASK;
	int pass;

	if (!id)
		return "";
	p = z ? zones_proc(z, pid, false) : NULL;
	if (!p || slot >= NUPP_LJ_VMLIST_MAX || !n)
		return NULL;
	for (pass = 0; pass < 2; pass++) {
		if (n <= p->t[slot].npaths)
			return p->t[slot].paths[n - 1];
		if (!pass)
			nupp_zones_refresh(z, pid);
	}
	return NULL;
}

/* Whether a VM of pid has published a zone table so far. */
bool nupp_zones_seen(const struct nupp_zones *z, pid_t pid)
{
	int i;

	for (i = 0; z && i < z->n; i++)
		if (z->p[i].pid == pid)
			return z->p[i].seen;
	return false;
}
