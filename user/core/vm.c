/* Finding LuaJIT VMs in a process: the exported layout, the VM list, validated g. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <gelf.h>
#include <fcntl.h>
#include <libelf.h>

#include "nupp_internal.h"
#include "sampler_internal.h"

/* process_vm_readv calls so far (any thread). */
static __u64 vm_read_calls;

/* Reads len bytes at addr of pid (process_vm_readv); 0 or -errno. */
int nupp_vm_read(pid_t pid, __u64 addr, void *buf, size_t len)
{
	struct iovec local = { buf, len };
	struct iovec remote = { (void *)(uintptr_t)addr, len };
	ssize_t n;

	__atomic_fetch_add(&vm_read_calls, 1, __ATOMIC_RELAXED);
	n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

/* Reads n ranges of pid, IOV_MAX at a time; how many leading ranges were read whole, or
 * -errno when not even the first could be read. */
int nupp_vm_readv(pid_t pid, const struct nupp_read_seg *seg, int n)
{
	struct iovec local[IOV_MAX], remote[IOV_MAX];
	int done = 0, i, m;

	while (done < n) {
		size_t want = 0;
		ssize_t got;

		m = n - done < IOV_MAX ? n - done : IOV_MAX;
		for (i = 0; i < m; i++) {
			local[i].iov_base = seg[done + i].buf;
			local[i].iov_len = seg[done + i].len;
			remote[i].iov_base = (void *)(uintptr_t)seg[done + i].addr;
			remote[i].iov_len = seg[done + i].len;
			want += seg[done + i].len;
		}
		__atomic_fetch_add(&vm_read_calls, 1, __ATOMIC_RELAXED);
		got = process_vm_readv(pid, local, (unsigned long)m, remote, (unsigned long)m, 0);
		if (got < 0)
			return done ? done : -errno;
		if ((size_t)got == want) {
			done += m;
			continue;
		}
		/* A short read stops at the first range not mapped whole. */
		for (i = 0; i < m && (size_t)got >= seg[done + i].len; i++)
			got -= (ssize_t)seg[done + i].len;
		return done + i;
	}
	return done;
}

/* process_vm_readv calls made by nupp_vm_read so far. */
__u64 nupp_vm_read_calls(void)
{
	return __atomic_load_n(&vm_read_calls, __ATOMIC_RELAXED);
}

/* The USDT cookie of luajit:vm_open in binary: the distance from luajit_bpf_layout (the
 * probe's third argument) to luajit_bpf_vmlist in the same ELF object, from which a BPF
 * program finds a new VM's zone slot; 0 when the object has no zone slots. */
__u64 nupp_vm_vmlist_cookie(const char *binary)
{
	__u64 vl = 0, vl_size = 0, lo = 0;

	if (nupp_elf_sym(binary, NUPP_LJ_VMLIST_SYMBOL, &vl, &vl_size) == 0 && vl_size >= sizeof(struct nupp_lj_vmlist) &&
	    nupp_elf_sym(binary, NUPP_LJ_LAYOUT_SYMBOL, &lo, NULL) == 0)
		return vl - lo;
	return 0;
}

/* Checks that g is a live global_State of pid: mainthref -> GG.L and L->glref -> g. */
int nupp_vm_validate(pid_t pid, __u64 g, const struct nupp_lj_layout *lo)
{
	__u64 mainth = 0, glref = 0, L = g + (__s64)lo->gg_g2l;
	int err;

	if (!g || (g & 7))
		return -EINVAL;
	err = nupp_vm_read(pid, g + lo->g_mainthref, &mainth, sizeof(mainth));
	if (!err)
		err = nupp_vm_read(pid, L + lo->L_glref, &glref, sizeof(glref));
	if (err)
		return err;
	return (mainth & lo->gcvmask) == L && glref == g ? 0 : -EINVAL;
}

/* Checks the identity fields of a layout read from a target. */
static int vm_layout_ok(const struct nupp_lj_layout *lo)
{
	return lo->magic == NUPP_LJ_LAYOUT_MAGIC && lo->version == NUPP_LJ_LAYOUT_VERSION &&
	       lo->size == sizeof(*lo) && lo->gc64 == 1 && lo->fr2 == 1;
}

/* Runtime address of an exported data symbol of path in pid, or 0. */
static __u64 vm_sym_addr(const char *path, const struct nupp_map *maps, int n, const char *sym)
{
	__u64 value, off;

	if (nupp_elf_sym(path, sym, &value, NULL) || nupp_elf_vaddr_to_off(path, value, &off))
		return 0;
	return nupp_maps_addr(maps, n, path, off);
}

/* Finds the LuaJIT VMs open in a running process. */
int nupp_vm_find(pid_t pid, struct nupp_vm *out, int max)
{
	struct nupp_map *maps = NULL;
	char plain_luajit[512] = "", objpath[512] = "";
	struct nupp_lj_layout lo;
	struct nupp_lj_vmlist list;
	__u64 layout_addr = 0, list_addr;
	int n, i, found = 0, err;

	if (pid <= 0)
		return nupp_fail(-EINVAL, "invalid PID %d", (int)pid);
	n = nupp_maps_read(pid, &maps);
	if (n == -ESRCH)
		return nupp_fail(-ESRCH, "no such process: PID %d (it may have exited)", (int)pid);
	if (n < 0)
		return nupp_fail(n == -EACCES ? -EPERM : n,
				 "cannot read /proc/%d/maps: %s (run as root or with CAP_SYS_PTRACE)",
				 (int)pid, strerror(-n));
	for (i = 0; i < n; i++) {
		const char *p = maps[i].path;
		__u64 v;

		if (p[0] != '/' || (i > 0 && strcmp(p, maps[i - 1].path) == 0))
			continue;
		if (strstr(p, " (deleted)"))
			continue;
		if (nupp_elf_sym(p, NUPP_LJ_LAYOUT_SYMBOL, &v, NULL) == 0) {
			snprintf(objpath, sizeof(objpath), "%s", p);
			layout_addr = vm_sym_addr(p, maps, n, NUPP_LJ_LAYOUT_SYMBOL);
			break;
		}
		if (!plain_luajit[0] && nupp_elf_sym(p, "luaJIT_setmode", &v, NULL) == 0)
			snprintf(plain_luajit, sizeof(plain_luajit), "%s", p);
	}
	if (!objpath[0]) {
		free(maps);
		if (plain_luajit[0])
			return nupp_fail(-ENOTSUP,
					 "PID %d runs LuaJIT from %s, which has no nupp-bpf probes and layout: "
					 "run it with our build (%s/bin/luajit, or link %s/lib/libluajit-5.1.so)",
					 (int)pid, plain_luajit, NUPP_LUAJIT_PREFIX, NUPP_LUAJIT_PREFIX);
		return nupp_fail(-ENOENT, "PID %d is not running LuaJIT (no LuaJIT VM in its memory maps)",
				 (int)pid);
	}
	list_addr = vm_sym_addr(objpath, maps, n, NUPP_LJ_VMLIST_SYMBOL);
	free(maps);
	/* The file is mapped but not the segment holding its data: the process is between
	 * the mappings of an exec (or a dlopen) that the kernel makes one by one. No VM can
	 * be open yet; luajit:vm_open reports it when it opens. */
	if (!layout_addr || !list_addr)
		return nupp_fail(-ENOENT,
				 "PID %d is still loading %s (its luajit_bpf_layout/vmlist are not mapped yet): "
				 "no LuaJIT VM is open in it yet",
				 (int)pid, objpath);
	err = nupp_vm_read(pid, layout_addr, &lo, sizeof(lo));
	if (!err)
		err = nupp_vm_read(pid, list_addr, &list, sizeof(list));
	if (err)
		return nupp_fail(err == -EPERM || err == -EACCES ? -EPERM : err,
				 "cannot read the memory of PID %d: %s (CAP_SYS_PTRACE is required; run with sudo)",
				 (int)pid, strerror(-err));
	if (!vm_layout_ok(&lo))
		return nupp_fail(-ENOTSUP,
				 "%s exports a LuaJIT layout this nupp-bpf cannot read (magic %#x version %u size %u, "
				 "want version %u size %zu): rebuild LuaJIT with this nupp-bpf's scripts/build-luajit",
				 objpath, lo.magic, lo.version, lo.size, NUPP_LJ_LAYOUT_VERSION, sizeof(lo));
	for (i = 0; i < NUPP_LJ_VMLIST_MAX && found < max; i++) {
		__u64 g = list.g[i];

		if (!g || nupp_vm_validate(pid, g, &lo))
			continue;
		memset(&out[found], 0, sizeof(out[found]));
		out[found].pid = pid;
		out[found].g = g;
		out[found].L = g + (__s64)lo.gg_g2l;
		out[found].layout_addr = layout_addr;
		out[found].layout = lo;
		snprintf(out[found].path, sizeof(out[found].path), "%s", objpath);
		found++;
	}
	return found;
}

/* Reads the interpreter of a "#!" script: "/usr/bin/env luajit" -> "luajit". */
static int vm_shebang(const char *path, char *interp, size_t size)
{
	char line[512], *p, *tok;
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	p = fgets(line, sizeof(line), f);
	fclose(f);
	if (!p || strncmp(line, "#!", 2) != 0)
		return -ENOEXEC;
	p = line + 2;
	tok = strtok(p, " \t\n");
	if (tok) {
		const char *base = strrchr(tok, '/');

		if (strcmp(base ? base + 1 : tok, "env") == 0)
			tok = strtok(NULL, " \t\n");
	}
	if (!tok)
		return -ENOEXEC;
	snprintf(interp, size, "%s", tok);
	return 0;
}

/* Resolves a command name like execvp does; 0 and the absolute path, or -ENOENT. */
static int vm_which(const char *cmd, char *out, size_t size)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (strchr(cmd, '/'))
		return realpath(cmd, out) && size >= PATH_MAX ? 0 : -ENOENT;
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t len = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, path, cmd);
		if (access(buf, X_OK) == 0 && realpath(buf, out))
			return 0;
		path += len + (path[len] == ':');
	}
	return -ENOENT;
}

/* Finds the DT_NEEDED libluajit of an executable in its RUNPATH/RPATH or system dirs. */
static int vm_needed_luajit(const char *exe, char *out, size_t size)
{
	char dirs[2048] = "", needed[256] = "";
	int fd = open(exe, O_RDONLY | O_CLOEXEC), err = -ENOENT;
	Elf *e;
	Elf_Scn *scn = NULL;

	if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE)
		return fd < 0 ? -errno : -EINVAL;
	e = elf_begin(fd, ELF_C_READ, NULL);
	while (e && (scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t i;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC)
			continue;
		d = elf_getdata(scn, NULL);
		for (i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Dyn dyn;
			const char *s;

			if (!gelf_getdyn(d, (int)i, &dyn))
				continue;
			s = elf_strptr(e, sh.sh_link, dyn.d_un.d_val);
			if (!s)
				continue;
			if (dyn.d_tag == DT_NEEDED && strstr(s, "libluajit"))
				snprintf(needed, sizeof(needed), "%s", s);
			else if (dyn.d_tag == DT_RUNPATH || dyn.d_tag == DT_RPATH)
				snprintf(dirs + strlen(dirs), sizeof(dirs) - strlen(dirs), "%s:", s);
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	if (!needed[0])
		return -ENOENT;
	if (getenv("LD_LIBRARY_PATH"))
		snprintf(dirs + strlen(dirs), sizeof(dirs) - strlen(dirs), "%s:", getenv("LD_LIBRARY_PATH"));
	snprintf(dirs + strlen(dirs), sizeof(dirs) - strlen(dirs),
		 "/usr/local/lib:/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu:/usr/lib:/lib");
	for (char *d = strtok(dirs, ":"); d; d = strtok(NULL, ":")) {
		char cand[PATH_MAX * 2];

		snprintf(cand, sizeof(cand), "%s/%s", d, needed);
		if (access(cand, R_OK) == 0 && realpath(cand, out) && size >= PATH_MAX) {
			err = 0;
			break;
		}
	}
	return err;
}

/* Finds the ELF object that holds a LuaJIT VM for an executable about to be run. */
int nupp_vm_binary_for_exe(const char *exe, char *path, size_t size)
{
	char abs[PATH_MAX], interp[PATH_MAX], lib[PATH_MAX];
	__u64 v;
	int depth;

	if (vm_which(exe, abs, sizeof(abs)))
		return nupp_fail(-ENOENT, "command not found: %s", exe);
	for (depth = 0; depth < 2 && vm_shebang(abs, interp, sizeof(interp)) == 0; depth++)
		if (vm_which(interp, abs, sizeof(abs)))
			return nupp_fail(-ENOENT, "interpreter of %s not found: %s", exe, interp);
	if (nupp_elf_sym(abs, NUPP_LJ_LAYOUT_SYMBOL, &v, NULL) == 0) {
		snprintf(path, size, "%s", abs);
		return 0;
	}
	if (vm_needed_luajit(abs, lib, sizeof(lib)) == 0) {
		if (nupp_elf_sym(lib, NUPP_LJ_LAYOUT_SYMBOL, &v, NULL) == 0) {
			snprintf(path, size, "%s", lib);
			return 0;
		}
		return nupp_fail(-ENOTSUP,
				 "%s uses %s, a LuaJIT without nupp-bpf's probes and layout: link it against %s/lib "
				 "(built by scripts/build-luajit)",
				 exe, lib, NUPP_LUAJIT_PREFIX);
	}
	if (nupp_elf_sym(abs, "luaJIT_setmode", &v, NULL) == 0)
		return nupp_fail(-ENOTSUP,
				 "%s is a LuaJIT without nupp-bpf's probes and layout: use %s/bin/luajit "
				 "(built by scripts/build-luajit)",
				 abs, NUPP_LUAJIT_PREFIX);
	return nupp_fail(-ENOEXEC, "%s does not run LuaJIT (no LuaJIT VM in it or the libraries it links)", abs);
}
