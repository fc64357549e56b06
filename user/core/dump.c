/* nupp_dump_read: the Lua stack each thread of a process runs now, from its memory. The
 * thread's saved user SP and PC (/proc/PID/task/TID/syscall, given while it is off CPU)
 * and the end of the mapping that holds SP are the walker's registers: the frame walker
 * the sampler runs in BPF (include/nupp/walk.h) runs here on the target's pages, read a
 * page at a time into a cache, so every page is read once. Frames are named by the
 * sampler's symbolizer, by function and by line. Local variables are user/core/dump_locals.c's. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/dump.h"
#include "nupp/nupp.h"
#include "nupp/sampler_abi.h"
#include "nupp/zone_abi.h"
#include "nupp_internal.h"
#include "sampler_internal.h"
#include "zones_internal.h"
#include "dump_priv.h"

/* -- The target's pages --------------------------------------------------- */

/* The page of m at addr (page aligned), read on first use; NULL when it cannot be read. */
static const unsigned char *dump_page(struct dump_mem *m, __u64 pg)
{
	struct dump_page *p;
	int i;

	for (i = 0; i < m->n; i++)
		if (m->pages[i].addr == pg)
			return m->pages[i].ok ? m->pages[i].data : NULL;
	if (m->n == DUMP_PAGES)
		m->n = 0; /* full: start again (a dump touches far fewer pages) */
	p = &m->pages[m->n++];
	p->addr = pg;
	p->ok = nupp_vm_read(m->pid, pg, p->data, DUMP_PAGE) == 0;
	m->reads++;
	return p->ok ? p->data : NULL;
}

int dump_mem_read(struct dump_mem *m, __u64 addr, void *dst, size_t sz)
{
	unsigned char *d = dst;

	while (sz) {
		__u64 pg = addr & ~(__u64)(DUMP_PAGE - 1);
		size_t off = (size_t)(addr - pg), n = sz < DUMP_PAGE - off ? sz : DUMP_PAGE - off;
		const unsigned char *p = dump_page(m, pg);

		if (!p) {
			memset(dst, 0, (size_t)(d - (unsigned char *)dst) + sz);
			return -EFAULT;
		}
		memcpy(d, p + off, n);
		d += n;
		addr += n;
		sz -= n;
	}
	return 0;
}

/* The walker's and the symbolizer's reader: the dump being made. */
static __thread struct dump_mem *dump_cur;

static int dump_walk_read(void *dst, unsigned long sz, __u64 addr)
{
	return dump_mem_read(dump_cur, addr, dst, sz);
}

static int dump_sym_read(void *ctx, __u64 addr, void *buf, size_t len)
{
	return dump_mem_read(ctx, addr, buf, len);
}

#define NUPP_WALK_READ(dst, sz, addr) dump_walk_read((dst), (sz), (__u64)(addr))
#define NUPP_WALK_EMIT_HOOK(w, d) dump_emitted(w, d)
struct nupp_walk;
static void dump_emitted(struct nupp_walk *w, __u32 d);
#include "nupp/walk.h"

/* Frame bases by emitted frame: where each frame's slots begin (its link slot + 8). */
static __thread __u64 *dump_bases;

static void dump_emitted(struct nupp_walk *w, __u32 d)
{
	if (dump_bases && d < NUPP_SMP_MAX_DEPTH)
		dump_bases[d] = w->frame + 8;
}

/* -- Threads -------------------------------------------------------------- */

/* Reads the first line of /proc/PID/task/TID/name into buf; 0 or -errno. */
static int dump_proc_line(pid_t pid, pid_t tid, const char *name, char *buf, size_t size)
{
	char path[96];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/%s", (int)pid, (int)tid, name);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, (int)size, f))
		buf[0] = 0;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

/* The thread's name, state and, off CPU, its syscall, SP and PC (0: on a CPU). */
static void dump_thread_state(pid_t pid, struct nupp_dump_thread *t, __u64 *sp, __u64 *pc)
{
	char buf[512], *p;
	long nr;
	unsigned long long a[6], s, ip;

	*sp = *pc = 0;
	t->syscall = -1;
	if (!dump_proc_line(pid, t->tid, "comm", buf, sizeof(buf)))
		snprintf(t->comm, sizeof(t->comm), "%.16s", buf);
	if (!dump_proc_line(pid, t->tid, "stat", buf, sizeof(buf)) && (p = strrchr(buf, ')')) && p[1] == ' ')
		t->state = p[2];
	if (dump_proc_line(pid, t->tid, "syscall", buf, sizeof(buf)) || !strncmp(buf, "running", 7))
		return;
	/* "NR ARG1..ARG6 SP PC" in a system call, "-1 SP PC" blocked outside one. */
	if (sscanf(buf, "%ld 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx", &nr, &a[0], &a[1], &a[2],
		   &a[3], &a[4], &a[5], &s, &ip) == 9) {
		t->syscall = nr;
		*sp = s;
		*pc = ip;
	} else if (sscanf(buf, "%ld 0x%llx 0x%llx", &nr, &s, &ip) == 3) {
		*sp = s;
		*pc = ip;
	}
}

/* The end of the mapping of pid that holds sp (the thread's stack), 0 when none does. */
static __u64 dump_stack_end(pid_t pid, __u64 sp)
{
	char path[64], line[1024];
	unsigned long long lo, hi;
	__u64 end = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (!end && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && sp >= lo && sp < hi)
			end = hi;
	fclose(f);
	return end;
}

/* -- The VM state and zone ------------------------------------------------ */

/* The name of a VM state as the profiles count it. */
static char *dump_vmstate(const struct nupp_lj_layout *lo, __s32 vms)
{
	char buf[64];

	if (vms >= 0)
		snprintf(buf, sizeof(buf), "compiled (trace %d)", vms);
	else if (vms == lo->vmst_interp)
		snprintf(buf, sizeof(buf), "interpreted");
	else if (vms == lo->vmst_c)
		snprintf(buf, sizeof(buf), "C code");
	else if (vms == lo->vmst_gc)
		snprintf(buf, sizeof(buf), "GC");
	else if (vms == lo->vmst_exit || vms == lo->vmst_record || vms == lo->vmst_opt || vms == lo->vmst_asm)
		snprintf(buf, sizeof(buf), "JIT compiler");
	else
		snprintf(buf, sizeof(buf), "unknown (%d)", vms);
	return strdup(buf);
}

/* The zone path open in VM g of pid ("" none), from nupp.zone's slot of the VM. */
static char *dump_zone(struct dump_ctx *c, __u64 g)
{
	struct nupp_lj_vmlist vl;
	const char *path = NULL;
	__u64 bits = 0;
	__u32 id = 0;
	int i;

	if (!c->zones || nupp_zones_vmlist(c->zones, c->pid, &vl))
		return strdup("");
	for (i = 0; i < NUPP_LJ_VMLIST_MAX && i < (int)vl.count; i++)
		if (vl.g[i] == g && vl.zone_tv[i] && !dump_mem_read(&c->mem, vl.zone_tv[i], &bits, 8) &&
		    !nupp_zone_id_of_number(bits, &id))
			break;
	if (id) {
		nupp_zones_refresh(c->zones, c->pid);
		path = nupp_zones_path(c->zones, c->pid, id);
	}
	return strdup(path ? path : "");
}

/* -- One thread's walk ---------------------------------------------------- */

/* Walks VM vm on the thread with registers r into c->w; returns the walk's result,
 * NUPP_WALK_NOT_RUNNING when the thread does not run it, and the VM state in *vms. */
static int dump_walk(struct dump_ctx *c, const struct nupp_vm *vm, struct nupp_walk_regs *r, __s32 *vms)
{
	__u32 how = NUPP_WALK_BASE_AUTO, attempt;
	int res = NUPP_WALK_BAD_FRAME;

	for (attempt = 0; attempt < 2; attempt++) {
		res = nupp_walk_start(c->w, &vm->layout, vm->g, r, NUPP_SMP_MAX_DEPTH, how, vms);
		if (res == NUPP_WALK_NOT_RUNNING)
			return res;
		if (!res) {
			if (c->w->mode == NUPP_WALK_TRACE)
				nupp_walk_trace(c->w, &vm->layout, *vms, r->ip);
			res = nupp_walk_run(c->w, &vm->layout);
			if (res == NUPP_WALK_DONE)
				return res;
		}
		how = nupp_walk_retry(c->w, &vm->layout, *vms, attempt, r->ip);
		if (!how)
			break;
	}
	return res;
}

/* Names the walk's frames into t (outermost first), by function and by line; 0 or -errno.
 * A walk in a trace is expanded as the sampler's are (its inlined frames, when the IP is
 * in the trace's code); one in a C helper the interpreter called is not proven from
 * memory alone (whether the helper's call site stored BASE is the sampler's knowledge). */
static int dump_name(struct dump_ctx *c, struct dump_vmsym *vs, struct nupp_dump_thread *t)
{
	const struct nupp_smp_stack *st = &c->w->st;
	static __thread struct nupp_smp_frame fr[NUPP_SMP_MAX_DEPTH + 64];
	int n, i, err = 0;
	char buf[1024];

	nupp_pr(NUPP_DEBUG, "dump: thread %d: walk mode %u, flags %#x, trace %u, %u frames\n", (int)t->tid,
		c->w->mode, st->flags, st->traceno, st->depth);
	if (st->flags & NUPP_SMP_F_HELPER) {
		t->how = NUPP_DUMP_FAILED;
		t->why = strdup("it is in a C helper of the interpreter, whose frame memory alone does not prove");
		return t->why ? 0 : -ENOMEM;
	}
	n = nupp_traces_expand(vs->traces, st, fr, (int)(sizeof(fr) / sizeof(fr[0])));
	if (n < 0) {
		const char *why = nupp_traces_why(vs->traces);

		t->how = NUPP_DUMP_FAILED;
		snprintf(buf, sizeof(buf), "its trace could not be decoded (%s)", why ? why : "unknown");
		t->why = strdup(buf);
		return t->why ? 0 : -ENOMEM;
	}
	t->frames = calloc((size_t)n + 1, sizeof(*t->frames));
	if (!t->frames)
		return -ENOMEM;
	for (i = n - 1; i >= 0; i--) {
		const struct nupp_smp_frame *f = &fr[i];
		const struct nupp_smp_frame *caller = i + 1 < n ? &fr[i + 1] : NULL;
		struct nupp_dump_frame *o = &t->frames[t->nframes];

		if (f->kind == NUPP_SMP_CORO) {
			o->name = strdup("[coroutine]");
		} else {
			err = nupp_sym_frame(vs->names, f, caller, 0, buf, sizeof(buf));
			o->name = strdup(err ? "[unnamed]" : buf);
			if (f->kind == NUPP_SMP_LUA) {
				o->lua = true;
				if (!nupp_sym_frame(vs->lines, f, caller, 0, buf, sizeof(buf)))
					o->where = strdup(buf);
				if (c->o.locals && i < (int)st->depth && c->bases[i] && !(st->flags & NUPP_SMP_F_TRACE))
					dump_locals(c, vs->vm, f, c->bases[i], o);
			}
		}
		t->nframes++;
		if (!o->name)
			return -ENOMEM;
	}
	return 0;
}

/* The symbolizers of VM vm (made on first use). */
static struct dump_vmsym *dump_vmsym(struct dump_ctx *c, const struct nupp_vm *vm)
{
	int i;

	for (i = 0; i < c->nsyms; i++)
		if (c->syms[i].g == vm->g)
			return &c->syms[i];
	if (c->nsyms == DUMP_MAX_VMS)
		return NULL;
	c->syms[c->nsyms].g = vm->g;
	c->syms[c->nsyms].vm = vm;
	c->syms[c->nsyms].names = nupp_sym_new(c->pid, &vm->layout, false, dump_sym_read, &c->mem);
	c->syms[c->nsyms].lines = nupp_sym_new(c->pid, &vm->layout, true, dump_sym_read, &c->mem);
	c->syms[c->nsyms].traces = nupp_traces_new(&vm->layout, dump_sym_read, &c->mem);
	if (!c->syms[c->nsyms].names || !c->syms[c->nsyms].lines || !c->syms[c->nsyms].traces) {
		nupp_sym_free(c->syms[c->nsyms].names);
		nupp_sym_free(c->syms[c->nsyms].lines);
		nupp_traces_free(c->syms[c->nsyms].traces);
		return NULL;
	}
	nupp_traces_set_sym(c->syms[c->nsyms].traces, c->syms[c->nsyms].names);
	for (i = 0; i < 2; i++) {
		struct nupp_sym *s = i ? c->syms[c->nsyms].lines : c->syms[c->nsyms].names;

		nupp_sym_set_full_filenames(s, c->o.full_filenames);
		nupp_sym_set_vms(s, &vm->g, 1);
	}
	return &c->syms[c->nsyms++];
}

/* Dumps thread t (off CPU: sp, pc) against every VM of the process. */
static int dump_thread(struct dump_ctx *c, struct nupp_dump_thread *t, __u64 sp, __u64 pc)
{
	struct nupp_walk_regs r = { .ip = pc, .sp = sp, .stk_top = dump_stack_end(c->pid, sp) };
	int i, res = NUPP_WALK_NOT_RUNNING;
	__s32 vms = 0;

	for (i = 0; i < c->nvms; i++) {
		const struct nupp_vm *vm = &c->vms[i];
		struct dump_vmsym *vs;

		memset(c->bases, 0, sizeof(c->bases));
		res = dump_walk(c, vm, &r, &vms);
		if (res == NUPP_WALK_NOT_RUNNING)
			continue;
		t->g = vm->g;
		t->vmstate = dump_vmstate(&vm->layout, vms);
		t->zone = dump_zone(c, vm->g);
		if (res != NUPP_WALK_DONE) {
			char why[128];

			snprintf(why, sizeof(why), "its frames could not be proven (%s, at walker line %u)",
				 res == NUPP_WALK_READ_FAULT ? "a read failed" : "a frame did not check out",
				 (unsigned)c->w->why);
			t->how = NUPP_DUMP_FAILED;
			t->why = strdup(why);
			return t->vmstate && t->zone && t->why ? 0 : -ENOMEM;
		}
		vs = dump_vmsym(c, vm);
		if (!vs)
			return -ENOMEM;
		t->how = NUPP_DUMP_MEMORY;
		return t->vmstate && t->zone ? dump_name(c, vs, t) : -ENOMEM;
	}
	/* In no VM: host code. Its C function, named as host frames are. */
	t->how = NUPP_DUMP_HOST;
	if (c->nvms) {
		struct dump_vmsym *vs = dump_vmsym(c, &c->vms[0]);
		struct nupp_smp_frame f = { .ptr = pc, .kind = NUPP_SMP_HOST };
		char buf[512];

		t->frames = calloc(1, sizeof(*t->frames));
		if (!t->frames || !vs)
			return -ENOMEM;
		if (nupp_sym_frame(vs->names, &f, NULL, 0, buf, sizeof(buf)))
			snprintf(buf, sizeof(buf), "[host]");
		t->frames[0].name = strdup(buf);
		t->nframes = t->frames[0].name ? 1 : 0;
	}
	return 0;
}

/* -- The dump -------------------------------------------------------------- */

static int dump_cmp_tid(const void *a, const void *b)
{
	const struct nupp_dump_thread *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

int nupp_dump_read(pid_t pid, const struct nupp_dump_opts *o, struct nupp_dump **out)
{
	struct dump_ctx *c = calloc(1, sizeof(*c));
	struct nupp_dump *d = calloc(1, sizeof(*d));
	char path[64];
	struct dirent *de;
	int err = 0, cap = 0, i;
	__u64 zaddr;
	DIR *dir = NULL;

	*out = NULL;
	if (!c || !d || !(c->w = calloc(1, sizeof(*c->w)))) {
		err = nupp_fail(-ENOMEM, "out of memory");
		goto out;
	}
	if (o && o->sz >= sizeof(*o))
		c->o = *o;
	c->pid = pid;
	c->mem.pid = pid;
	d->pid = pid;
	c->nvms = nupp_vm_find(pid, c->vms, DUMP_MAX_VMS);
	if (c->nvms < 0) {
		err = c->nvms; /* nupp_errmsg is set */
		goto out;
	}
	if (!c->nvms) {
		err = nupp_fail(-ENOENT, "PID %d runs our LuaJIT but has no Lua VM open (yet)", (int)pid);
		goto out;
	}
	c->zones = nupp_zones_new();
	if (c->zones && nupp_zones_find(c->zones, pid, c->vms[0].path, &zaddr)) {
		nupp_zones_free(c->zones);
		c->zones = NULL;
	}
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir) {
		err = nupp_fail(-errno, "cannot list the threads of PID %d: %s", (int)pid, strerror(errno));
		goto out;
	}
	dump_cur = &c->mem;
	dump_bases = c->bases;
	while ((de = readdir(dir))) {
		struct nupp_dump_thread *t;
		__u64 sp, pc;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		if (d->nthreads == cap) {
			int ncap = cap ? cap * 2 : 16;
			void *nt = realloc(d->threads, (size_t)ncap * sizeof(*d->threads));

			if (!nt) {
				err = nupp_fail(-ENOMEM, "out of memory");
				break;
			}
			d->threads = nt;
			cap = ncap;
		}
		t = &d->threads[d->nthreads++];
		memset(t, 0, sizeof(*t));
		t->tid = (pid_t)atoi(de->d_name);
		dump_thread_state(pid, t, &sp, &pc);
		if (!sp) {
			t->how = NUPP_DUMP_RUNNING;
			continue;
		}
		err = dump_thread(c, t, sp, pc);
		if (err) {
			nupp_fail(err, "out of memory");
			break;
		}
	}
	dump_cur = NULL;
	dump_bases = NULL;
	if (d->threads)
		qsort(d->threads, (size_t)d->nthreads, sizeof(*d->threads), dump_cmp_tid);
	d->reads = c->mem.reads;
out:
	if (dir)
		closedir(dir);
	if (c) {
		for (i = 0; i < c->nsyms; i++) {
			nupp_traces_free(c->syms[i].traces);
			nupp_sym_free(c->syms[i].names);
			nupp_sym_free(c->syms[i].lines);
		}
		nupp_zones_free(c->zones);
		free(c->w);
		free(c);
	}
	if (err) {
		nupp_dump_free(d);
		return err;
	}
	*out = d;
	return 0;
}

void nupp_dump_free(struct nupp_dump *d)
{
	int i, j, k;

	if (!d)
		return;
	for (i = 0; i < d->nthreads; i++) {
		struct nupp_dump_thread *t = &d->threads[i];

		for (j = 0; j < t->nframes; j++) {
			for (k = 0; k < t->frames[j].nlocals; k++) {
				free(t->frames[j].locals[k].name);
				free(t->frames[j].locals[k].value);
			}
			free(t->frames[j].locals);
			free(t->frames[j].name);
			free(t->frames[j].where);
		}
		free(t->frames);
		free(t->vmstate);
		free(t->zone);
		free(t->why);
	}
	free(d->threads);
	free(d);
}
