/* Naming a drain's rows: each counted stack's frames named by its process's symbolizer
 * (traces expanded; a helper's sample kept only when its call site stored the
 * interpreter's state), named again while events read after it may change a name, a name
 * an earlier drain made reused; host samples named from the process's mappings; the rows
 * added to the sample set. Reads none of the kernel's maps of counts (sampler_drain.c), and
 * target memory only through the symbolizer, the trace cache and the address map. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "nupp/sampler.h"
#include "nupp_internal.h"
#include "sampler_internal.h"
#include "sampler_priv.h"
#include "sampler.skel.h"

/* lost_reason of a row whose generation is ahead of the prototype frees read so far, or
 * whose name needs a string read while the GC sweeps; such rows wait up to SMP_WAIT_US
 * in a drain, then are lost. */
#define SMP_ROW_WAIT (-2)
#define SMP_WAIT_US 50000

/* Lets go of r's name (freed when it is the row's own). */
void smp_row_unname(struct smp_row *r)
{
	if (!r->borrowed)
		free(r->stack);
	r->stack = NULL;
	r->borrowed = false;
}

/* Samples of a count. */
__u64 smp_total(const struct nupp_smp_count *c)
{
	__u64 total = 0;
	int i;

	for (i = 0; i < NUPP_SMP_NSTATES; i++)
		total += c->n[i];
	return total;
}

/* C helpers the interpreter calls without storing BASE in L->base and PC in SAVE_PC
 * first (every `call extern` of vm_x64.dasc was read: lj_tab_len 3209, lj_tab_get 1293,
 * lj_tab_next 1360, lj_tab_getinth 800/1434, lj_gc_barrieruv 3473/3501; L->base but not
 * SAVE_PC: lj_func_closeuv 3535, lj_dispatch_ins/stitch/profile 2242/2352/2368,
 * lj_ccallback_leave 2730; neither, or not from a Lua frame: the rest). Calls through the
 * PLT (libm: log, pow, frexp, modf, sin ... 1746-1821, 3339) have no symbol here and are
 * refused with them. */
static const char *const smp_nosync[] = {
	"lj_tab_len",	     "lj_tab_get",	   "lj_tab_next",	   "lj_tab_getinth",
	"lj_gc_barrieruv",   "lj_func_closeuv",	   "lj_dispatch_ins",	   "lj_dispatch_stitch",
	"lj_dispatch_profile", "lj_ccallback_enter", "lj_ccallback_leave", "lj_state_growstack",
	"lj_trace_exit",     "lj_err_trace",	   "lj_ffh_coroutine_wrap_err",
};

/* Helpers of smp_nosync called right after `mov L:RB->base, BASE` (vm_x64.dasc 3531,
 * 2238, 2348, 2365) that leave L->base alone: the frame at L->base is the leaf, its PC
 * unknown (lj_dispatch_ins/profile and lj_dispatch_stitch store SAVE_PC themselves,
 * lj_dispatch.c:406/544/525). lj_ccallback_leave is not one: it pops the callback's
 * frames (lj_ccallback.c). */
static const char *const smp_sync_base[] = { "lj_func_closeuv", "lj_dispatch_ins", "lj_dispatch_stitch",
					     "lj_dispatch_profile" };

/* Helpers of smp_nosync that store both before every protected call they make: the JIT
 * compiler's, lj_trace_ins (lj_trace.c:821), comes after setcframe_pc and L->base from
 * vm_inshook (lj_dispatch.c:406-417) or cont_stitch (lj_dispatch.c:525-529). */
static const char *const smp_sync_cpcall[] = { "lj_dispatch_ins", "lj_dispatch_stitch" };

/* What the interpreter stored before calling the C helper named callee (with cpcall:
 * before a protected call it made). */
int nupp_smp_sync_of(const char *callee, bool cpcall)
{
	int sync = NUPP_SMP_SYNC_BOTH;
	size_t k;

	for (k = 0; k < NUPP_ARRAY_SIZE(smp_nosync); k++)
		if (strcmp(callee, smp_nosync[k]) == 0)
			sync = NUPP_SMP_SYNC_NONE;
	for (k = 0; sync == NUPP_SMP_SYNC_NONE && k < NUPP_ARRAY_SIZE(smp_sync_base); k++)
		if (strcmp(callee, smp_sync_base[k]) == 0)
			sync = NUPP_SMP_SYNC_BASE;
	for (k = 0; cpcall && k < NUPP_ARRAY_SIZE(smp_sync_cpcall); k++)
		if (strcmp(callee, smp_sync_cpcall[k]) == 0)
			sync = NUPP_SMP_SYNC_BOTH;
	return sync;
}

/* Is a helper's sample a stack, given what its call site stored? */
bool nupp_smp_helper_keep(struct nupp_smp_stack *st, int sync)
{
	if (sync == NUPP_SMP_SYNC_NONE)
		return false;
	if (sync == NUPP_SMP_SYNC_BOTH)
		return !(st->flags & NUPP_SMP_F_NOPC); /* SAVE_PC stored but not in the leaf */
	if (st->depth && st->frames[0].kind == NUPP_SMP_LUA)
		st->frames[0].pos = -1;
	return true;
}

/* What the interpreter stored before the call that returns to ra (with cpcall: before
 * the protected call the sample is under), NUPP_SMP_SYNC_*. A direct call is decoded
 * (E8 rel32) and its callee named; an indirect one is a fast function's fallback handler
 * (fff_fallback syncs both, vm_x64.dasc:2129-2143). */
static int smp_site_sync(struct smp_target *t, __u64 ra, bool cpcall)
{
	unsigned char ins[5];
	char name[128];
	__u64 callee;
	__s32 rel;
	int i, ok = NUPP_SMP_SYNC_NONE;

	for (i = 0; i < t->nsites; i++)
		if (t->sites[i].ra == ra && t->sites[i].cpcall == cpcall)
			return t->sites[i].ok;
	if (!t->amap || nupp_addrmap_read(t->amap, ra - 5, ins, 5))
		goto out; /* the code cannot be read: not proven */
	if (ins[0] != 0xe8) {
		ok = NUPP_SMP_SYNC_BOTH;
		goto out;
	}
	memcpy(&rel, ins + 1, 4);
	callee = ra + (__s64)rel;
	/* A routine of the interpreter itself, or a PLT stub (no symbol): not proven. */
	if ((callee >= t->lo.vm_begin && callee < t->lo.vm_end) ||
	    nupp_addrmap_sym(t->amap, callee, NULL, name, sizeof(name)))
		goto out;
	ok = nupp_smp_sync_of(name, cpcall);
out:
	i = t->nsites < (int)NUPP_ARRAY_SIZE(t->sites) ? t->nsites++ : (int)(ra % NUPP_ARRAY_SIZE(t->sites));
	t->sites[i].ra = ra;
	t->sites[i].cpcall = cpcall;
	t->sites[i].ok = ok;
	return ok;
}

/* Names one counted stack (again). */
static void smp_name_row(struct nupp_sampler *s, struct smp_row *r)
{
	struct nupp_smp_frame fr[NUPP_SMP_MAX_DEPTH + 64];
	struct smp_target *t = smp_target(s, (pid_t)r->key.tgid);
	struct nupp_smp_stack *hst = NULL;
	char *str;
	int n, e, keep;

	smp_row_unname(r);
	r->named_before = false;
	r->lost_reason = NUPP_LOST_SYMBOLIZE;
	r->sym_why = "its process could not be read to name it";
	r->cut = (r->st->flags & NUPP_SMP_F_CUT) != 0;
	if (!t || smp_target_ready(s, t))
		return;
	/* A helper's sample: L->base and SAVE_PC are its Lua stack only if its call synced
	 * (its leaf's line may be unknown: marked in a copy, the held record stays as read). */
	if (r->st->flags & NUPP_SMP_F_HELPER) {
		int sync = smp_site_sync(t, r->st->callsite, (r->st->flags & NUPP_SMP_F_CPCALL) != 0);

		if (!(hst = malloc(r->size)))
			return;
		memcpy(hst, r->st, r->size);
		if (!nupp_smp_helper_keep(hst, sync)) {
			r->lost_reason = NUPP_LOST_BAD_FRAME;
			free(hst);
			return;
		}
	}
	n = nupp_traces_expand(t->traces, hst ? hst : r->st, fr, (int)NUPP_ARRAY_SIZE(fr));
	free(hst);
	if (n == -E2BIG) {
		r->lost_reason = NUPP_LOST_TRUNCATED;
		return;
	}
	/* Deeper than the depth (the extra frame walked, inlined frames): the leaf-most are
	 * kept, the outermost of them named by its caller, which is dropped. */
	keep = n;
	if (n > s->opts.depth) {
		keep = s->opts.depth;
		n = keep + 1;
		r->cut = true;
	}
	e = n < 0 ? n : nupp_sym_stack(t->sym, fr, n, r->st->pgen, &r->stack);
	if (!e && n > keep) {
		char *semi = strchr(r->stack, ';');

		memmove(r->stack, semi ? semi + 1 : r->stack + strlen(r->stack),
			strlen(semi ? semi + 1 : r->stack + strlen(r->stack)) + 1);
	}
	if (e == -EAGAIN) {
		r->stack = NULL;
		r->lost_reason = SMP_ROW_WAIT;
		return;
	}
	if (e) {
		r->sym_why = n >= 0 ? "a frame's function not named with proof (freed before a drain named it)"
			: nupp_traces_why(t->traces) ? nupp_traces_why(t->traces) : "trace not decoded";
		nupp_pr(NUPP_DEBUG, "PID %u: %llu samples not named (%s): %s trace %u depth %u flags %#x gen %llu\n",
			r->key.tgid, (unsigned long long)smp_total(&r->c), strerror(-e),
			n < 0 ? "trace expansion" : "symbolization", r->st->traceno, r->st->depth, r->st->flags,
			(unsigned long long)r->st->pgen);
		r->stack = NULL;
		return;
	}
	if (r->cut) {
		str = malloc(strlen(r->stack) + sizeof("[truncated];"));
		if (!str) {
			r->sym_why = "out of memory";
			free(r->stack);
			r->stack = NULL;
			return;
		}
		sprintf(str, "[truncated];%s", r->stack);
		free(r->stack);
		r->stack = str;
	}
	r->lost_reason = -1;
}

/* Adds a named row to out, or counts its samples lost. */
int smp_add_row(struct nupp_sampler *s, struct smp_row *r, struct nupp_sample_set *out)
{
	struct nupp_sample_row row = { 0 };
	char zone[32];

	if (!r->stack) {
		int why = r->lost_reason >= 0 ? r->lost_reason : NUPP_LOST_SYMBOLIZE;

		out->lost[why] += smp_total(&r->c);
		if (why == NUPP_LOST_SYMBOLIZE)
			smp_sym_lost(s, r->sym_why ? r->sym_why : "not named", smp_total(&r->c));
		return 0;
	}
	/* No zone module yet: id 0 is the path "", others keep their number. */
	if (r->key.zone)
		snprintf(zone, sizeof(zone), "#%u", r->key.zone);
	else
		zone[0] = 0;
	row.pid = (pid_t)r->key.tgid;
	row.tid = (pid_t)r->key.tid;
	row.count = smp_total(&r->c);
	row.compiled = r->c.n[NUPP_SMP_COMPILED];
	row.interpreted = r->c.n[NUPP_SMP_INTERPRETED];
	row.ccode = r->c.n[NUPP_SMP_CCODE];
	row.collecting = r->c.n[NUPP_SMP_COLLECTING];
	row.compiling = r->c.n[NUPP_SMP_COMPILING];
	if (r->cut)
		out->cut_samples += row.count;
	return nupp_sample_set_add(out, zone, r->stack, &row); /* also counts out->samples */
}

/* Gives each symbolizer its process's open VMs (their GC phase decides string reads). */
static void smp_refresh_vms(struct nupp_sampler *s)
{
	int i;

	for (i = 0; i < s->ntargets; i++) {
		struct smp_target *t = &s->targets[i];
		struct nupp_smp_proc p;
		__u32 key = (__u32)t->pid;

		if (t->sym && !bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.procs), &key, &p))
			nupp_sym_set_vms(t->sym, p.g, (int)(p.nvm < NUPP_SMP_MAX_VMS ? p.nvm : NUPP_SMP_MAX_VMS));
	}
}

/* Names row r as an earlier drain named its record for the same process and frame
 * table (nothing to read or record again): 1, or 0 when it must be named. */
static int smp_name_held(struct smp_row *r, unsigned long long table)
{
	const struct smp_stk *c = r->held;

	if (!c || !c->name || c->name_tgid != r->key.tgid || c->name_table != table)
		return 0;
	smp_row_unname(r);
	r->stack = c->name; /* read until the rows are added: no later name replaces it sooner */
	r->borrowed = true;
	r->cut = c->name_cut;
	r->lost_reason = 0;
	r->named_before = true;
	return 1;
}

/* Keeps the names this drain gave with their records, for later drains: each row's own
 * name moves to its record (the row borrows it back). After the rows are added: a name
 * a record gives up may be one that rows borrowed. */
void smp_hold_names(struct smp_row *rows, size_t n, unsigned long long table)
{
	struct smp_row *r;
	size_t j;

	for (j = 0; j < n; j++) {
		r = &rows[j];
		if (!r->stack || !r->held || r->named_before || r->borrowed)
			continue;
		smp_stk_give_name(r->held, r->stack, r->key.tgid, r->cut, table);
		r->borrowed = true;
	}
}

/* Names the rows of one drain. A name read from the target is proven by the events read
 * after it (a prototype freed after the events were read was freed after it was read);
 * while an event read after naming may change a name, the target's rows are named again.
 * A row whose record was named in an earlier drain for ft takes that name. */
void smp_name_rows(struct nupp_sampler *s, struct smp_row *rows, size_t n,
			  const struct nupp_frame_table *ft)
{
	int i, round;
	bool behind;
	size_t j;
	__u64 deadline = smp_now_us() + SMP_WAIT_US;

	for (i = 0; i < s->ntargets; i++)
		if (s->targets[i].sym)
			nupp_sym_begin(s->targets[i].sym);
	for (j = 0; j < n; j++) {
		if (smp_name_held(&rows[j], ft->id))
			continue;
		smp_name_row(s, &rows[j]);
		/* Keep reading events while naming: the ring buffer must not fill. */
		if (j % 64 == 63)
			smp_consume(s, SMP_POLL_EVENTS);
	}
	for (round = 0; round < 64; round++) {
		bool again = false, waiting = false;

		/* Names read in the last round are proven only by every event sent before
		 * them: while events are left unread, read on (and start no new round). */
		behind = smp_consume(s, SMP_DRAIN_EVENTS);
		if (behind) {
			if (smp_now_us() >= deadline)
				break;
			continue;
		}
		smp_refresh_vms(s);
		for (i = 0; i < s->ntargets; i++) {
			struct smp_target *t = &s->targets[i];
			bool all = t->sym && nupp_sym_suspect(t->sym);

			if (!t->sym)
				continue;
			if (all)
				nupp_sym_begin(t->sym);
			for (j = 0; j < n; j++) {
				if (rows[j].key.tgid != (__u32)t->pid || (!all && rows[j].lost_reason != SMP_ROW_WAIT))
					continue;
				again = true;
				smp_name_row(s, &rows[j]);
				waiting |= rows[j].lost_reason == SMP_ROW_WAIT;
			}
		}
		if (!again)
			return;
		/* A sample's generation is ahead of the frees read (one is being sent), or a
		 * name needs a string of a dead prototype while its VM sweeps: wait a little.
		 * Renaming for other reasons stops after 8 rounds. */
		if (waiting && smp_now_us() < deadline)
			usleep(1000);
		else if (round >= 7)
			break;
	}
	/* Still changing: names given in the last round are not proven. */
	behind = smp_consume(s, SMP_DRAIN_EVENTS);
	for (i = 0; i < s->ntargets; i++) {
		struct smp_target *t = &s->targets[i];
		bool all = t->sym && (behind || nupp_sym_suspect(t->sym));

		for (j = 0; j < n; j++)
			if (rows[j].key.tgid == (__u32)t->pid && (all || rows[j].lost_reason == SMP_ROW_WAIT)) {
				smp_row_unname(&rows[j]);
				rows[j].lost_reason = NUPP_LOST_SYMBOLIZE;
				rows[j].sym_why = "names not proven (prototypes still changing at the drain)";
			}
	}
}

/* Names the host samples of a drain ("[host];<symbol>") and adds them to out. */
int smp_host_rows(struct nupp_sampler *s, const struct nupp_smp_host_key *keys, const __u64 *vals,
			 long n, struct nupp_sample_set *out)
{
	struct nupp_sample_row row = { 0 };
	char name[320], stack[340];
	long i;
	int e;

	for (i = 0; i < n; i++) {
		struct smp_target *t = smp_target(s, (pid_t)keys[i].tgid);

		out->host_samples += vals[i];
		e = t && t->amap ? nupp_addrmap_name(t->amap, keys[i].ip, name, sizeof(name)) : -ENOENT;
		if (e < 0 && t && t->amap && !t->amap_read) {
			/* Mapped since the mappings were read (the target may be gone: kept). */
			nupp_addrmap_refresh(t->amap);
			t->amap_read = true;
			e = nupp_addrmap_name(t->amap, keys[i].ip, name, sizeof(name));
		}
		if (e < 0)
			snprintf(name, sizeof(name), "[unknown]");
		snprintf(stack, sizeof(stack), "[host];%s", name);
		row.pid = (pid_t)keys[i].tgid;
		row.tid = (pid_t)keys[i].tid;
		row.count = row.ccode = vals[i];
		e = nupp_sample_set_add(out, "", stack, &row);
		if (e)
			return e;
	}
	return 0;
}

