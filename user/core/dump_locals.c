/* A Lua frame's local variables for nupp_dump_read: the names live at the frame's PC,
 * from its prototype's varinfo (as debug.getlocal finds them), and a short text of each
 * slot's value (nil, booleans, numbers as %.14g, strings quoted and cut, other values by
 * type and address as tostring shows them). Variables the compiler names itself ("(for
 * index)" ...) are left out. Every read goes through the dump's page cache. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump_priv.h"

#define DUMP_MAX_LOCALS 64 /* per frame */
#define DUMP_VARINFO 8192  /* bytes of varinfo read at most */
#define DUMP_STR_SHOW 40   /* characters of a string value shown */

/* Reads a ULEB128 from p (< end); false past the end. */
static bool dump_uleb(const unsigned char **p, const unsigned char *end, __u32 *v)
{
	__u32 x = 0;
	int sh = 0;

	while (*p < end && sh < 35) {
		unsigned char b = *(*p)++;

		x |= (__u32)(b & 0x7f) << sh;
		if (!(b & 0x80)) {
			*v = x;
			return true;
		}
		sh += 7;
	}
	return false;
}

/* A string value: quoted, non-printable bytes as \ddd, cut with "..." past DUMP_STR_SHOW. */
static void dump_str_value(struct dump_ctx *c, const struct nupp_lj_layout *lo, __u64 str, char *buf, size_t size)
{
	unsigned char s[DUMP_STR_SHOW];
	__u32 len = 0, n, i;
	size_t k = 0;

	if (dump_mem_read(&c->mem, str + lo->str_len, &len, 4)) {
		snprintf(buf, size, "string: %#llx", (unsigned long long)str);
		return;
	}
	n = len < DUMP_STR_SHOW ? len : DUMP_STR_SHOW;
	if (dump_mem_read(&c->mem, str + lo->str_size, s, n)) {
		snprintf(buf, size, "string: %#llx", (unsigned long long)str);
		return;
	}
	buf[k++] = '"';
	for (i = 0; i < n && k + 8 < size; i++) {
		if (s[i] == '"' || s[i] == '\\')
			k += (size_t)snprintf(buf + k, size - k, "\\%c", s[i]);
		else if (s[i] >= 32 && s[i] < 127)
			buf[k++] = (char)s[i];
		else
			k += (size_t)snprintf(buf + k, size - k, "\\%u", s[i]);
	}
	snprintf(buf + k, size - k, "\"%s", n < len ? "..." : "");
}

/* The text of the value bits tv (a GC64 TValue). */
static void dump_value(struct dump_ctx *c, const struct nupp_lj_layout *lo, __u64 tv, char *buf, size_t size)
{
	__u32 it = (__u32)((__s64)tv >> lo->itype_shift); /* sign-extended, as LuaJIT's itype */
	__u64 gc = tv & lo->gcvmask;
	const char *type = NULL;
	double d;

	if (it <= lo->itype_numx) {
		memcpy(&d, &tv, sizeof(d));
		snprintf(buf, size, "%.14g", d);
		return;
	}
	if (it == lo->itype_nil)
		snprintf(buf, size, "nil");
	else if (it == lo->itype_false)
		snprintf(buf, size, "false");
	else if (it == lo->itype_true)
		snprintf(buf, size, "true");
	else if (it == lo->itype_str)
		dump_str_value(c, lo, gc, buf, size);
	else if (it == lo->itype_tab)
		type = "table";
	else if (it == lo->itype_func)
		type = "function";
	else if (it == lo->itype_thread)
		type = "thread";
	else if (it == lo->itype_udata)
		type = "userdata";
	else if (it == lo->itype_lightud)
		type = "userdata";
	else if (it == lo->itype_cdata)
		type = "cdata";
	else if (it == lo->itype_proto)
		type = "proto";
	else
		snprintf(buf, size, "? (tag %#x)", it);
	if (type)
		snprintf(buf, size, "%s: %#llx", type, (unsigned long long)(it == lo->itype_lightud ? tv & lo->gcvmask : gc));
}

void dump_locals(struct dump_ctx *c, const struct nupp_vm *vm, const struct nupp_smp_frame *f, __u64 base,
		 struct nupp_dump_frame *o)
{
	const struct nupp_lj_layout *lo = &vm->layout;
	unsigned char vi[DUMP_VARINFO];
	const unsigned char *p = vi, *end;
	__u64 pt = f->ptr, varinfo = 0;
	__u32 sizept = 0, lastpc = 0, slot = 0, len;

	if (f->pos < 0 || dump_mem_read(&c->mem, pt + lo->pt_varinfo, &varinfo, 8) || !varinfo ||
	    dump_mem_read(&c->mem, pt + lo->pt_sizept, &sizept, 4) || varinfo < pt || varinfo >= pt + sizept)
		return;
	len = (__u32)(pt + sizept - varinfo);
	if (len > sizeof(vi))
		len = sizeof(vi);
	if (dump_mem_read(&c->mem, varinfo, vi, len))
		return;
	end = vi + len;
	o->locals = calloc(DUMP_MAX_LOCALS, sizeof(*o->locals));
	if (!o->locals)
		return;
	while (p < end && *p && o->nlocals < DUMP_MAX_LOCALS) {
		const unsigned char *name = p;
		bool own = *p < lo->varname_max; /* a name of the compiler's own: one byte */
		__u32 start, span;
		__u64 tv;
		char val[128];

		if (own) {
			p++;
		} else {
			while (p < end && *p)
				p++;
			if (p++ >= end)
				break;
		}
		if (!dump_uleb(&p, end, &start) || !dump_uleb(&p, end, &span))
			break;
		lastpc += start;
		if (lastpc > (__u32)f->pos)
			break;
		if ((__u32)f->pos >= lastpc + span)
			continue; /* not live here: it holds no slot */
		if (!own && !dump_mem_read(&c->mem, base + (__u64)slot * lo->tv_size, &tv, 8)) {
			dump_value(c, lo, tv, val, sizeof(val));
			o->locals[o->nlocals].name = strdup((const char *)name);
			o->locals[o->nlocals].value = strdup(val);
			if (o->locals[o->nlocals].name && o->locals[o->nlocals].value)
				o->nlocals++;
		}
		slot++;
	}
}
