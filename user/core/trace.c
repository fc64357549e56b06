/* The trace channel: loads bpf/trace.bpf.c, attaches it to luajit:trace_* and turns the
 * kernel's abort rows into reason and location text. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "nupp/trace.h"
#include "nupp/severity.h"
#include "nupp_internal.h"
#include "zones_internal.h"
#include "nupp_vmdef.h"
#include "nupp/lj_layout.h"
#include "trace.skel.h"

_Static_assert(NUPP_TRACE_SEV_BLACKLIST == NUPP_SEV_BLACKLIST, "severity values");
_Static_assert(NUPP_TRACE_SEV_WARN == NUPP_SEV_WARN, "severity values");
_Static_assert(NUPP_TRACE_SEV_INFO == NUPP_SEV_INFO, "severity values");

#define TRACE_COUNTERS (sizeof(struct nupp_trace_counters) / sizeof(__u64))
#define TRACE_BRANCH_NONE (-1)
#define TRACE_BRANCH_MIXED (-2)
#define TRACE_BRANCH_UNKNOWN 0xffu /* names no fast function */

struct nupp_trace {
	struct trace_bpf *skel;
	struct bpf_link **links;
	size_t nlinks;
	char **wide;  /* binaries attached for every process (pid -1) */
	size_t nwide;
	/* The LuaJIT branch of each process attached by PID, and of the binaries attached
	 * for every process (TRACE_BRANCH_NONE: none yet, TRACE_BRANCH_MIXED: they differ):
	 * the branch numbers a row's fast function. */
	struct trace_pid_branch {
		pid_t pid;
		unsigned branch;
	} *branches;
	size_t nbranches;
	int wide_branch;
	struct nupp_zones *zones; /* names zone ids (the session's; NULL: "#<id>") */
	bool benign;              /* counting the aborts of ordinary trace formation too */
	struct nupp_trace_counters acc; /* counters moved out of the kernel by drains */
};

/* -- Text ------------------------------------------------------------------------ */

/* Appends like snprintf at *len, keeping the would-be length (truncation-safe). */
static void trace_cat(char *buf, size_t size, int *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void trace_cat(char *buf, size_t size, int *len, const char *fmt, ...)
{
	va_list ap;
	size_t off = (size_t)*len < size ? (size_t)*len : size;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf + off, size - off, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len += n;
}

/* Bytes of a key name up to its first NUL, as %s in lj_strfmt_pushf prints it. */
static int trace_namelen(const struct nupp_trace_loc *l)
{
	return (int)strnlen(l->name, l->namelen < NUPP_TRACE_NAME_MAX ? l->namelen : NUPP_TRACE_NAME_MAX);
}

/* A pointer as LuaJIT's "%p" prints it: lj_strfmt_wptr (lj_strfmt.c:135-152) writes
 * "0x" and 8 hex digits, plus 2 per byte used above bit 31, zero-padded. */
static int trace_fmt_ptr(char *buf, size_t size, __u64 x)
{
	int n = 8;
	__u32 hi = (__u32)(x >> 32);

	if (x == 0)
		return snprintf(buf, size, "NULL");
	if (hi)
		n += 2 + 2 * ((31 - __builtin_clz(hi)) >> 3); /* lj_fls(hi) >> 3 */
	return snprintf(buf, size, "0x%0*llx", n, (unsigned long long)x);
}

/* Renders a location exactly like lj_debug_pushloc (lj_debug.c:376-399). */
int nupp_trace_format_loc(const struct nupp_trace_loc *l, char *buf, size_t size)
{
	int n = trace_namelen(l), len = 0;

	switch (l->kind) {
	case '@':
	case '=':
		return snprintf(buf, size, "%.*s:%d", n, l->name, l->line);
	case '"':
		return snprintf(buf, size, "\"%.*s\":%d", n, l->name, l->line);
	case 'p':
		len = trace_fmt_ptr(buf, size, l->pt);
		trace_cat(buf, size, &len, ":%d", l->line);
		return len;
	case 'b':
		return snprintf(buf, size, "builtin:%.*s", n, l->name);
	}
	if (size)
		buf[0] = '\0';
	return 0;
}

/* A name from a generated vmdef table, or NULL when out of range. */
static const char *trace_vmname(const char *const *tab, __u64 n, __u64 i)
{
	return i < n ? tab[i] : NULL;
}

/* Renders the info of a row for the %d / %s of its message (jit/v.lua fmtfunc, fmterr). */
static void trace_fmt_info(const struct nupp_trace_key *k, unsigned branch, char *buf, size_t size)
{
	const char *name = NULL;

	switch (k->info_kind) {
	case NUPP_LJ_INFO_NUMBER:
		if (k->err == NUPP_TRERR_NYIBC) /* errinfo = opcode (lj_record.c) */
			name = trace_vmname(nupp_vmdef_bcnames, NUPP_VMDEF_BCNAMES_N, k->info);
		else if (k->err == NUPP_TRERR_NYIIR) /* errinfo = IR op (lj_asm.c) */
			name = trace_vmname(nupp_vmdef_irnames, NUPP_VMDEF_IRNAMES_N, k->info);
		if (name)
			snprintf(buf, size, "%s", name);
		else
			snprintf(buf, size, "%lld", (long long)(__s64)k->info);
		return;
	case NUPP_LJ_INFO_FFID: /* fmtfunc: vmdef.ffnames[fi.ffid] */
		name = nupp_vmdef_ffname(branch, k->info);
		snprintf(buf, size, "%s", name ? name : "(?)");
		return;
	case NUPP_LJ_INFO_CFUNC: /* fmtfunc: format("C:%x", fi.addr) */
		snprintf(buf, size, "C:%llx", (unsigned long long)k->info);
		return;
	case NUPP_LJ_INFO_LUAFUNC: /* fmtfunc: fi.loc at pc 0 */
		nupp_trace_format_loc(&k->aux, buf, size);
		return;
	}
	snprintf(buf, size, "nil");
}

/* Renders a row's reason like jit/v.lua fmterr (jit/v.lua:91-97). */
int nupp_trace_format_reason(const struct nupp_trace_key *k, unsigned branch, char *buf, size_t size)
{
	char info[NUPP_TRACE_NAME_MAX + 32];
	const char *fmt, *pct;
	int len = 0;

	if (k->info_kind == NUPP_LJ_INFO_ERRSTR) /* the error object was a string */
		return snprintf(buf, size, "%.*s", trace_namelen(&k->aux), k->aux.name);
	if (k->err < 0 || k->err >= NUPP_VMDEF_TRACEERR_N)
		return snprintf(buf, size, "trace error %d", k->err);
	fmt = nupp_vmdef_traceerr[k->err];
	pct = strchr(fmt, '%');
	if (!pct || (pct[1] != 'd' && pct[1] != 's'))
		return snprintf(buf, size, "%s", fmt);
	trace_fmt_info(k, branch, info, sizeof(info));
	trace_cat(buf, size, &len, "%.*s%s%s", (int)(pct - fmt), fmt, info, pct + 2);
	if (size && !len)
		buf[0] = '\0';
	return len;
}

/* -- Lifecycle ------------------------------------------------------------------- */

/* Loads the trace BPF programs. */
struct nupp_trace *nupp_trace_open(const struct nupp_trace_opts *opts, int *err)
{
	return nupp_trace_open_shared(opts, -1, err);
}

struct nupp_trace *nupp_trace_open_shared(const struct nupp_trace_opts *opts, int tgids_fd, int *err)
{
	struct nupp_trace *t = calloc(1, sizeof(*t));
	__u32 max_sites = NUPP_TRACE_MAX_SITES;
	int e;

	if (!t) {
		*err = -ENOMEM;
		return NULL;
	}
	if (opts && opts->sz < offsetof(struct nupp_trace_opts, max_sites) + sizeof(opts->max_sites)) {
		e = nupp_fail(-EINVAL, "nupp_trace_open: opts->sz %zu is too small", opts->sz);
		goto fail;
	}
	if (opts && opts->max_sites)
		max_sites = opts->max_sites;
	t->skel = trace_bpf__open();
	if (!t->skel) {
		e = -errno;
		nupp_fail(e, "cannot open the trace BPF object: %s", strerror(-e));
		goto fail;
	}
	t->wide_branch = TRACE_BRANCH_NONE;
	t->benign = opts ? opts->include_benign : false;
	t->skel->rodata->include_benign = t->benign;
	e = bpf_map__set_max_entries(t->skel->maps.aborts, max_sites);
	if (e) {
		nupp_fail(e, "cannot size the abort map to %u entries: %s", max_sites, strerror(-e));
		goto fail;
	}
	if (tgids_fd >= 0) {
		e = bpf_map__reuse_fd(t->skel->maps.tgids, tgids_fd);
		if (e) {
			nupp_fail(e, "cannot share the map of followed processes with the trace channel: %s",
				  strerror(-e));
			goto fail;
		}
	}
	e = trace_bpf__load(t->skel);
	if (e) {
		nupp_fail(e, "cannot load the trace BPF programs: %s (CAP_BPF and CAP_PERFMON are required; run with sudo)",
			  strerror(-e));
		goto fail;
	}
	return t;
fail:
	nupp_trace_close(t);
	*err = e;
	return NULL;
}

/* Attaches one program to one probe of binary (opts: its cookie, or NULL) and keeps the link;
 * an optional probe that binary lacks is -ENOENT with no message. */
static int trace_attach_one(struct nupp_trace *t, struct bpf_program *prog, const char *binary, pid_t pid,
			    const char *probe, const struct bpf_usdt_opts *opts, bool optional)
{
	struct bpf_link **nl, *l;
	int e;

	nl = realloc(t->links, (t->nlinks + 1) * sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	t->links = nl;
	l = bpf_program__attach_usdt(prog, pid, binary, "luajit", probe, opts);
	if (!l) {
		e = -errno;
		if (e == -ENOENT && optional)
			return e;
		if (e == -ENOENT)
			return nupp_fail(e, "cannot attach to luajit:%s: %s has no such probe (use the luajit or libluajit .so built by nupp-bpf, under %s)",
					 probe, binary, NUPP_LUAJIT_PREFIX);
		return nupp_fail(e, "cannot attach to luajit:%s in %s%s: %s", probe, binary,
				 pid > 0 ? " for that PID" : "", strerror(-e));
	}
	t->links[t->nlinks++] = l;
	return 0;
}

/* Whether binary's probes are attached for every process already. */
static bool trace_attached_wide(const struct nupp_trace *t, const char *binary)
{
	size_t i;

	for (i = 0; i < t->nwide; i++)
		if (strcmp(t->wide[i], binary) == 0)
			return true;
	return false;
}

/* Notes the LuaJIT branch of binary (its layout, read from the file) for pid's rows
 * (-1: the rows of every process not attached by PID). */
static int trace_note_branch(struct nupp_trace *t, const char *binary, pid_t pid)
{
	struct nupp_lj_layout lo;
	struct trace_pid_branch *nb;
	unsigned br = TRACE_BRANCH_UNKNOWN;
	size_t i;

	if (nupp_elf_read_sym(binary, NUPP_LJ_LAYOUT_SYMBOL, &lo, sizeof(lo)) == 0 && lo.version >= 12)
		br = lo.branch;
	if (pid == -1) {
		if (t->wide_branch == TRACE_BRANCH_NONE || t->wide_branch == (int)br)
			t->wide_branch = (int)br;
		else
			t->wide_branch = TRACE_BRANCH_MIXED;
		return 0;
	}
	for (i = 0; i < t->nbranches; i++)
		if (t->branches[i].pid == pid) {
			t->branches[i].branch = br;
			return 0;
		}
	nb = realloc(t->branches, (t->nbranches + 1) * sizeof(*nb));
	if (!nb)
		return nupp_fail(-ENOMEM, "out of memory");
	t->branches = nb;
	t->branches[t->nbranches++] = (struct trace_pid_branch){ pid, br };
	return 0;
}

/* The branch of the VM a row of tgid came from. */
static unsigned trace_row_branch(const struct nupp_trace *t, __u32 tgid)
{
	size_t i;

	for (i = 0; i < t->nbranches; i++)
		if ((__u32)t->branches[i].pid == tgid)
			return t->branches[i].branch;
	return t->wide_branch >= 0 ? (unsigned)t->wide_branch : TRACE_BRANCH_UNKNOWN;
}

/* Attaches the luajit:trace_abort (and with include_benign trace_abort_benign),
 * trace_blacklist and vm_open probes of binary for pid. Once
 * attached for every process, attaching again (for any pid) does nothing: the probes
 * already fire there, and a second link would count each abort twice. */
int nupp_trace_attach(struct nupp_trace *t, const char *binary, pid_t pid)
{
	LIBBPF_OPTS(bpf_usdt_opts, vm_open_opts);
	size_t before = t->nlinks;
	char **nw;
	int e;

	if (access(binary, R_OK) != 0) {
		e = -errno;
		return nupp_fail(e, "cannot attach the trace probes: cannot read %s: %s", binary, strerror(-e));
	}
	if (pid <= 0)
		pid = -1;
	if (trace_attached_wide(t, binary))
		return 0;
	nw = pid == -1 ? realloc(t->wide, (t->nwide + 1) * sizeof(*nw)) : NULL;
	if (pid == -1) {
		if (!nw)
			return nupp_fail(-ENOMEM, "out of memory");
		t->wide = nw;
		t->wide[t->nwide] = strdup(binary);
		if (!t->wide[t->nwide])
			return nupp_fail(-ENOMEM, "out of memory");
	}
	/* trace_abort first: a trace_blacklist event is only ever completed by an abort. */
	e = trace_attach_one(t, t->skel->progs.trace_abort, binary, pid, "trace_abort", NULL, false);
	/* Aborts of ordinary trace formation fire a probe of their own, which costs the target
	 * nothing unless attached: only when they are counted. A LuaJIT built by an earlier
	 * patch has no such probe and fires trace_abort for them (the program tells them by
	 * their error code). */
	if (!e && t->benign) {
		e = trace_attach_one(t, t->skel->progs.trace_abort, binary, pid, "trace_abort_benign", NULL, true);
		if (e == -ENOENT)
			e = 0;
	}
	if (!e)
		e = trace_attach_one(t, t->skel->progs.trace_blacklist, binary, pid, "trace_blacklist", NULL, false);
	/* vm_open tells the programs where the zone ids are (objects without zone slots: not needed). */
	vm_open_opts.usdt_cookie = e ? 0 : nupp_vm_vmlist_cookie(binary);
	if (vm_open_opts.usdt_cookie)
		e = trace_attach_one(t, t->skel->progs.trace_vm_open, binary, pid, "vm_open", &vm_open_opts, false);
	while (e && t->nlinks > before) /* all or nothing */
		bpf_link__destroy(t->links[--t->nlinks]);
	if (pid == -1) {
		if (e)
			free(t->wide[t->nwide]);
		else
			t->nwide++;
	}
	if (!e)
		e = trace_note_branch(t, binary, pid);
	return e;
}

/* Counts only the processes the map of tgids names profiled, from now on; returns the
 * map's fd for the process follower to share, or -errno. */
int nupp_trace_follow(struct nupp_trace *t)
{
	__atomic_store_n(&t->skel->bss->filter_tgids, 1, __ATOMIC_SEQ_CST);
	return bpf_map__fd(t->skel->maps.tgids);
}

/* Pauses or resumes counting; probes stay attached. */
int nupp_trace_pause(struct nupp_trace *t, bool paused)
{
	__atomic_store_n(&t->skel->bss->paused, paused ? 1 : 0, __ATOMIC_SEQ_CST);
	return 0;
}

/* Tells BPF where pid's luajit_bpf_vmlist is (its VMs' zone ids); 0 forgets. */
int nupp_trace_set_vmlist(struct nupp_trace *t, pid_t pid, __u64 addr)
{
	__u32 tgid = (__u32)pid;
	int e;

	if (addr)
		e = bpf_map__update_elem(t->skel->maps.vmlists, &tgid, sizeof(tgid), &addr, sizeof(addr), BPF_ANY);
	else
		e = bpf_map__delete_elem(t->skel->maps.vmlists, &tgid, sizeof(tgid), 0);
	if (e && !(addr == 0 && e == -ENOENT))
		return nupp_fail(e, "cannot set the zone address of PID %d: %s", pid, strerror(-e));
	return 0;
}

/* Names the rows' zone ids with z from now on (NULL: "#<id>"). */
void nupp_trace_set_zones(struct nupp_trace *t, struct nupp_zones *z)
{
	t->zones = z;
}

/* Moves the kernel counters into t->acc (atomic exchange with the programs' adds). */
static void trace_take_counters(struct nupp_trace *t, struct nupp_trace_counters *delta)
{
	__u64 *src = (__u64 *)&t->skel->bss->counters, *acc = (__u64 *)&t->acc, *d = (__u64 *)delta;
	size_t i;

	for (i = 0; i < TRACE_COUNTERS; i++) {
		d[i] = __atomic_exchange_n(&src[i], 0, __ATOMIC_SEQ_CST);
		acc[i] += d[i];
	}
}

/* Renders one kernel row and adds it to out. */
static int trace_add_row(struct nupp_trace *t, const struct nupp_trace_key *k, __u64 count,
			 struct nupp_abort_set *out)
{
	char reason[512], loc[256], zbuf[32];
	const char *zone = "";

	nupp_trace_format_reason(k, trace_row_branch(t, k->tgid), reason, sizeof(reason));
	nupp_trace_format_loc(&k->loc, loc, sizeof(loc));
	if (k->zone) {
		zone = nupp_zones_path(t->zones, (pid_t)k->tgid, k->zone);
		if (!zone) {
			snprintf(zbuf, sizeof(zbuf), "#%u", k->zone);
			zone = zbuf;
		}
	}
	return nupp_abort_set_add(out, (enum nupp_severity)k->severity, reason, loc, zone, count);
}

#define TRACE_DRAIN_CHUNK 256

/* Takes every abort count with lookup-and-delete batches (TRACE_DRAIN_CHUNK a call
 * instead of two calls an element). -ENOTSUP when the kernel refuses before anything
 * was taken (the caller drains element by element); a refusal later (a bucket larger
 * than a chunk) leaves the rest to the element-wise drain too: 0 or -errno. */
static int trace_drain_batch(struct nupp_trace *t, int fd, struct nupp_abort_set *out)
{
	/* Not zeroed: the kernel fills what it returns (80 KB of keys a drain). */
	struct nupp_trace_key *keys = malloc(TRACE_DRAIN_CHUNK * sizeof(*keys));
	__u64 *vals = malloc(TRACE_DRAIN_CHUNK * sizeof(*vals)), in = 0, next = 0;
	bool first = true;
	int e = 0, r;
	__u32 n, i;
	LIBBPF_OPTS(bpf_map_batch_opts, opts);

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	for (;;) {
		n = TRACE_DRAIN_CHUNK;
		r = bpf_map_lookup_and_delete_batch(fd, first ? NULL : &in, &next, keys, vals, &n, &opts);
		if (r && errno != ENOENT) {
			if (first && !n)
				e = -ENOTSUP;
			n = 0; /* nothing was copied out: what is left stays for the next pass */
		}
		for (i = 0; i < n && !e; i++)
			e = trace_add_row(t, &keys[i], vals[i], out);
		if (r || e)
			break;
		in = next;
		first = false;
	}
	if (r && errno != ENOENT && !e)
		e = -ENOTSUP; /* a later refusal: the element-wise drain takes the rest */
	free(keys);
	free(vals);
	return e;
}

/* Reads and deletes every row of the abort map and adds the rendered rows to out: in
 * lookup-and-delete batches (one pass over the buckets), else element by element with
 * keys collected a chunk at a time before deleting (deleting while walking restarts
 * bpf_map_get_next_key), at most max_entries rows per call. Either way a program that
 * keeps aborting cannot hold the drain forever. */
int nupp_trace_drain(struct nupp_trace *t, struct nupp_abort_set *out)
{
	int fd = bpf_map__fd(t->skel->maps.aborts);
	__u32 cap = bpf_map__max_entries(t->skel->maps.aborts), done = 0, n, i;
	struct nupp_trace_key *keys, *prev;
	struct nupp_trace_counters delta;
	int e = 0;

	e = trace_drain_batch(t, fd, out);
	if (e != -ENOTSUP)
		goto counters;
	e = 0;
	keys = calloc(TRACE_DRAIN_CHUNK, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	while (!e && done < cap) {
		for (n = 0, prev = NULL; n < TRACE_DRAIN_CHUNK && bpf_map_get_next_key(fd, prev, &keys[n]) == 0; n++)
			prev = &keys[n];
		if (!n)
			break;
		for (i = 0; i < n && !e; i++) {
			__u64 count;

			if (bpf_map_lookup_and_delete_elem(fd, &keys[i], &count))
				continue; /* gone: another drainer took it */
			e = trace_add_row(t, &keys[i], count, out);
		}
		done += n;
	}
	free(keys);
counters:
	trace_take_counters(t, &delta);
	out->total_aborts += delta.total_aborts;
	out->blacklisted += delta.blacklisted;
	return e;
}

/* Every counter since open. */
int nupp_trace_counters(struct nupp_trace *t, struct nupp_trace_counters *out)
{
	const __u64 *live = (const __u64 *)&t->skel->bss->counters, *acc = (const __u64 *)&t->acc;
	__u64 *o = (__u64 *)out;
	size_t i;

	for (i = 0; i < TRACE_COUNTERS; i++)
		o[i] = acc[i] + __atomic_load_n(&live[i], __ATOMIC_SEQ_CST);
	return 0;
}

/* Run time and runs of a program (bpf_stats; 0 when kernel.bpf_stats_enabled is 0). */
static int trace_prog_stats(struct bpf_program *p, __u64 *ns, __u64 *cnt)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	int e;

	memset(&info, 0, sizeof(info));
	e = bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len);
	if (e)
		return nupp_fail(-errno, "cannot read the trace program's stats: %s", strerror(errno));
	*ns += info.run_time_ns;
	*cnt += info.run_cnt;
	return 0;
}

/* Kernel cost so far of the abort program (trace_abort; trace_blacklist's runs are
 * added to the run time but not to the count, so ns/cnt is the cost per abort). */
int nupp_trace_stats(struct nupp_trace *t, __u64 *run_time_ns, __u64 *run_cnt)
{
	__u64 bl_cnt = 0;
	int e;

	*run_time_ns = *run_cnt = 0;
	e = trace_prog_stats(t->skel->progs.trace_abort, run_time_ns, run_cnt);
	if (!e)
		e = trace_prog_stats(t->skel->progs.trace_blacklist, run_time_ns, &bl_cnt);
	return e;
}

/* Detaches and frees. */
void nupp_trace_close(struct nupp_trace *t)
{
	size_t i;

	if (!t)
		return;
	for (i = 0; i < t->nlinks; i++)
		bpf_link__destroy(t->links[i]);
	free(t->links);
	for (i = 0; i < t->nwide; i++)
		free(t->wide[i]);
	free(t->wide);
	free(t->branches);
	trace_bpf__destroy(t->skel);
	free(t);
}
