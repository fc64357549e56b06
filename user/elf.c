/* ELF symbol lookup (libelf) and /proc/PID/maps parsing for locating things in targets. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nupp_internal.h"

/* Opens an ELF file for reading; NULL and *fd = -1 on failure (errno set). */
static Elf *elf_open_file(const char *path, int *fd)
{
	Elf *e;

	if (elf_version(EV_CURRENT) == EV_NONE) {
		errno = EINVAL;
		return NULL;
	}
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return NULL;
	e = elf_begin(*fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		if (e)
			elf_end(e);
		close(*fd);
		*fd = -1;
		errno = ENOEXEC;
		return NULL;
	}
	return e;
}

/* Searches one symbol table section for name. */
static int elf_find_in(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, const char *name, __u64 *value,
		       __u64 *size)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t i, n;

	if (!data || !sh->sh_entsize)
		return -ENOENT;
	n = sh->sh_size / sh->sh_entsize;
	for (i = 0; i < n; i++) {
		GElf_Sym sym;
		const char *s;

		if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
			continue;
		s = elf_strptr(e, sh->sh_link, sym.st_name);
		if (s && strcmp(s, name) == 0) {
			*value = sym.st_value;
			if (size)
				*size = sym.st_size;
			return 0;
		}
	}
	return -ENOENT;
}

/* Looks up a symbol (dynsym, then symtab) in an ELF file. */
int nupp_elf_sym(const char *path, const char *name, __u64 *value, __u64 *size)
{
	static const Elf64_Word types[] = { SHT_DYNSYM, SHT_SYMTAB };
	int fd, err = -ENOENT;
	size_t t;
	Elf *e = elf_open_file(path, &fd);

	if (!e)
		return -errno;
	for (t = 0; t < NUPP_ARRAY_SIZE(types) && err; t++) {
		Elf_Scn *scn = NULL;

		while ((scn = elf_nextscn(e, scn)) != NULL) {
			GElf_Shdr sh;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != types[t])
				continue;
			err = elf_find_in(e, scn, &sh, name, value, size);
			if (!err)
				break;
		}
	}
	elf_end(e);
	close(fd);
	return err;
}

/* Translates a virtual address of the ELF file into a file offset (via PT_LOAD). */
int nupp_elf_vaddr_to_off(const char *path, __u64 vaddr, __u64 *off)
{
	int fd, err = -ENOENT;
	size_t i, n;
	Elf *e = elf_open_file(path, &fd);

	if (!e)
		return -errno;
	if (elf_getphdrnum(e, &n) == 0) {
		for (i = 0; i < n; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_memsz) {
				*off = vaddr - ph.p_vaddr + ph.p_offset;
				err = 0;
				break;
			}
		}
	}
	elf_end(e);
	close(fd);
	return err;
}

/* Reads /proc/PID/maps into a malloc'ed array; count or -errno. */
int nupp_maps_read(pid_t pid, struct nupp_map **maps)
{
	char fname[64], line[1024];
	struct nupp_map *v = NULL;
	int n = 0, cap = 0;
	FILE *f;

	snprintf(fname, sizeof(fname), "/proc/%d/maps", (int)pid);
	f = fopen(fname, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		struct nupp_map m;
		unsigned long long s, e, o;
		int pathpos = 0;

		memset(&m, 0, sizeof(m));
		if (sscanf(line, "%llx-%llx %4s %llx %*s %*s %n", &s, &e, m.perms, &o, &pathpos) < 4)
			continue;
		m.start = s;
		m.end = e;
		m.offset = o;
		if (pathpos > 0) {
			size_t len;

			snprintf(m.path, sizeof(m.path), "%s", line + pathpos);
			len = strlen(m.path);
			while (len && (m.path[len - 1] == '\n' || m.path[len - 1] == ' '))
				m.path[--len] = 0;
		}
		if (n == cap) {
			struct nupp_map *nv;

			cap = cap ? cap * 2 : 64;
			nv = realloc(v, (size_t)cap * sizeof(*v));
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
	*maps = v;
	return n;
}

/* The runtime address of a file offset of path in pid's maps, or 0. */
__u64 nupp_maps_addr(const struct nupp_map *maps, int n, const char *path, __u64 off)
{
	int i;

	for (i = 0; i < n; i++) {
		const struct nupp_map *m = &maps[i];

		if (strcmp(m->path, path) == 0 && off >= m->offset &&
		    off < m->offset + (m->end - m->start))
			return m->start + (off - m->offset);
	}
	return 0;
}
