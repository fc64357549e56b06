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

/* Reads the initial value of a data symbol from the file. */
int nupp_elf_read_sym(const char *path, const char *name, void *buf, size_t len)
{
	__u64 value, size;
	int fd, err = nupp_elf_sym(path, name, &value, &size);
	size_t i, n;
	Elf *e;

	if (err)
		return err;
	if (size < len)
		return -EINVAL;
	e = elf_open_file(path, &fd);
	if (!e)
		return -errno;
	err = -ENOENT;
	if (elf_getphdrnum(e, &n) == 0) {
		for (i = 0; i < n; i++) {
			GElf_Phdr ph;

			/* In the file part of a segment: a .bss symbol has no initial bytes there. */
			if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || value < ph.p_vaddr ||
			    value + len > ph.p_vaddr + ph.p_filesz)
				continue;
			err = pread(fd, buf, len, (off_t)(value - ph.p_vaddr + ph.p_offset)) == (ssize_t)len ? 0 : -EIO;
			break;
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

/* -- Address maps: a process's mappings and its files' function symbols ----------- */

/* One ELF file's function symbols (sorted by address) and its loadable segments. */
struct elf_file {
	char path[512];
	int fd;      /* for code reads, -1 if the file could not be opened */
	int type;    /* ET_EXEC or ET_DYN */
	struct elf_fsym {
		__u64 value, size;
		char *name;
	} *syms;
	size_t nsyms;
	struct elf_seg {
		__u64 off, vaddr, filesz;
	} segs[16];
	int nsegs;
	struct elf_file *next;
};

struct nupp_addrmap {
	pid_t pid;
	struct nupp_map *maps;
	int nmaps;
	struct elf_file *files;
};

/* Orders symbols by address. */
static int elf_sym_cmp(const void *a, const void *b)
{
	const struct elf_fsym *x = a, *y = b;

	return x->value < y->value ? -1 : x->value > y->value;
}

/* Loads a file's function symbols (symtab and dynsym) and PT_LOAD segments. */
static void elf_file_load(struct elf_file *f)
{
	Elf *e = elf_open_file(f->path, &f->fd);
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	size_t i, n, cap = 0;

	if (!e)
		return;
	if (gelf_getehdr(e, &eh))
		f->type = eh.e_type;
	if (elf_getphdrnum(e, &n) == 0)
		for (i = 0; i < n && f->nsegs < 16; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) {
				f->segs[f->nsegs].off = ph.p_offset;
				f->segs[f->nsegs].vaddr = ph.p_vaddr;
				f->segs[f->nsegs++].filesz = ph.p_filesz;
			}
		}
	while ((scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) ||
			    (GELF_ST_TYPE(sym.st_info) != STT_FUNC && GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC) ||
			    !sym.st_value || sym.st_shndx == SHN_UNDEF)
				continue;
			name = elf_strptr(e, sh.sh_link, sym.st_name);
			if (!name || !name[0])
				continue;
			if (f->nsyms == cap) {
				struct elf_fsym *ns = realloc(f->syms, (cap = cap ? cap * 2 : 256) * sizeof(*ns));

				if (!ns)
					break;
				f->syms = ns;
			}
			f->syms[f->nsyms].value = sym.st_value;
			f->syms[f->nsyms].size = sym.st_size;
			f->syms[f->nsyms].name = strdup(name);
			if (f->syms[f->nsyms].name)
				f->nsyms++;
		}
	}
	elf_end(e);
	qsort(f->syms, f->nsyms, sizeof(*f->syms), elf_sym_cmp);
}

/* The loaded file of path (loaded on first use). */
static struct elf_file *elf_file_get(struct nupp_addrmap *a, const char *path)
{
	struct elf_file *f;

	for (f = a->files; f; f = f->next)
		if (strcmp(f->path, path) == 0)
			return f;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	snprintf(f->path, sizeof(f->path), "%s", path);
	f->fd = -1;
	elf_file_load(f);
	f->next = a->files;
	a->files = f;
	return f;
}

/* A new, empty address map of pid (read by nupp_addrmap_refresh). */
struct nupp_addrmap *nupp_addrmap_new(pid_t pid)
{
	struct nupp_addrmap *a = calloc(1, sizeof(*a));

	if (a)
		a->pid = pid;
	return a;
}

/* Frees the map and its files. */
void nupp_addrmap_free(struct nupp_addrmap *a)
{
	struct elf_file *f, *nf;
	size_t i;

	if (!a)
		return;
	for (f = a->files; f; f = nf) {
		nf = f->next;
		for (i = 0; i < f->nsyms; i++)
			free(f->syms[i].name);
		free(f->syms);
		if (f->fd >= 0)
			close(f->fd);
		free(f);
	}
	free(a->maps);
	free(a);
}

/* Reads the process's mappings again (kept as they were if it is gone); 0 or -errno.
 * Earlier mappings that no new one overlaps are kept after the new ones, so code that
 * ran before an exec or a dlclose is still named as it was mapped when it ran. */
int nupp_addrmap_refresh(struct nupp_addrmap *a)
{
	struct nupp_map *maps = NULL, *nm;
	int n = nupp_maps_read(a->pid, &maps), i, j, keep = 0;

	if (n < 0)
		return n;
	for (i = 0; i < a->nmaps && n + keep < 4096; i++) {
		for (j = 0; j < n; j++)
			if (a->maps[i].start < maps[j].end && maps[j].start < a->maps[i].end)
				break;
		if (j < n || a->maps[i].path[0] != '/')
			continue;
		nm = realloc(maps, (size_t)(n + keep + 1) * sizeof(*maps));
		if (!nm)
			break;
		maps = nm;
		maps[n + keep++] = a->maps[i];
	}
	free(a->maps);
	a->maps = maps;
	a->nmaps = n + keep;
	return 0;
}

/* The mapping that holds addr, or NULL. */
static const struct nupp_map *elf_map_of(const struct nupp_addrmap *a, __u64 addr)
{
	int i;

	for (i = 0; i < a->nmaps; i++)
		if (addr >= a->maps[i].start && addr < a->maps[i].end)
			return &a->maps[i];
	return NULL;
}

/* The file and link-time address of runtime address addr; 0, or -ENOENT (anonymous or
 * not mapped: *m says which). */
static int elf_locate(struct nupp_addrmap *a, __u64 addr, const struct nupp_map **m, struct elf_file **f,
		      __u64 *off, __u64 *vaddr)
{
	int i;

	*m = elf_map_of(a, addr);
	if (!*m || (*m)->path[0] != '/')
		return -ENOENT;
	*f = elf_file_get(a, (*m)->path);
	if (!*f)
		return -ENOMEM;
	*off = addr - (*m)->start + (*m)->offset;
	*vaddr = *off;
	for (i = 0; i < (*f)->nsegs; i++)
		if (*off >= (*f)->segs[i].off && *off < (*f)->segs[i].off + (*f)->segs[i].filesz) {
			*vaddr = *off - (*f)->segs[i].off + (*f)->segs[i].vaddr;
			break;
		}
	return 0;
}

/* The function symbol of f that contains link-time address v, or NULL. */
static const struct elf_fsym *elf_sym_at(const struct elf_file *f, __u64 v)
{
	size_t lo = 0, hi = f->nsyms;
	const struct elf_fsym *s;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (f->syms[mid].value <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	s = &f->syms[lo - 1];
	/* A sized symbol ends where it says; an unsized one where the next begins. */
	if (s->size ? v >= s->value + s->size : (lo < f->nsyms && v >= f->syms[lo].value))
		return NULL;
	return s;
}

/* The function containing runtime address addr: 0 with its name and runtime start, or
 * -ENOENT when no symbol of a mapped file contains it. */
int nupp_addrmap_sym(struct nupp_addrmap *a, __u64 addr, __u64 *start, char *buf, size_t size)
{
	const struct nupp_map *m;
	const struct elf_fsym *s;
	struct elf_file *f;
	__u64 off, v;

	if (elf_locate(a, addr, &m, &f, &off, &v))
		return -ENOENT;
	s = elf_sym_at(f, v);
	if (!s)
		return -ENOENT;
	snprintf(buf, size, "%s", s->name);
	if (start)
		*start = addr - (v - s->value);
	return 0;
}

/* Names the code at runtime address addr: its function's ELF symbol (0); else the file and
 * link-time address "libfoo.so+0x1a2b" or the mapping "[vdso]", "[anon]" (1); -ENOENT if no
 * mapping holds it. */
int nupp_addrmap_name(struct nupp_addrmap *a, __u64 addr, char *buf, size_t size)
{
	const struct nupp_map *m;
	struct elf_file *f;
	__u64 off, v;
	const char *base;

	if (nupp_addrmap_sym(a, addr, NULL, buf, size) == 0)
		return 0;
	if (elf_locate(a, addr, &m, &f, &off, &v) == 0) {
		base = strrchr(m->path, '/');
		snprintf(buf, size, "%s+%#llx", base ? base + 1 : m->path, (unsigned long long)v);
		return 1;
	}
	if (!m)
		return -ENOENT;
	snprintf(buf, size, "%s", m->path[0] ? m->path : "[anon]");
	return 1;
}

/* Reads len bytes of code at runtime address addr from its mapped file; 0 or -errno. */
int nupp_addrmap_read(struct nupp_addrmap *a, __u64 addr, void *buf, size_t len)
{
	const struct nupp_map *m;
	struct elf_file *f;
	__u64 off, v;

	if (elf_locate(a, addr, &m, &f, &off, &v) || f->fd < 0 || addr + len > m->end)
		return -ENOENT;
	return pread(f->fd, buf, len, (off_t)off) == (ssize_t)len ? 0 : -EIO;
}
