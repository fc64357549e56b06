/* A prototype's bytecode as its copy holds it: instructions, line and variable info,
 * and its string constants (read from the target in bulk, at prefetch); slot names as
 * LuaJIT's debug info gives them. It decides no incarnation: symbolize_ledger.c does. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolize_priv.h"

/* lj_bc.c:11-14: A/B/C modes and metamethod of each bytecode. */
const uint16_t sym_bcmode[BC__MAX + 1] = { BCDEF(BCMODE) BCMODE_FF };

/* Internal local variable names (lj_debug.h:50-56). */
static const char *const sym_varnames[] = {
	"",
#define SYM_VARNAME(name, str) str,
	VARNAMEDEF(SYM_VARNAME)
#undef SYM_VARNAME
};

/* Local pointer for a target address inside the proto copy, or NULL. */
const unsigned char *sym_at(const struct sym_proto *p, __u64 addr, __u64 len)
{
	if (addr < p->pt || addr - p->pt > p->size || p->size - (addr - p->pt) < len)
		return NULL;
	return p->mem + (addr - p->pt);
}

/* The 64-bit field at offset ofs of the proto copy. */
__u64 sym_u64(const struct sym_proto *p, size_t ofs)
{
	__u64 v;

	memcpy(&v, p->mem + ofs, sizeof(v));
	return v;
}

/* Bytecode instruction pos of the proto copy (0xffffffff, an invalid opcode, if the copy
 * does not hold it). */
__u32 sym_ins(const struct sym_proto *p, const struct nupp_lj_layout *lo, __u32 pos)
{
	__u32 ins;

	if (lo->pt_size + 4ull * pos + 4 > p->size)
		return 0xffffffffu;
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

/* Adds string constant idx of p, read at the current drain; 0 or -ENOMEM. */
static int sym_kstr_add(struct nupp_sym *s, struct sym_proto *p, __u32 idx, const char *str, size_t len)
{
	struct sym_kstr_entry *e = realloc(p->kstr, (p->nkstr + 1) * sizeof(*e));

	if (!e)
		return -ENOMEM;
	p->kstr = e;
	e[p->nkstr].idx = idx;
	e[p->nkstr].drain = s->drain;
	e[p->nkstr].str = strndup(str, len);
	if (!e[p->nkstr].str)
		return -ENOMEM;
	p->nkstr++;
	return 0;
}

/* Collectable constants of p's copy read at once by sym_kstr_load_many (the first
 * SYM_KSTR_BULK). */
static __u32 sym_nkgc(const struct sym_proto *p)
{
	__u32 nk;

	memcpy(&nk, p->mem + offsetof(GCproto, sizekgc), sizeof(nk));
	return nk < SYM_KSTR_BULK ? nk : SYM_KSTR_BULK;
}

/* Reads the string constants of the prototypes ps[n] (alive, their copies read) in one
 * vectored read, proven like a live string (sym_gc_quiet before and after: of the one
 * prototype, or for several, no VM sweeping). Each range is a
 * constant's GCstr header and the first SYM_KSTR_HEAD bytes of its text; a constant that
 * is no string, or longer, or in a range not read is left to sym_kstr's read of one.
 * The prototypes whose ranges fit in one read get kstr_bulk. 0, -EAGAIN (the GC sweeps:
 * tried again when needed), or -errno. */
static int sym_kstr_load_many(struct nupp_sym *s, struct sym_proto **ps, int n)
{
	const struct nupp_lj_layout *lo = &s->lo;
	__u32 span = lo->str_size + SYM_KSTR_HEAD, nseg = 0, cap = 0, len, i;
	struct nupp_read_seg *seg = NULL;
	__u32 *idx = NULL;
	int *of = NULL, j, done = 0, got, err = 0;
	unsigned char *bytes = NULL;
	__u64 quiet_pt = n == 1 ? ps[0]->pt : 0;

	for (j = 0; j < n; j++)
		cap += sym_nkgc(ps[j]);
	if (cap > SYM_PREFETCH_SEGS)
		cap = SYM_PREFETCH_SEGS;
	if (cap) {
		seg = malloc(cap * sizeof(*seg));
		idx = malloc(cap * sizeof(*idx));
		of = malloc(cap * sizeof(*of));
		bytes = malloc((size_t)cap * span);
		if (!seg || !idx || !of || !bytes) {
			err = -ENOMEM;
			goto out;
		}
	}
	/* Constant i of a prototype is the GCRef at k[-1 - i]. */
	for (j = 0; j < n; j++) {
		struct sym_proto *p = ps[j];
		__u64 k = sym_u64(p, offsetof(GCproto, k));
		__u32 m = sym_nkgc(p);
		const unsigned char *at;

		if (!k || !m || !(at = sym_at(p, k - 8ull * m, 8ull * m)))
			goto whole;
		if (nseg + m > cap)
			break;
		for (i = 0; i < m; i++) {
			__u64 ref;

			memcpy(&ref, at + 8ull * (m - 1 - i), sizeof(ref));
			ref &= lo->gcvmask;
			if (!ref)
				continue;
			seg[nseg].addr = ref;
			seg[nseg].buf = bytes + (size_t)nseg * span;
			seg[nseg].len = span;
			idx[nseg] = i;
			of[nseg++] = j;
		}
whole:
		done = j + 1;
	}
	if (!sym_gc_quiet(s, quiet_pt)) {
		err = -EAGAIN;
		goto out;
	}
	got = nseg ? sym_readv(s, seg, (int)nseg) : 0;
	if (got < 0) {
		err = got;
		goto out;
	}
	if (!sym_gc_quiet(s, quiet_pt)) {
		err = -EAGAIN;
		goto out;
	}
	for (i = 0; i < (__u32)got; i++) {
		const unsigned char *h = seg[i].buf;

		memcpy(&len, h + lo->str_len, sizeof(len));
		if (h[lo->pt_gct] != lo->gct_str || len > SYM_KSTR_HEAD)
			continue;
		err = sym_kstr_add(s, ps[of[i]], idx[i], (const char *)h + lo->str_size, len);
		if (err)
			goto out;
	}
	/* Those whose ranges were all read. */
	if ((__u32)got < nseg)
		done = of[got];
	for (j = 0; j < done; j++) {
		ps[j]->kstr_bulk = true;
		ps[j]->live_drain = s->drain;
	}
out:
	free(seg);
	free(idx);
	free(of);
	free(bytes);
	return err;
}

/* The string constants of one prototype (sym_kstr_load_many). */
int sym_kstr_load(struct nupp_sym *s, struct sym_proto *p)
{
	return sym_kstr_load_many(s, &p, 1);
}

/* Reads the prototypes met since the last call (nupp_sym_born), at most max of them,
 * while they live: their allocations in two vectored reads (sizes, then the
 * allocations, checked against their fingerprints as sym_proto_read does) and their
 * string constants in one more. A program's last samples are named after it exits:
 * what it ran last may have been met since the last drain. The rest are read when a
 * sample needs them. Returns how many were read. */
int nupp_sym_prefetch(struct nupp_sym *s, int max)
{
	const struct nupp_lj_layout *lo = &s->lo;
	struct sym_proto **ps = NULL;
	struct nupp_read_seg *seg = NULL;
	__u32 *sz = NULL;
	int n = 0, m = 0, k = 0, i, got;

	if (max > s->nborn)
		max = s->nborn;
	if (max <= 0)
		goto out;
	ps = malloc(max * sizeof(*ps));
	seg = malloc(max * sizeof(*seg));
	sz = calloc(max, sizeof(*sz));
	if (!ps || !seg || !sz)
		goto out;
	for (i = 0; i < max; i++) {
		struct sym_proto *p = sym_proto_alive(s, s->born[i]);

		if (!p || p->mem || p->unusable || !p->have_fp)
			continue;
		ps[n] = p;
		seg[n] = (struct nupp_read_seg){ p->pt + lo->pt_sizept, &sz[n], sizeof(sz[n]) };
		n++;
	}
	got = n ? sym_readv(s, seg, n) : 0;
	for (i = 0; i < got; i++) {
		struct sym_proto *p = ps[i];

		if (sz[i] < lo->pt_size + 4ull * p->sizebc || sz[i] > (1u << 20))
			continue;
		seg[m] = (struct nupp_read_seg){ p->pt, malloc(sz[i]), sz[i] };
		if (!seg[m].buf)
			break;
		ps[m++] = p;
	}
	got = m ? sym_readv(s, seg, m) : 0;
	for (i = 0; i < m; i++) {
		struct sym_proto *p = ps[i];
		unsigned char *mem = seg[i].buf;

		/* Read whole, and still the prototype born. */
		if (i >= got || !sym_mem_fp_eq(lo, mem, p->chunk, p->firstline, p->sizebc)) {
			free(mem);
			continue;
		}
		sym_proto_take_live(s, p, mem, (__u32)seg[i].len);
		ps[k++] = p;
	}
	if (k)
		sym_kstr_load_many(s, ps, k);
out:
	free(ps);
	free(seg);
	free(sz);
	s->nborn = 0;
	return k;
}

/* String constant idx of p as it was read, or NULL. */
static const char *sym_kstr_find(const struct sym_proto *p, __u32 idx)
{
	int i;

	for (i = 0; i < p->nkstr; i++)
		if (p->kstr[i].idx == idx)
			return p->kstr[i].str;
	return NULL;
}

/* Collectable constant idx (negative) of the proto, a GCstr*, read as a string. */
static int sym_kstr(struct nupp_sym *s, struct sym_proto *p, __u32 idx, char *buf, size_t size)
{
	__u64 k = sym_u64(p, offsetof(GCproto, k)), str;
	const unsigned char *at = sym_at(p, k - 8ull * (idx + 1), 8);
	const char *kept;
	int err;

	if (!k || !at)
		return -EINVAL;
	kept = sym_kstr_find(p, idx);
	/* A freed prototype's constants may be freed too (the GC sweeps strings first). */
	if (!kept && p->hi != SYM_ALIVE) {
		s->refused = true;
		return -ESTALE;
	}
	/* The first one needed: all of them at once, in one read (a program's last samples
	 * are named after it exits, from what was read before). */
	if (!kept && !p->kstr_bulk && sym_kstr_load(s, p) == 0)
		kept = sym_kstr_find(p, idx);
	if (kept) {
		snprintf(buf, size, "%s", kept);
		return 0;
	}
	memcpy(&str, at, 8);
	err = sym_read_live_str(s, p->pt, str & s->lo.gcvmask, buf, size);
	if (err)
		return err;
	/* Kept for the day it is freed (lua_close frees every prototype, before strings);
	 * a failed allocation only costs that. */
	sym_kstr_add(s, p, idx, buf, strlen(buf));
	p->live_drain = s->drain;
	return 0;
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
const char *sym_slotname(struct nupp_sym *s, struct sym_proto *p, __u32 pos, __u32 slot, char *buf,
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
