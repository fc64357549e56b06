/* Naming sampled frames as jit.p does (luajit -jp=F): module:name derived from the
 * caller's bytecode like lj_debug_funcname, else module:firstline; builtins by name.
 * This file makes and frees a symbolizer and holds its reads of the target (in bulk,
 * through the read function it was given) and of the target's strings. Its parts:
 * symbolize_ledger.c (which incarnation of a prototype a sample saw, by the free and
 * generation protocol), symbolize_bc.c (a prototype's bytecode and constants),
 * symbolize_name.c (the names of frames and stacks). */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolize_priv.h"

/* A symbolizer for one process. */
struct nupp_sym *nupp_sym_new(pid_t pid, const struct nupp_lj_layout *lo, bool lines, nupp_read_fn read,
			      void *read_ctx)
{
	struct nupp_sym *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->pid = pid;
	s->lines = lines;
	s->drain = 1;
	s->lo = *lo;
	s->read = read;
	s->read_ctx = read_ctx;
	s->ended_min = SYM_ALIVE;
	return s;
}

/* Gives it a vectored reader. */
void nupp_sym_set_readv(struct nupp_sym *s, nupp_readv_fn readv)
{
	s->readv = readv;
}

/* Reads n ranges, with the vectored reader or one by one: how many leading ranges were
 * read whole, or -errno. */
int sym_readv(struct nupp_sym *s, const struct nupp_read_seg *seg, int n)
{
	int i, err;

	if (s->readv)
		return s->readv(s->read_ctx, seg, n);
	for (i = 0; i < n; i++) {
		err = s->read(s->read_ctx, seg[i].addr, seg[i].buf, seg[i].len);
		if (err)
			return i ? i : err;
	}
	return n;
}

/* Frees a prototype record. */
void sym_proto_free(struct sym_proto *p)
{
	int i;

	sym_memo_clear(p);
	for (i = 0; i < p->nkstr; i++)
		free(p->kstr[i].str);
	free(p->kstr);
	free(p->mem);
	free(p);
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
			sym_proto_free(p);
		}
		while (s->cfuncs[i]) {
			struct sym_cfunc *c = s->cfuncs[i];

			s->cfuncs[i] = c->next;
			free(c);
		}
	}
	if (s->own_amap)
		nupp_addrmap_free(s->amap);
	free(s->ooo);
	free(s->stk);
	free(s);
}

/* Bucket of an address. */
unsigned sym_bucket(__u64 a)
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

/* The process's VMs, whose GC phase decides whether a string read from it is proven. */
void nupp_sym_set_vms(struct nupp_sym *s, const __u64 *g, int n)
{
	int i;

	for (i = 0; i < NUPP_SMP_MAX_VMS; i++)
		s->vms[i] = i < n ? g[i] : 0;
}

/* Whether the strings of prototype pt are intact now. The GC frees strings
 * (GCSsweepstring) before prototypes (GCSsweep): while it sweeps, a string of a
 * prototype that is unreachable but not yet freed may already be recycled, and no free
 * event says so yet. So: every VM of the process is outside the sweep, or pt is not dead
 * under it (marked & otherwhite, lj_gc.h isdead). (A VM that stops allocating can stay
 * in a sweep phase for good: the second test keeps its live code nameable.) Outside the
 * sweep, an unreachable prototype's strings are intact, and once swept its free event
 * follows. pt 0 (the strings of several prototypes): every VM outside the sweep. */
bool sym_gc_quiet(struct nupp_sym *s, __u64 pt)
{
	const struct nupp_lj_layout *lo = &s->lo;
	int i;

	for (i = 0; i < NUPP_SMP_MAX_VMS; i++) {
		__u8 st = 0, white = 0, marked = 0;

		if (!s->vms[i])
			continue;
		if (s->read(s->read_ctx, s->vms[i] + lo->g_gc_state, &st, 1))
			return false;
		if (st != lo->gcs_sweepstring && st != lo->gcs_sweep)
			continue;
		if (!pt || s->read(s->read_ctx, s->vms[i] + lo->g_gc_currentwhite, &white, 1) ||
		    s->read(s->read_ctx, pt + lo->gch_marked, &marked, 1))
			return false;
		if (marked & (white ^ lo->gc_whites) & lo->gc_whites)
			return false;
	}
	return true;
}

/* Reads a string of prototype pt, thought alive: proven only if its strings were intact
 * before and after the read (-EAGAIN and gc_busy otherwise: the stack is named later). */
int sym_read_live_str(struct nupp_sym *s, __u64 pt, __u64 str, char *buf, size_t size)
{
	int err;

	if (!sym_gc_quiet(s, pt)) {
		s->gc_busy = true;
		return -EAGAIN;
	}
	err = sym_read_str(s, str, buf, size);
	if (!err && !sym_gc_quiet(s, pt)) {
		s->gc_busy = true;
		return -EAGAIN;
	}
	return err;
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

/* Names modules by the chunk's full path ("@/a/b/c.lua" -> "/a/b/c.lua") or not. */
void nupp_sym_set_full_filenames(struct nupp_sym *s, bool on)
{
	s->full_filenames = on;
}

/* Sets the module of a chunk name (a bytecode builtin's as lj_debug.c:557-562 does). */
void sym_set_module(const struct nupp_sym *s, struct sym_proto *p, const char *chunk)
{
	if (p->firstline == -1)
		snprintf(p->module, sizeof(p->module), "[builtin:%.*s]", (int)sizeof(p->module) - 11, chunk);
	else if (s->full_filenames && (chunk[0] == '@' || chunk[0] == '='))
		snprintf(p->module, sizeof(p->module), "%s", chunk + 1);
	else
		nupp_sym_module(chunk, p->module, sizeof(p->module));
	p->have_module = true;
}
