/* Naming frames: a Lua function by its caller's bytecode (as lj_debug_funcname does) or
 * module:firstline, with its line; a C function by the address map; the names of a
 * frame memoized on its prototype; whole stacks named for the drain. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolize_priv.h"

/* Metamethod names as mmname_str gives them (lj_obj.h:556-563, lj_meta.c:22-29). */
static const char *const sym_mmname[] = {
#define SYM_MMNAME(name) "__" #name,
	MMDEF(SYM_MMNAME)
#undef SYM_MMNAME
};

static const char *sym_funcname_decode(struct nupp_sym *s, struct sym_proto *caller, __u32 pos, char *buf,
				       size_t size);

/* Writes a, then sep and b if sep is not 0, into buf (truncated to size): the names of
 * every frame of every drain go through here, so without printf. */
static void sym_join(char *buf, size_t size, const char *a, char sep, const char *b)
{
	size_t la = strlen(a), lb = sep ? strlen(b) : 0, n = 0;

	if (!size)
		return;
	if (la > size - 1)
		la = size - 1;
	memcpy(buf, a, la);
	n = la;
	if (sep && n < size - 1) {
		buf[n++] = sep;
		if (lb > size - 1 - n)
			lb = size - 1 - n;
		memcpy(buf + n, b, lb);
		n += lb;
	}
	buf[n] = 0;
}

/* Call-site names memoized per caller record, at most this many each. */
#define SYM_FNAMES_MAX 256

/* Forgets the names p's call sites gave and the frame names p gave: what they were
 * made from (its copy, chunk name or string constants) may change. Names other records
 * made with p as their caller die too: they hold p's generation, which moves. */
void sym_memo_clear(struct sym_proto *p)
{
	int i;

	for (i = 0; i < p->nfnames; i++)
		free(p->fnames[i].name);
	free(p->fnames);
	p->fnames = NULL;
	p->nfnames = 0;
	for (i = 0; i < p->nfmemo; i++)
		free(p->fmemo[i].name);
	free(p->fmemo);
	p->fmemo = NULL;
	p->nfmemo = p->capfmemo = 0;
	p->memo_gen++;
}

/* The name caller's call at pos gives its callee (lj_debug_funcname), or NULL: decoded
 * once per caller copy and position, then kept (only a name given is kept: a refusal
 * or a string not readable yet is tried again). */
static const char *sym_funcname(struct nupp_sym *s, struct sym_proto *caller, __u32 pos, char *buf,
				size_t size)
{
	struct sym_fname *n;
	const char *r;
	int i;

	for (i = 0; i < caller->nfnames; i++)
		if (caller->fnames[i].pos == pos) {
			sym_join(buf, size, caller->fnames[i].name, 0, NULL);
			return buf;
		}
	r = sym_funcname_decode(s, caller, pos, buf, size);
	if (!r || s->refused || s->gc_busy || caller->nfnames >= SYM_FNAMES_MAX)
		return r;
	n = realloc(caller->fnames, (caller->nfnames + 1) * sizeof(*n));
	if (!n)
		return r;
	caller->fnames = n;
	n[caller->nfnames].pos = pos;
	n[caller->nfnames].name = strdup(r);
	if (n[caller->nfnames].name)
		caller->nfnames++;
	return r;
}

/* The name a caller gave the function it called at pos (lj_debug_funcname,
 * lj_debug.c:294-320), or NULL, decoded from the caller's bytecode. */
static const char *sym_funcname_decode(struct nupp_sym *s, struct sym_proto *caller, __u32 pos, char *buf,
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

/* "module:line" into buf, as snprintf "%s:%d" would (cut to size), without its cost:
 * every Lua frame of every row of a drain is named so. */
static void sym_join_line(char *buf, size_t size, const char *module, __s32 line)
{
	char num[16], *p = num + sizeof(num);
	__u32 v = line < 0 ? (__u32)0 - (__u32)line : (__u32)line;

	*--p = 0;
	do
		*--p = (char)('0' + v % 10);
	while (v /= 10);
	if (line < 0)
		*--p = '-';
	sym_join(buf, size, module, ':', p);
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

/* Uses a (borrowed) address map of the process to name C functions. */
void nupp_sym_set_addrmap(struct nupp_sym *s, struct nupp_addrmap *a)
{
	if (s->own_amap)
		nupp_addrmap_free(s->amap);
	s->amap = a;
	s->own_amap = false;
}

/* Names a C function by the ELF symbol that contains it, else by its file and address,
 * else "@0x...". Names from a symbol or a file are cached. */
static void sym_cfunc(struct nupp_sym *s, __u64 addr, char *buf, size_t size)
{
	unsigned b = sym_bucket(addr);
	struct sym_cfunc *c;
	int e;

	for (c = s->cfuncs[b]; c; c = c->next)
		if (c->addr == addr) {
			sym_join(buf, size, c->name, 0, NULL);
			return;
		}
	snprintf(buf, size, "@%#llx", (unsigned long long)addr);
	if (!s->amap && s->pid > 0) {
		s->amap = nupp_addrmap_new(s->pid);
		s->own_amap = s->amap != NULL;
		if (s->amap)
			nupp_addrmap_refresh(s->amap);
	}
	if (!s->amap)
		return;
	e = nupp_addrmap_name(s->amap, addr, buf, size);
	if (e < 0 && nupp_addrmap_refresh(s->amap) == 0)
		e = nupp_addrmap_name(s->amap, addr, buf, size);
	if (e < 0) {
		snprintf(buf, size, "@%#llx", (unsigned long long)addr);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c) {
		c->addr = addr;
		sym_join(c->name, sizeof(c->name), buf, 0, NULL);
		c->next = s->cfuncs[b];
		s->cfuncs[b] = c;
	}
}

/* Records where the function of a Lua frame just named name is defined: its chunk as
 * frames name it and its lines (firstline to firstline + numline, the line of its "end":
 * lj_parse.c sets numline = lastline - linedefined). */
static void sym_record(struct nupp_sym *s, const struct sym_proto *p, const char *name)
{
	__s32 numline;

	if (!s->frames || p->firstline < 0 || p->size < s->lo.pt_numline + 4)
		return;
	memcpy(&numline, p->mem + s->lo.pt_numline, 4);
	if (numline < 0)
		return;
	if (nupp_frame_table_add(s->frames, name, p->module, p->firstline, p->firstline + numline))
		s->frames_err = -ENOMEM;
}

/* Sets the table where named Lua frames are recorded (NULL: none); returns -ENOMEM if
 * recording failed since the last call, else 0. */
int nupp_sym_set_frames(struct nupp_sym *s, struct nupp_frame_table *t)
{
	int e = s->frames_err;

	s->frames = t;
	s->frames_err = 0;
	if (t)
		s->frames_epoch++; /* a new table: every memoised name is recorded in it again */
	return e;
}

/* Frame names memoised per record, at most this many each (then named afresh). */
#define SYM_FMEMO_MAX 256

/* p's memoised frame name of this kind, caller record and position, or NULL. */
static struct sym_fmemo *sym_fmemo_find(struct sym_proto *p, int kind, const struct sym_proto *cp, __s32 pos)
{
	int i;

	for (i = 0; i < p->nfmemo; i++) {
		struct sym_fmemo *m = &p->fmemo[i];

		if (m->kind == kind && m->pos == pos &&
		    (kind != SYM_FMEMO_CALLER || (m->cp_id == cp->id && m->cp_gen == cp->memo_gen)))
			return m;
	}
	return NULL;
}

/* Memoises the frame name p gave (just recorded in the table, if any); a failed
 * allocation only costs the memo. */
static void sym_fmemo_add(struct nupp_sym *s, struct sym_proto *p, int kind, const struct sym_proto *cp,
			  __s32 pos, const char *name)
{
	struct sym_fmemo *m;

	if (p->nfmemo >= SYM_FMEMO_MAX)
		return;
	if (p->nfmemo == p->capfmemo) {
		int cap = p->capfmemo ? 2 * p->capfmemo : 4;

		m = realloc(p->fmemo, (size_t)cap * sizeof(*m));
		if (!m)
			return;
		p->fmemo = m;
		p->capfmemo = cap;
	}
	m = &p->fmemo[p->nfmemo];
	m->name = strdup(name);
	if (!m->name)
		return;
	m->kind = (__u8)kind;
	m->pos = pos;
	m->cp_id = cp ? cp->id : 0;
	m->cp_gen = cp ? cp->memo_gen : 0;
	m->len = (__u32)strlen(name);
	m->rec_epoch = s->frames ? s->frames_epoch : 0;
	p->nfmemo++;
}

/* A memoised name used: recorded in the current table unless it is there already. */
static const char *sym_fmemo_use(struct nupp_sym *s, const struct sym_proto *p, struct sym_fmemo *m,
				 size_t *len)
{
	if (s->frames && m->rec_epoch != s->frames_epoch) {
		sym_record(s, p, m->name);
		m->rec_epoch = s->frames_epoch;
	}
	*len = m->len;
	return m->name;
}

/* The frame name just made in s->namebuf by p: recorded in the table, memoised under
 * (kind, cp, pos) when keep, given to the caller; 0. */
static int sym_fmemo_made(struct nupp_sym *s, struct sym_proto *p, int kind, const struct sym_proto *cp,
			  __s32 pos, bool keep, const char **out, size_t *len)
{
	sym_record(s, p, s->namebuf);
	if (keep)
		sym_fmemo_add(s, p, kind, cp, pos, s->namebuf);
	*out = s->namebuf;
	*len = strlen(s->namebuf);
	return 0;
}

/* Names one Lua frame (f->kind NUPP_SMP_LUA) given its caller (NULL if none): *out
 * points at the name (made in s->namebuf, or memoised), *len is its length; 0 or
 * -errno. Names are made whole (cut at SYM_NAME_MAX), whoever asks. */
static int sym_lua_frame(struct nupp_sym *s, const struct nupp_smp_frame *f, const struct nupp_smp_frame *caller,
			 __u64 pgen, const char **out, size_t *len)
{
	char *buf = s->namebuf;
	size_t size = sizeof(s->namebuf);
	struct sym_proto *p, *cp;
	struct sym_fmemo *m;
	char name[SYM_STR_MAX];
	int err = 0;

	p = sym_proto(s, f, pgen, &err);
	if (!p) {
		sym_failed_add(s, f->ptr);
		return err;
	}
	/* A bytecode builtin (firstline ~0, lj_debug.c:555-561 and 606-609): its name
	 * alone when the caller gives one, else "[builtin:name]" with no line. */
	if (s->lines) {
		m = sym_fmemo_find(p, SYM_FMEMO_LINE, NULL, f->pos);
		if (m) {
			*out = sym_fmemo_use(s, p, m, len);
			return 0;
		}
		if (p->firstline == -1)
			sym_join(buf, size, p->module, 0, NULL);
		else
			sym_join_line(buf, size, p->module, sym_line(s, p, f->pos));
		return sym_fmemo_made(s, p, SYM_FMEMO_LINE, NULL, f->pos, true, out, len);
	}
	/* Named by the caller's bytecode when called from Lua or as a metamethod. */
	if (caller && caller->kind == NUPP_SMP_LUA && caller->pos >= 0 &&
	    (f->link == s->lo.frame_lua || f->link == s->lo.frame_cont)) {
		cp = sym_proto(s, caller, pgen, &err);
		if (!cp) {
			sym_failed_add(s, caller->ptr);
			return err;
		}
		m = sym_fmemo_find(p, SYM_FMEMO_CALLER, cp, caller->pos);
		if (m) {
			*out = sym_fmemo_use(s, p, m, len);
			return 0;
		}
		s->refused = false;
		if (sym_funcname(s, cp, (__u32)caller->pos, name, sizeof(name))) {
			if (p->firstline == -1)
				sym_join(buf, size, name, 0, NULL);
			else
				sym_join(buf, size, p->module, ':', name);
			/* Only a name from the caller's copy and kept constants is kept: one
			 * that needed a string not proven yet is made again. */
			return sym_fmemo_made(s, p, SYM_FMEMO_CALLER, cp, caller->pos, !s->refused && !s->gc_busy, out,
					      len);
		}
		/* No name from the caller (maybe not yet: a string not readable now): its
		 * fallback below is not memoised under this caller. */
		if (s->gc_busy)
			return -EAGAIN; /* a name read while a VM swept: not proven yet */
		if (s->refused) {
			sym_failed_add(s, caller->ptr);
			return -ESTALE; /* jit.p would have named it; its name is gone */
		}
	}
	m = sym_fmemo_find(p, SYM_FMEMO_OWN, NULL, 0);
	if (m) {
		*out = sym_fmemo_use(s, p, m, len);
		return 0;
	}
	if (p->firstline == -1)
		sym_join(buf, size, p->module, 0, NULL);
	else
		sym_join_line(buf, size, p->module, p->firstline);
	return sym_fmemo_made(s, p, SYM_FMEMO_OWN, NULL, 0, true, out, len);
}

/* Names one frame given its caller (NULL if none): *out points at the name (held by
 * the symbolizer until its next call), *len is its length; 0 or -errno. */
static int sym_frame(struct nupp_sym *s, const struct nupp_smp_frame *f, const struct nupp_smp_frame *caller,
		     __u64 pgen, const char **out, size_t *len)
{
	char *buf = s->namebuf;
	size_t size = sizeof(s->namebuf);

	s->refused = false;
	s->gc_busy = false;
	switch (f->kind) {
	case NUPP_SMP_FF: {
		const char *ff = nupp_vmdef_ffname(s->lo.branch, f->ptr);

		if (ff)
			sym_join(buf, size, ff, 0, NULL);
		else
			snprintf(buf, size, "[builtin#%llu]", (unsigned long long)f->ptr);
		break;
	}
	case NUPP_SMP_C:
		sym_cfunc(s, f->ptr, buf, size);
		break;
	case NUPP_SMP_CORO:
		sym_join(buf, size, "[coroutine]", 0, NULL);
		break;
	case NUPP_SMP_LUA:
		return sym_lua_frame(s, f, caller, pgen, out, len);
	default:
		return -EINVAL;
	}
	*out = buf;
	*len = strlen(buf);
	return 0;
}

/* Names one frame given its caller (NULL if none). */
int nupp_sym_frame(struct nupp_sym *s, const struct nupp_smp_frame *f, const struct nupp_smp_frame *caller,
		   __u64 pgen, char *buf, size_t size)
{
	const char *name;
	size_t len;
	int err = sym_frame(s, f, caller, pgen, &name, &len);

	if (!err)
		sym_join(buf, size, name, 0, NULL);
	return err;
}

/* Names frames (innermost first) as "outer;...;inner". */
int nupp_sym_stack(struct nupp_sym *s, const struct nupp_smp_frame *f, int n, __u64 pgen, char **out)
{
	/* Not before every free up to the sample is known; never across lost ones. */
	if (s->refuse_upto && pgen <= s->refuse_upto && pgen >= s->refuse_from)
		return -ESTALE;
	if (pgen > s->freed_upto)
		return -EAGAIN;
	size_t len = 0;
	char *str;
	int i, err;

	/* Joined in the symbolizer's scratch (kept from stack to stack), then copied once. */
	for (i = n - 1; i >= 0; i--) {
		const char *name;
		size_t l;

		err = sym_frame(s, &f[i], i + 1 < n ? &f[i + 1] : NULL, pgen, &name, &l);
		if (err)
			return err;
		if (len + l + 2 > s->stkcap) {
			size_t cap = (len + l + 2) * 2 > 4096 ? (len + l + 2) * 2 : 4096;
			char *ns = realloc(s->stk, cap);

			if (!ns)
				return -ENOMEM;
			s->stk = ns;
			s->stkcap = cap;
		}
		if (len)
			s->stk[len++] = ';';
		memcpy(s->stk + len, name, l);
		len += l;
	}
	str = malloc(len + 1);
	if (!str)
		return -ENOMEM;
	if (len)
		memcpy(str, s->stk, len);
	str[len] = 0;
	*out = str;
	return 0;
}

/* The allocation of the incarnation of f->ptr that generation pgen saw, as this
 * symbolizer holds it: copied from the target while it lives (checked against f's
 * fingerprint), or sent by its luajit:proto_free event (a large one's copy is cut:
 * *size says how much). For the trace decoder, which needs the bytecode of a trace's
 * prototypes after they may have died. 0 or -errno (-ESTALE: not held, cannot be read). */
int nupp_sym_proto_mem(struct nupp_sym *s, const struct nupp_smp_frame *f, __u64 pgen, const unsigned char **mem,
		       __u32 *size)
{
	struct sym_proto *p;
	int err;

	for (p = s->protos[sym_bucket(f->ptr)]; p; p = p->next)
		if (p->pt == f->ptr && p->lo <= pgen && pgen < p->hi)
			break;
	if (!p) {
		__u64 end = sym_proto_end(s, f->ptr);

		if (pgen < end || sym_proto_alive(s, f->ptr))
			return -ESTALE;
		p = sym_proto_add(s, f->ptr, end);
		if (!p)
			return -ENOMEM;
		/* A trace's prototype no event named (its trace was not copied by a sample,
		 * or its event was lost): its free may not be reported. */
		p->unwatched = true;
		s->nunwatched++;
	}
	if (p->unusable || (p->have_fp && !sym_fp_eq(p, f)))
		return -ESTALE;
	if (!p->mem) {
		if (p->hi != SYM_ALIVE)
			return -ESTALE;
		err = sym_proto_read(s, p, f);
		if (err)
			return err;
	}
	if (!p->have_fp) {
		p->chunk = f->chunkname;
		p->firstline = f->firstline;
		p->sizebc = f->sizebc;
		p->have_fp = true;
	}
	*mem = p->mem;
	*size = p->size;
	return 0;
}
