/* Naming sampled frames as jit.p does (luajit -jp=F): module:name derived from the
 * caller's bytecode like lj_debug_funcname, else module:firstline; builtins by name. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nupp_internal.h"
#include "sampler_internal.h"
#include "nupp_vmdef.h"

/* LuaJIT's own headers (build/luajit/src) for the bytecode mode table, metamethod names
 * and internal variable names; GCproto fields the layout struct does not export. */
#include "lj_obj.h"
#include "lj_bc.h"
#include "lj_debug.h"

/* lj_bc.c:11-14: A/B/C modes and metamethod of each bytecode. */
static const uint16_t sym_bcmode[] = { BCDEF(BCMODE) BCMODE_FF };

/* Metamethod names as mmname_str gives them (lj_obj.h:556-563, lj_meta.c:22-29). */
static const char *const sym_mmname[] = {
#define SYM_MMNAME(name) "__" #name,
	MMDEF(SYM_MMNAME)
#undef SYM_MMNAME
};

/* Internal local variable names (lj_debug.h:50-56). */
static const char *const sym_varnames[] = {
	"",
#define SYM_VARNAME(name, str) str,
	VARNAMEDEF(SYM_VARNAME)
#undef SYM_VARNAME
};

#define SYM_BUCKETS 4096
#define SYM_STR_MAX 256

/* A prototype copied from the target: the whole allocation (sizept bytes). */
struct sym_proto {
	struct sym_proto *next;
	__u64 pt, chunk;
	__s32 firstline;
	__u32 sizebc;
	unsigned char *mem;
	__u32 size;
	char module[SYM_STR_MAX];
};

/* A named C function address. */
struct sym_cfunc {
	struct sym_cfunc *next;
	__u64 addr;
	char name[SYM_STR_MAX];
};

struct nupp_sym {
	pid_t pid;
	bool lines;
	struct nupp_lj_layout lo;
	nupp_read_fn read;
	void *read_ctx;
	struct sym_proto *protos[SYM_BUCKETS];
	struct sym_cfunc *cfuncs[SYM_BUCKETS];
	struct nupp_map *maps;
	int nmaps;
};

/* A symbolizer for one process. */
struct nupp_sym *nupp_sym_new(pid_t pid, const struct nupp_lj_layout *lo, bool lines, nupp_read_fn read,
			      void *read_ctx)
{
	struct nupp_sym *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->pid = pid;
	s->lines = lines;
	s->lo = *lo;
	s->read = read;
	s->read_ctx = read_ctx;
	return s;
}

/* Frees it and its caches. */
void nupp_sym_free(struct nupp_sym *s)
{
	int i;

	if (!s)
		return;
	for (i = 0; i < SYM_BUCKETS; i++) {
		while (s->protos[i]) {
			struct sym_proto *p = s->protos[i];

			s->protos[i] = p->next;
			free(p->mem);
			free(p);
		}
		while (s->cfuncs[i]) {
			struct sym_cfunc *c = s->cfuncs[i];

			s->cfuncs[i] = c->next;
			free(c);
		}
	}
	free(s->maps);
	free(s);
}

/* Bucket of an address. */
static unsigned sym_bucket(__u64 a)
{
	return (unsigned)((a >> 3) * 0x9e3779b97f4a7c15ull >> 52) & (SYM_BUCKETS - 1);
}

/* Reads a GCstr of the target (NUL-terminated, truncated to size). */
static int sym_read_str(struct nupp_sym *s, __u64 str, char *buf, size_t size)
{
	__u32 len = 0;
	int err;

	if (!str)
		return -EINVAL;
	err = s->read(s->read_ctx, str + s->lo.str_len, &len, sizeof(len));
	if (err)
		return err;
	if (len >= size)
		len = (__u32)size - 1;
	err = s->read(s->read_ctx, str + s->lo.str_size, buf, len);
	if (err)
		return err;
	buf[len] = 0;
	return 0;
}

/* Module of a chunk name as jit.p prints it (debug_putchunkname, lj_debug.c:553-578). */
void nupp_sym_module(const char *chunk, char *buf, size_t size)
{
	const char *p = chunk, *slash;

	if (*p == '@' || *p == '=') {
		p++;
		slash = strrchr(p, '/');
		if (slash)
			p = slash + 1;
		snprintf(buf, size, "%s", p);
	} else {
		snprintf(buf, size, "[string]");
	}
}

/* The cached copy of a proto, checked against the sample's fingerprint; NULL and *err. */
static struct sym_proto *sym_proto(struct nupp_sym *s, const struct nupp_smp_frame *f, int *err)
{
	unsigned b = sym_bucket(f->ptr);
	struct sym_proto *p;
	__u32 sizept = 0;
	char chunk[SYM_STR_MAX];
	const struct nupp_lj_layout *lo = &s->lo;

	for (p = s->protos[b]; p; p = p->next)
		if (p->pt == f->ptr && p->chunk == f->chunkname && p->firstline == f->firstline &&
		    p->sizebc == f->sizebc)
			return p;
	*err = s->read(s->read_ctx, f->ptr + lo->pt_sizept, &sizept, sizeof(sizept));
	if (*err)
		return NULL;
	if (sizept < lo->pt_size + 4 * f->sizebc || sizept > (64u << 20)) {
		*err = -ESTALE;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->mem = malloc(sizept))) {
		free(p);
		*err = -ENOMEM;
		return NULL;
	}
	*err = s->read(s->read_ctx, f->ptr, p->mem, sizept);
	/* The fingerprint must match the memory now: a freed and reused address is refused. */
	if (!*err && (*(__u64 *)(p->mem + lo->pt_chunkname) != f->chunkname ||
		      *(__s32 *)(p->mem + lo->pt_firstline) != f->firstline ||
		      *(__u32 *)(p->mem + lo->pt_sizebc) != f->sizebc))
		*err = -ESTALE;
	if (!*err)
		*err = sym_read_str(s, f->chunkname, chunk, sizeof(chunk));
	if (*err) {
		free(p->mem);
		free(p);
		return NULL;
	}
	p->pt = f->ptr;
	p->chunk = f->chunkname;
	p->firstline = f->firstline;
	p->sizebc = f->sizebc;
	p->size = sizept;
	if (f->firstline == -1) /* bytecode builtin (lj_debug.c:557-562) */
		snprintf(p->module, sizeof(p->module), "[builtin:%.*s]", (int)sizeof(p->module) - 11, chunk);
	else
		nupp_sym_module(chunk, p->module, sizeof(p->module));
	p->next = s->protos[b];
	s->protos[b] = p;
	return p;
}

/* Local pointer for a target address inside the proto copy, or NULL. */
static const unsigned char *sym_at(const struct sym_proto *p, __u64 addr, __u64 len)
{
	if (addr < p->pt || addr - p->pt > p->size || p->size - (addr - p->pt) < len)
		return NULL;
	return p->mem + (addr - p->pt);
}

/* The 64-bit field at offset ofs of the proto copy. */
static __u64 sym_u64(const struct sym_proto *p, size_t ofs)
{
	__u64 v;

	memcpy(&v, p->mem + ofs, sizeof(v));
	return v;
}

/* Bytecode instruction pos of the proto copy. */
static __u32 sym_ins(const struct sym_proto *p, const struct nupp_lj_layout *lo, __u32 pos)
{
	__u32 ins;

	memcpy(&ins, p->mem + lo->pt_size + 4 * pos, sizeof(ins));
	return ins;
}

/* Reads an uleb128 from [*pp, end) (lj_buf_ruleb128). */
static __u32 sym_uleb128(const unsigned char **pp, const unsigned char *end)
{
	const unsigned char *q = *pp;
	__u32 v = 0;
	int sh = 0;

	while (q < end) {
		__u8 b = *q++;

		v |= (__u32)(b & 0x7f) << sh;
		sh += 7;
		if (!(b & 0x80) || sh > 28)
			break;
	}
	*pp = q;
	return v;
}

/* Name of the local in slot at pc (debug_varname, lj_debug.c:146-178), or NULL. */
static const char *sym_varname(const struct sym_proto *p, __u32 pc, __u32 slot, char *buf, size_t size)
{
	__u64 vi = sym_u64(p, offsetof(GCproto, varinfo));
	const unsigned char *q, *end = p->mem + p->size;
	__u32 lastpc = 0;

	if (!vi || !(q = sym_at(p, vi, 1)))
		return NULL;
	while (q < end) {
		const unsigned char *name = q;
		__u32 vn = *q, startpc, endpc;

		if (vn < NUPP_ARRAY_SIZE(sym_varnames)) {
			if (vn == 0)
				break;
		} else {
			while (q < end && *q)
				q++;
		}
		q++;
		lastpc = startpc = lastpc + sym_uleb128(&q, end);
		if (startpc > pc)
			break;
		endpc = startpc + sym_uleb128(&q, end);
		if (pc < endpc && slot-- == 0) {
			if (vn < NUPP_ARRAY_SIZE(sym_varnames))
				return sym_varnames[vn];
			snprintf(buf, size, "%.*s", (int)strnlen((const char *)name, end - name), name);
			return buf;
		}
	}
	return NULL;
}

/* Collectable constant idx (negative) of the proto, a GCstr*, read as a string. */
static int sym_kstr(struct nupp_sym *s, const struct sym_proto *p, __u32 idx, char *buf, size_t size)
{
	__u64 k = sym_u64(p, offsetof(GCproto, k)), str;
	const unsigned char *at = sym_at(p, k - 8ull * (idx + 1), 8);

	if (!k || !at)
		return -EINVAL;
	memcpy(&str, at, 8);
	return sym_read_str(s, str & s->lo.gcvmask, buf, size);
}

/* Name of upvalue idx (lj_debug_uvname, lj_debug.c:218-225). */
static const char *sym_uvname(const struct sym_proto *p, __u32 idx, char *buf, size_t size)
{
	__u64 uv = sym_u64(p, offsetof(GCproto, uvinfo));
	const unsigned char *q, *end = p->mem + p->size;

	if (!uv || !(q = sym_at(p, uv, 1)))
		return "";
	while (idx && q < end)
		if (*q++ == 0)
			idx--;
	snprintf(buf, size, "%.*s", (int)strnlen((const char *)q, end - q), q);
	return buf;
}

/* What the value in slot was loaded from before pos (lj_debug_slotname,
 * lj_debug.c:246-291): a local, global, field, method or upvalue name, or NULL. */
static const char *sym_slotname(struct nupp_sym *s, const struct sym_proto *p, __u32 pos, __u32 slot, char *buf,
				size_t size)
{
	const struct nupp_lj_layout *lo = &s->lo;
	const char *lname;
	__u32 ip = pos;

restart:
	lname = sym_varname(p, ip, slot, buf, size);
	if (lname)
		return lname == buf ? buf : (snprintf(buf, size, "%s", lname), buf);
	while (--ip > 0) {
		__u32 ins = sym_ins(p, lo, ip), op = ins & 0xff, ra = (ins >> 8) & 0xff;
		__u32 ma;

		if (op >= NUPP_ARRAY_SIZE(sym_bcmode))
			return NULL;
		ma = sym_bcmode[op] & 7;
		if (ma == BCMbase) {
			if (slot >= ra && (op != BC_KNIL || slot <= (ins >> 16)))
				return NULL;
		} else if (ma == BCMdst && ra == slot) {
			switch (op) {
			case BC_MOV:
				slot = ins >> 16;
				goto restart;
			case BC_GGET:
				return sym_kstr(s, p, ins >> 16, buf, size) ? NULL : buf;
			case BC_TGETS:
				return sym_kstr(s, p, (ins >> 16) & 0xff, buf, size) ? NULL : buf;
			case BC_UGET:
				return sym_uvname(p, ins >> 16, buf, size);
			default:
				return NULL;
			}
		}
	}
	return NULL;
}

/* The name a caller gave the function it called at pos (lj_debug_funcname,
 * lj_debug.c:294-320), or NULL. */
static const char *sym_funcname(struct nupp_sym *s, const struct sym_proto *caller, __u32 pos, char *buf,
				size_t size)
{
	__u32 ins, op, mm;

	if (pos >= caller->sizebc)
		return NULL;
	ins = sym_ins(caller, &s->lo, pos);
	op = ins & 0xff;
	if (op >= NUPP_ARRAY_SIZE(sym_bcmode))
		return NULL;
	mm = sym_bcmode[op] >> 11;
	if (mm == MM_call) {
		__u32 slot = (ins >> 8) & 0xff;

		if (op == BC_ITERC)
			slot -= 3;
		return sym_slotname(s, caller, pos, slot, buf, size);
	}
	if (mm < NUPP_ARRAY_SIZE(sym_mmname)) {
		snprintf(buf, size, "%s", sym_mmname[mm]);
		return buf;
	}
	return NULL;
}

/* Current line of a Lua frame (lj_debug_line, lj_debug.c:116-130), firstline if unknown. */
static __s32 sym_line(struct nupp_sym *s, const struct sym_proto *p, __s32 pos)
{
	const struct nupp_lj_layout *lo = &s->lo;
	__s32 numline;
	__u64 li = sym_u64(p, lo->pt_lineinfo);
	const unsigned char *at;

	if (pos < 0 || (__u32)pos > p->sizebc)
		return p->firstline;
	if (!li)
		return 0;
	memcpy(&numline, p->mem + lo->pt_numline, 4);
	if ((__u32)pos == p->sizebc)
		return p->firstline + numline;
	if (pos == 0)
		return p->firstline;
	pos--;
	if (numline < 256) {
		at = sym_at(p, li + pos, 1);
		return at ? p->firstline + *at : p->firstline;
	} else if (numline < 65536) {
		__u16 v;

		at = sym_at(p, li + 2ull * pos, 2);
		if (!at)
			return p->firstline;
		memcpy(&v, at, 2);
		return p->firstline + v;
	} else {
		__u32 v;

		at = sym_at(p, li + 4ull * pos, 4);
		if (!at)
			return p->firstline;
		memcpy(&v, at, 4);
		return p->firstline + (__s32)v;
	}
}

/* Names a C function by the ELF symbol that contains it, else "@0x...". */
static void sym_cfunc(struct nupp_sym *s, __u64 addr, char *buf, size_t size)
{
	unsigned b = sym_bucket(addr);
	struct sym_cfunc *c;
	int i;

	for (c = s->cfuncs[b]; c; c = c->next)
		if (c->addr == addr) {
			snprintf(buf, size, "%s", c->name);
			return;
		}
	snprintf(buf, size, "@%#llx", (unsigned long long)addr);
	if (!s->maps && s->pid > 0)
		s->nmaps = nupp_maps_read(s->pid, &s->maps);
	for (i = 0; i < s->nmaps; i++) {
		const struct nupp_map *m = &s->maps[i];
		__u64 base = 0, vaddr;
		int j, fd;
		Elf *e;
		Elf_Scn *scn = NULL;
		const char *best = NULL;
		__u64 bestv = 0;

		if (addr < m->start || addr >= m->end || m->path[0] != '/')
			continue;
		/* Load bias: the mapping with file offset 0 of the same file. */
		for (j = 0; j < s->nmaps; j++)
			if (strcmp(s->maps[j].path, m->path) == 0 && s->maps[j].offset == 0) {
				base = s->maps[j].start;
				break;
			}
		fd = open(m->path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE) {
			if (fd >= 0)
				close(fd);
			break;
		}
		e = elf_begin(fd, ELF_C_READ, NULL);
		{
			GElf_Ehdr eh;

			/* ET_EXEC is mapped at its link addresses. */
			if (e && gelf_getehdr(e, &eh) && eh.e_type == ET_EXEC)
				base = 0;
		}
		vaddr = addr - base;
		while (e && (scn = elf_nextscn(e, scn)) != NULL) {
			GElf_Shdr sh;
			Elf_Data *d;
			size_t k;

			if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
				continue;
			d = elf_getdata(scn, NULL);
			for (k = 0; d && k < sh.sh_size / sh.sh_entsize; k++) {
				GElf_Sym sym;

				if (!gelf_getsym(d, (int)k, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
				    !sym.st_value)
					continue;
				if (vaddr >= sym.st_value && vaddr < sym.st_value + (sym.st_size ? sym.st_size : 1) &&
				    sym.st_value >= bestv) {
					best = elf_strptr(e, sh.sh_link, sym.st_name);
					bestv = sym.st_value;
				}
			}
		}
		if (best)
			snprintf(buf, size, "%s", best);
		if (e)
			elf_end(e);
		close(fd);
		break;
	}
	c = calloc(1, sizeof(*c));
	if (c) {
		c->addr = addr;
		snprintf(c->name, sizeof(c->name), "%s", buf);
		c->next = s->cfuncs[b];
		s->cfuncs[b] = c;
	}
}

/* Names one frame given its caller (NULL if none). */
int nupp_sym_frame(struct nupp_sym *s, const struct nupp_smp_frame *f, const struct nupp_smp_frame *caller,
		   char *buf, size_t size)
{
	struct sym_proto *p, *cp;
	char name[SYM_STR_MAX];
	int err = 0;

	switch (f->kind) {
	case NUPP_SMP_FF:
		if (f->ptr < NUPP_VMDEF_FFNAMES_N && nupp_vmdef_ffnames[f->ptr][0])
			snprintf(buf, size, "%s", nupp_vmdef_ffnames[f->ptr]);
		else
			snprintf(buf, size, "[builtin#%llu]", (unsigned long long)f->ptr);
		return 0;
	case NUPP_SMP_C:
		sym_cfunc(s, f->ptr, buf, size);
		return 0;
	case NUPP_SMP_CORO:
		snprintf(buf, size, "[coroutine]");
		return 0;
	case NUPP_SMP_LUA:
		break;
	default:
		return -EINVAL;
	}
	p = sym_proto(s, f, &err);
	if (!p)
		return err;
	if (s->lines) {
		snprintf(buf, size, "%s:%d", p->module, sym_line(s, p, f->pos));
		return 0;
	}
	/* Named by the caller's bytecode when called from Lua or as a metamethod. */
	if (caller && caller->kind == NUPP_SMP_LUA && caller->pos >= 0 &&
	    (f->link == s->lo.frame_lua || f->link == s->lo.frame_cont)) {
		cp = sym_proto(s, caller, &err);
		if (!cp)
			return err;
		if (sym_funcname(s, cp, (__u32)caller->pos, name, sizeof(name))) {
			snprintf(buf, size, "%s:%s", p->module, name);
			return 0;
		}
	}
	snprintf(buf, size, "%s:%d", p->module, p->firstline);
	return 0;
}

/* Names frames (innermost first) as "outer;...;inner". */
int nupp_sym_stack(struct nupp_sym *s, const struct nupp_smp_frame *f, int n, char **out)
{
	size_t cap = 256, len = 0;
	char *str = malloc(cap), name[SYM_STR_MAX * 2];
	int i, err;

	if (!str)
		return -ENOMEM;
	str[0] = 0;
	for (i = n - 1; i >= 0; i--) {
		size_t l;

		err = nupp_sym_frame(s, &f[i], i + 1 < n ? &f[i + 1] : NULL, name, sizeof(name));
		if (err) {
			free(str);
			return err;
		}
		l = strlen(name);
		if (len + l + 2 > cap) {
			char *ns;

			cap = (len + l + 2) * 2;
			ns = realloc(str, cap);
			if (!ns) {
				free(str);
				return -ENOMEM;
			}
			str = ns;
		}
		if (len)
			str[len++] = ';';
		memcpy(str + len, name, l + 1);
		len += l;
	}
	*out = str;
	return 0;
}
