/* The doctor's checks of a target process: that it runs, that it runs LuaJIT and our
 * build of it (the layout it exports, its USDT probes, GC64), its Lua VMs, and whether its
 * binary is still the file it started with. Reads the target's /proc files and memory and
 * its ELF files; may not load BPF (doctor_machine.c). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <gelf.h>
#include <libelf.h>

#include "nupp_internal.h"
#include "doctor_priv.h"

/* One file mapped by /proc/PID/maps, with its device and inode. */
struct doctor_map {
	char path[PATH_MAX];    /* the path, without " (deleted)" */
	char mapname[PATH_MAX]; /* the path as /proc/PID/maps prints it */
	char elf[PATH_MAX];     /* where to read its ELF from (/proc/PID/exe for a deleted exe) */
	unsigned long dev_major, dev_minor;
	unsigned long long inode;
	bool deleted;
};

/* The file mappings of pid, one per path (the first), into a malloc'ed array. */
static int doctor_maps(pid_t pid, struct doctor_map **out)
{
	char fname[64], line[PATH_MAX + 128];
	struct doctor_map *v = NULL;
	struct stat exe;
	bool have_exe;
	int n = 0, cap = 0;
	FILE *f;

	snprintf(fname, sizeof(fname), "/proc/%d/exe", (int)pid);
	have_exe = stat(fname, &exe) == 0;
	snprintf(fname, sizeof(fname), "/proc/%d/maps", (int)pid);
	f = fopen(fname, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		struct doctor_map m = { 0 };
		int pos = 0, i;
		size_t len;

		if (sscanf(line, "%*x-%*x %*s %*x %lx:%lx %llu %n", &m.dev_major, &m.dev_minor, &m.inode, &pos) < 3 ||
		    !pos || line[pos] != '/')
			continue;
		snprintf(m.mapname, sizeof(m.mapname), "%s", line + pos);
		len = strlen(m.mapname);
		while (len && (m.mapname[len - 1] == '\n' || m.mapname[len - 1] == ' '))
			m.mapname[--len] = 0;
		snprintf(m.path, sizeof(m.path), "%s", m.mapname);
		snprintf(m.elf, sizeof(m.elf), "%s", m.mapname);
		if (len > 10 && strcmp(m.path + len - 10, " (deleted)") == 0) {
			m.path[len - 10] = 0;
			m.deleted = true;
			if (have_exe && exe.st_ino == m.inode)
				snprintf(m.elf, sizeof(m.elf), "/proc/%d/exe", (int)pid);
			else
				snprintf(m.elf, sizeof(m.elf), "%s", m.path);
		}
		for (i = 0; i < n && strcmp(v[i].mapname, m.mapname) != 0; i++)
			;
		if (i < n)
			continue;
		if (n == cap) {
			struct doctor_map *nv = realloc(v, (size_t)(cap = cap ? cap * 2 : 32) * sizeof(*v));

			if (!nv) {
				free(v);
				fclose(f);
				return -ENOMEM;
			}
			v = nv;
		}
		v[n++] = m;
	}
	fclose(f);
	*out = v;
	return n;
}

/* The start time of pid in seconds since the epoch, or 0. */
static double doctor_start_time(pid_t pid)
{
	char fname[64], buf[4096], *p;
	unsigned long long start = 0, btime = 0;
	FILE *f;

	snprintf(fname, sizeof(fname), "/proc/%d/stat", (int)pid);
	if (doctor_read_text(fname, buf, sizeof(buf)))
		return 0;
	p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
			 &start) != 1)
		return 0;
	f = fopen("/proc/stat", "re");
	while (f && fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "btime %llu", &btime) == 1)
			break;
	if (f)
		fclose(f);
	return btime ? (double)btime + (double)start / sysconf(_SC_CLK_TCK) : 0;
}

/* Counts the luajit:* probes of nupp_probe_names in an ELF file's .note.stapsdt; the
 * names of the missing ones go to missing. The count, or -errno. */
static int doctor_usdt_probes(const char *path, char *missing, size_t size)
{
	bool have[NUPP_PROBES] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC), i, n = 0;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	Elf *e;

	if (fd < 0)
		return -errno;
	if (elf_version(EV_CURRENT) == EV_NONE || !(e = elf_begin(fd, ELF_C_READ, NULL))) {
		close(fd);
		return -EINVAL;
	}
	while (elf_getshdrstrndx(e, &shstrndx) == 0 && (scn = elf_nextscn(e, scn)) != NULL) {
		/* Each note's desc: pc, base and semaphore addresses, then "provider\0name\0args\0". */
		size_t addrs = 3 * (gelf_getclass(e) == ELFCLASS32 ? 4 : 8), off = 0, noff, doff;
		const char *name;
		Elf_Data *data;
		GElf_Shdr sh;
		GElf_Nhdr nh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE ||
		    !(name = elf_strptr(e, shstrndx, sh.sh_name)) || strcmp(name, ".note.stapsdt") != 0)
			continue;
		data = elf_getdata(scn, NULL);
		while (data && (off = gelf_getnote(data, off, &nh, &noff, &doff)) > 0) {
			const char *desc = (const char *)data->d_buf + doff, *end = desc + nh.n_descsz, *prov, *pname;

			if (nh.n_type != 3 || nh.n_namesz != 8 || memcmp((const char *)data->d_buf + noff, "stapsdt", 8) ||
			    nh.n_descsz <= addrs)
				continue;
			prov = desc + addrs;
			pname = prov + strnlen(prov, (size_t)(end - prov)) + 1;
			if (pname >= end || strnlen(pname, (size_t)(end - pname)) == (size_t)(end - pname) ||
			    strcmp(prov, "luajit") != 0)
				continue;
			for (i = 0; i < NUPP_PROBES; i++)
				if (strcmp(pname, nupp_probe_names[i]) == 0)
					have[i] = true;
		}
	}
	elf_end(e);
	close(fd);
	missing[0] = 0;
	for (i = 0; i < NUPP_PROBES; i++) {
		if (have[i])
			n++;
		else
			snprintf(missing + strlen(missing), size - strlen(missing), "%s%s", missing[0] ? ", " : "",
				 nupp_probe_names[i]);
	}
	return n;
}

/* Runtime address in pid of an exported data symbol of a mapped object, or 0. */
static __u64 doctor_sym_addr(pid_t pid, const struct doctor_map *obj, const char *sym)
{
	struct nupp_map *maps = NULL;
	__u64 value, off, addr = 0;
	int n;

	if (nupp_elf_sym(obj->elf, sym, &value, NULL) || nupp_elf_vaddr_to_off(obj->elf, value, &off))
		return 0;
	n = nupp_maps_read(pid, &maps);
	if (n > 0)
		addr = nupp_maps_addr(maps, n, obj->mapname, off);
	free(maps);
	return addr;
}

/* Skips the target checks from one on (inclusive), saying why. */
static void doctor_skip_from(struct doctor *d, enum nupp_check_id from, const char *why)
{
	int id;

	for (id = from; id < NUPP_CHECK__MAX; id++)
		doctor_set(d, id, NUPP_CHECK_SKIP, 0, "not checked: %s", why);
}

/* Whether the object pid runs is the file now at its path, unchanged since pid started. */
static void doctor_binary(struct doctor *d, pid_t pid, const struct doctor_map *obj)
{
	double started = doctor_start_time(pid);
	struct stat st;

	if (obj->deleted)
		doctor_set(d, NUPP_CHECK_BINARY, NUPP_CHECK_FAIL, -ESTALE,
			   "%s was deleted or replaced after PID %d started: it runs a file that is gone", obj->path,
			   (int)pid);
	else if (stat(obj->path, &st) != 0)
		doctor_set(d, NUPP_CHECK_BINARY, NUPP_CHECK_FAIL, -errno, "%s: %s", obj->path, strerror(errno));
	else if (st.st_ino != obj->inode || major(st.st_dev) != obj->dev_major || minor(st.st_dev) != obj->dev_minor)
		doctor_set(d, NUPP_CHECK_BINARY, NUPP_CHECK_FAIL, -ESTALE,
			   "%s is another file now (inode %llu) than the one PID %d runs (inode %llu)", obj->path,
			   (unsigned long long)st.st_ino, (int)pid, obj->inode);
	else if (started > 0 && (double)st.st_mtime > started + 1)
		doctor_set(d, NUPP_CHECK_BINARY, NUPP_CHECK_FAIL, -ESTALE,
			   "%s was modified %.0f s after PID %d started: its code may not match the file", obj->path,
			   (double)st.st_mtime - started, (int)pid);
	else
		doctor_set(d, NUPP_CHECK_BINARY, NUPP_CHECK_OK, 0, "%s is the file PID %d started with (inode %llu)",
			   obj->path, (int)pid, obj->inode);
	if (d->c[NUPP_CHECK_BINARY].status == NUPP_CHECK_FAIL)
		doctor_remedy(d, NUPP_CHECK_BINARY,
			      "restart the process: probes attach by file offset to the file now at that path");
}

/* Our build: the exported layout read from the target, the probes in its file, GC64. */
static void doctor_build(struct doctor *d, pid_t pid, const struct doctor_map *obj)
{
	struct nupp_lj_layout lo;
	__u64 addr = doctor_sym_addr(pid, obj, NUPP_LJ_LAYOUT_SYMBOL);
	char missing[256];
	int err = addr ? nupp_vm_read(pid, addr, &lo, sizeof(lo)) : -ENOENT, n;

	if (err) {
		doctor_set(d, NUPP_CHECK_BUILD, NUPP_CHECK_FAIL, err == -EACCES ? -EPERM : err,
			   "cannot read the layout %s exports from PID %d: %s", obj->path, (int)pid, strerror(-err));
		doctor_remedy(d, NUPP_CHECK_BUILD, err == -EPERM || err == -EACCES ? "run with sudo, or grant CAP_SYS_PTRACE"
										  : "restart the process with our LuaJIT build");
	} else if (lo.magic != NUPP_LJ_LAYOUT_MAGIC || lo.version != NUPP_LJ_LAYOUT_VERSION || lo.size != sizeof(lo)) {
		doctor_set(d, NUPP_CHECK_BUILD, NUPP_CHECK_FAIL, -ENOTSUP,
			   "%s exports layout version %u (size %u); this nupp-bpf reads version %u (size %zu)",
			   obj->path, lo.version, lo.size, NUPP_LJ_LAYOUT_VERSION, sizeof(lo));
		doctor_remedy(d, NUPP_CHECK_BUILD, "rebuild LuaJIT with this nupp-bpf's scripts/build-luajit");
	} else {
		doctor_set(d, NUPP_CHECK_BUILD, NUPP_CHECK_OK, 0, "our build of %s%s: layout v%u exported by %s",
			   nupp_lj_branch_name(lo.branch),
			   lo.branch == NUPP_LJ_BRANCH_LUAJIT2 ? " (OpenResty's branch)" : " (LuaJIT 2.1)", lo.version,
			   obj->path);
	}

	n = doctor_usdt_probes(obj->elf, missing, sizeof(missing));
	if (n == NUPP_PROBES)
		doctor_set(d, NUPP_CHECK_PROBES, NUPP_CHECK_OK, 0, "all %d luajit:* probes are in %s", NUPP_PROBES,
			   obj->path);
	else if (n < 0)
		doctor_set(d, NUPP_CHECK_PROBES, NUPP_CHECK_FAIL, n, "cannot read %s: %s", obj->path, strerror(-n));
	else
		doctor_set(d, NUPP_CHECK_PROBES, NUPP_CHECK_FAIL, -ENOTSUP, "%s has %d of the %d luajit:* probes (no %s)",
			   obj->path, n, NUPP_PROBES, missing);
	if (d->c[NUPP_CHECK_PROBES].status == NUPP_CHECK_FAIL)
		doctor_remedy(d, NUPP_CHECK_PROBES, "rebuild LuaJIT with this nupp-bpf's scripts/build-luajit");

	/* The mode fields keep their place in every layout version with our magic. */
	if (err || lo.magic != NUPP_LJ_LAYOUT_MAGIC) {
		doctor_set(d, NUPP_CHECK_GC64, NUPP_CHECK_SKIP, 0, "not checked: the layout cannot be read");
	} else if (lo.gc64 == 1 && lo.fr2 == 1) {
		doctor_set(d, NUPP_CHECK_GC64, NUPP_CHECK_OK, 0, "GC64 with two-slot frames (LJ_GC64, LJ_FR2)");
	} else {
		doctor_set(d, NUPP_CHECK_GC64, NUPP_CHECK_FAIL, -ENOTSUP,
			   "LuaJIT built with GC64 %s and FR2 %s: nupp-bpf walks only GC64 two-slot frames",
			   lo.gc64 ? "on" : "off", lo.fr2 ? "on" : "off");
		doctor_remedy(d, NUPP_CHECK_GC64, "rebuild LuaJIT with scripts/build-luajit (GC64 is on there)");
	}
}

/* The Lua VMs open in pid, as record finds them. */
static void doctor_vms(struct doctor *d, pid_t pid)
{
	struct nupp_vm vms[NUPP_LJ_VMLIST_MAX];
	char gs[256] = "";
	int n = nupp_vm_find(pid, vms, NUPP_LJ_VMLIST_MAX), i;

	if (n > 0) {
		for (i = 0; i < n; i++)
			snprintf(gs + strlen(gs), sizeof(gs) - strlen(gs), "%s%#llx", i ? ", " : "",
				 (unsigned long long)vms[i].g);
		doctor_set(d, NUPP_CHECK_VMS, NUPP_CHECK_OK, 0, "%d VM%s open (g = %s)", n, n == 1 ? "" : "s", gs);
	} else if (n == 0) {
		doctor_set(d, NUPP_CHECK_VMS, NUPP_CHECK_FAIL, -ENOENT, "no Lua VM open yet in PID %d", (int)pid);
		doctor_remedy(d, NUPP_CHECK_VMS,
			      "attach once the program has created its lua_State, or start it under record "
			      "(record -- COMMAND sees every VM from the first)");
	} else {
		doctor_set(d, NUPP_CHECK_VMS, NUPP_CHECK_FAIL, n, "%s", nupp_errmsg());
	}
}

/* The checks of a target process: LuaJIT, our build, probes, GC64, VMs, its binary. */
void doctor_target(struct doctor *d, pid_t pid)
{
	struct doctor_map *maps = NULL, *obj = NULL, *plain = NULL;
	char exe[PATH_MAX], comm[64] = "?", fname[64];
	ssize_t len;
	__u64 v;
	int n, i;

	if (kill(pid, 0) && errno == ESRCH) {
		doctor_set(d, NUPP_CHECK_PROCESS, NUPP_CHECK_FAIL, -ESRCH, "no such process: PID %d", (int)pid);
		doctor_remedy(d, NUPP_CHECK_PROCESS, "give the PID of a running process (pgrep -n luajit)");
		doctor_skip_from(d, NUPP_CHECK_LUAJIT, "no process");
		return;
	}
	snprintf(fname, sizeof(fname), "/proc/%d/comm", (int)pid);
	doctor_read_text(fname, comm, sizeof(comm));
	snprintf(fname, sizeof(fname), "/proc/%d/exe", (int)pid);
	len = readlink(fname, exe, sizeof(exe) - 1);
	n = len < 0 ? -errno : doctor_maps(pid, &maps);
	if (n < 0) {
		doctor_set(d, NUPP_CHECK_PROCESS, NUPP_CHECK_FAIL, n == -EACCES ? -EPERM : n,
			   "PID %d (%s) cannot be inspected: %s", (int)pid, comm, strerror(-n));
		doctor_remedy(d, NUPP_CHECK_PROCESS, "run with sudo, or grant CAP_SYS_PTRACE");
		doctor_skip_from(d, NUPP_CHECK_LUAJIT, "the process cannot be inspected");
		return;
	}
	exe[len] = 0;
	doctor_set(d, NUPP_CHECK_PROCESS, NUPP_CHECK_OK, 0, "PID %d (%s) runs %s", (int)pid, comm, exe);
	for (i = 0; i < n && !obj; i++) {
		if (nupp_elf_sym(maps[i].elf, NUPP_LJ_LAYOUT_SYMBOL, &v, NULL) == 0)
			obj = &maps[i];
		else if (!plain && nupp_elf_sym(maps[i].elf, "luaJIT_setmode", &v, NULL) == 0)
			plain = &maps[i];
	}
	if (!obj && !plain) {
		doctor_set(d, NUPP_CHECK_LUAJIT, NUPP_CHECK_FAIL, -ENOENT,
			   "PID %d is not running LuaJIT (no LuaJIT VM in its memory maps)", (int)pid);
		doctor_remedy(d, NUPP_CHECK_LUAJIT, "give the PID of a process running our LuaJIT build");
		doctor_skip_from(d, NUPP_CHECK_BUILD, "not LuaJIT");
	} else if (!obj) {
		doctor_set(d, NUPP_CHECK_LUAJIT, NUPP_CHECK_OK, 0, "LuaJIT in %s", plain->path);
		doctor_set(d, NUPP_CHECK_BUILD, NUPP_CHECK_FAIL, -ENOTSUP,
			   "%s has no nupp-bpf probes and layout (an unpatched LuaJIT)", plain->path);
		doctor_remedy(d, NUPP_CHECK_BUILD,
			      "run the program with our build (%s/bin/luajit, or link %s/lib/libluajit-5.1.so)",
			      NUPP_LUAJIT_PREFIX, NUPP_LUAJIT_PREFIX);
		doctor_skip_from(d, NUPP_CHECK_PROBES, "not our LuaJIT build");
	} else {
		doctor_set(d, NUPP_CHECK_LUAJIT, NUPP_CHECK_OK, 0, "LuaJIT in %s", obj->path);
		doctor_build(d, pid, obj);
		doctor_binary(d, pid, obj);
		if (obj->deleted)
			doctor_set(d, NUPP_CHECK_VMS, NUPP_CHECK_SKIP, 0, "not checked: its binary is gone (see binary)");
		else if (d->c[NUPP_CHECK_BUILD].status != NUPP_CHECK_OK)
			doctor_set(d, NUPP_CHECK_VMS, NUPP_CHECK_SKIP, 0, "not checked: the layout cannot be read");
		else
			doctor_vms(d, pid);
	}
	free(maps);
}
