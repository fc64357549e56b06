/* The sampler's drain: flips BPF to the other buffer, takes the old one's counts and host
 * samples out of the kernel's maps (in batches where the kernel can), sums and zeroes its
 * lost counters, makes a row of each count with the stack held for it, has the rows named
 * and added to the sample set (sampler_name.c), and lets idle stacks go. Reads no target
 * memory itself. */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "nupp/sampler.h"
#include "nupp_internal.h"
#include "sampler_internal.h"
#include "sampler_priv.h"
#include "sampler.skel.h"

_Static_assert(NUPP_SMP_LOST_RING_FULL >= NUPP_LOST__MAX - 1 && NUPP_SMP_LOST_RING_FULL < NUPP_SMP_LOST_N,
	       "the ring-full counter is the BPF side's own, after the reasons it shares");

/* Least time between two reads of the lost_where diagnosis map. */
#define SMP_WHERE_US 10000000

/* Makes BPF count into the other buffer and waits until no sample of the old one is in
 * flight; returns the old buffer (0 or 1), which nothing writes until the next flip. */
static int smp_flip(struct nupp_sampler *s)
{
	__u64 e = __atomic_load_n(&s->skel->bss->epoch, __ATOMIC_SEQ_CST), v, t0;
	int ncpu = libbpf_num_possible_cpus(), c;

	__atomic_store_n(&s->skel->bss->epoch, e + 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (c = 0; c < ncpu && c < NUPP_SMP_MAX_CPUS; c++) {
		v = __atomic_load_n(&s->skel->bss->inflight[c].n, __ATOMIC_SEQ_CST);
		if (!(v & 1))
			continue;
		/* A sample runs there (a few microseconds): wait for its end. */
		t0 = smp_now_us();
		while (__atomic_load_n(&s->skel->bss->inflight[c].n, __ATOMIC_SEQ_CST) == v &&
		       smp_now_us() - t0 < 100000)
			sched_yield();
	}
	return (int)(e & 1);
}

/* Is a key of buffer buf? */
typedef bool (*smp_key_of)(const void *key, int buf);

/* Grows the key and value arrays of a take to cap elements; 0 or -ENOMEM (both arrays
 * stay valid for the caller to free). */
static int smp_grow(char **k, char **v, size_t cap, size_t ksz, size_t vsz)
{
	char *nk = realloc(*k, cap * ksz), *nv;

	if (nk)
		*k = nk;
	nv = realloc(*v, cap * vsz);
	if (nv)
		*v = nv;
	return nk && nv ? 0 : -ENOMEM;
}

/* Deletes n keys of ksz bytes in batches; a key the kernel refuses (gone already) is
 * deleted alone, then the rest in a batch again. */
void smp_delete_keys(int fd, const char *keys, size_t n, size_t ksz)
{
	size_t i;
	LIBBPF_OPTS(bpf_map_batch_opts, opts);

	for (i = 0; i < n;) {
		__u32 cnt = (__u32)(n - i);

		if (bpf_map_delete_batch(fd, keys + i * ksz, &cnt, &opts) == 0)
			break;
		i += cnt;
		if (!cnt)
			bpf_map_delete_elem(fd, keys + i++ * ksz);
	}
}

/* Reads and deletes the elements of buffer buf of a hash map (BPF writes only the other
 * buffer's, adding them at the head of their buckets, so the walk misses none of buf's):
 * *keys and *vals get malloc'ed arrays; the count, or -errno. */
static long smp_take(int fd, size_t ksz, size_t vsz, smp_key_of of, int buf, void **keys, void **vals)
{
	size_t cap = 1024, n = 0, i;
	char *k = malloc(cap * ksz), *v = malloc(cap * vsz);
	char prev[64], cur[64];
	int have = 0;

	if (!k || !v)
		goto nomem;
	while (bpf_map_get_next_key(fd, have ? prev : NULL, cur) == 0) {
		memcpy(prev, cur, ksz);
		have = 1;
		if (!of(cur, buf) || bpf_map_lookup_elem(fd, cur, v + n * vsz))
			continue;
		memcpy(k + n * ksz, cur, ksz);
		if (++n == cap && smp_grow(&k, &v, cap *= 2, ksz, vsz))
			goto nomem;
	}
	for (i = 0; i < n; i++)
		bpf_map_delete_elem(fd, k + i * ksz);
	*keys = k;
	*vals = v;
	return (long)n;
nomem:
	free(k);
	free(v);
	return -ENOMEM;
}

/* Keys read per lookup batch (a bucket never holds more: the maps hold 16384). */
#define SMP_BATCH 4096

/* smp_take with batched syscalls: the map is read SMP_BATCH elements per call and buf's
 * elements deleted in batches, instead of three calls per element (of NULL: every
 * element is buf's, each batch is deleted as it is read). -ENOTSUP when the kernel
 * cannot (the caller falls back to smp_take). */
static long smp_take_batch(int fd, size_t ksz, size_t vsz, smp_key_of of, int buf, void **keys, void **vals)
{
	size_t cap = SMP_BATCH, n = 0, i, m;
	char *k = malloc(cap * ksz), *v = malloc(cap * vsz);
	__u64 in[8], out[8];
	bool first = true, end = false;
	LIBBPF_OPTS(bpf_map_batch_opts, opts);

	if (!k || !v)
		goto nomem;
	while (!end) {
		__u32 cnt = SMP_BATCH;
		int r;

		if (cap - n < SMP_BATCH && smp_grow(&k, &v, cap = 2 * cap + SMP_BATCH, ksz, vsz))
			goto nomem;
		if (of)
			r = bpf_map_lookup_batch(fd, first ? NULL : in, out, k + n * ksz, v + n * vsz, &cnt, &opts);
		else
			r = bpf_map_lookup_and_delete_batch(fd, first ? NULL : in, out, k + n * ksz, v + n * vsz, &cnt,
							    &opts);
		if (r && errno != ENOENT && first) {
			free(k);
			free(v);
			return -ENOTSUP;
		}
		end = r != 0;
		n += cnt;
		memcpy(in, out, sizeof(in));
		first = false;
	}
	if (!of) {
		*keys = k;
		*vals = v;
		return (long)n;
	}
	/* Keep buf's elements, in order. */
	for (i = m = 0; i < n; i++)
		if (of(k + i * ksz, buf)) {
			if (m != i) {
				memcpy(k + m * ksz, k + i * ksz, ksz);
				memcpy(v + m * vsz, v + i * vsz, vsz);
			}
			m++;
		}
	smp_delete_keys(fd, k, m, ksz);
	*keys = k;
	*vals = v;
	return (long)m;
nomem:
	free(k);
	free(v);
	return -ENOMEM;
}

/* Buffers of count, host and stack keys. */
static bool smp_count_of(const void *key, int buf)
{
	return !!(((const struct nupp_smp_count_key *)key)->tgid & NUPP_SMP_TGID_BUF) == !!buf;
}

static bool smp_host_of(const void *key, int buf)
{
	return ((const struct nupp_smp_host_key *)key)->buf == (__u32)buf;
}

/* Reads the BPF counts, names every frame and adds them to out. */
int nupp_sampler_drain(struct nupp_sampler *s, struct nupp_sample_set *out)
{
	int ncpu = libbpf_num_possible_cpus(), lfd = bpf_map__fd(s->skel->maps.lost), old, cfd, hfd;
	struct nupp_smp_count_key *keys = NULL;
	struct nupp_smp_count *cvals = NULL;
	struct nupp_smp_host_key *hkeys = NULL;
	__u64 *hvals = NULL;
	struct smp_row *rows = NULL;
	size_t nrows = 0, i;
	long nkeys = 0, nhosts = 0;
	__u64 *vals = NULL, t0 = smp_now_us(), full = 0, walk = 0;
	bool swept = false, reread = false;
	__u32 r;
	int e = 0;

	if (ncpu <= 0)
		return -ENOMEM;
	s->ev_handled = 0;
	smp_consume(s, SMP_DRAIN_EVENTS);
	/* Every sample counted from now on has a prototype generation >= pgen. */
	for (i = 0; i < (size_t)s->ntargets; i++) {
		struct smp_target *t = &s->targets[i];
		struct nupp_smp_proc p;
		__u32 pk = (__u32)t->pid;

		t->amap_read = false;
		if (smp_target_ready(s, t) || bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.procs), &pk, &p))
			continue;
		t->pgen = p.pgen;
		nupp_sym_set_vms(t->sym, p.g, (int)(p.nvm < NUPP_SMP_MAX_VMS ? p.nvm : NUPP_SMP_MAX_VMS));
		if (p.nlost != t->nlost || t->reset) {
			/* Every lost generation is <= pgen (taken before its event was sent) and
			 * above the frees read: only samples of that window are given up. */
			__u64 lo = nupp_sym_lost(t->sym, p.pgen);

			nupp_pr(NUPP_WARN, "PID %d: %llu prototype events lost (ring buffer full): samples of "
				"generations %llu-%llu are counted as lost (symbolize)\n",
				(int)t->pid, (unsigned long long)(p.nlost - t->nlost), (unsigned long long)lo,
				(unsigned long long)p.pgen);
			t->nlost = p.nlost;
			t->reset = 0;
		}
		nupp_sym_gen_seen(t->sym, p.pgen);
	}
	/* BPF counts into the other buffer from now on: this one is read and emptied whole,
	 * with nothing writing it (no count is lost to the reading). */
	old = smp_flip(s);
	s->drains++;
	/* Every stack this buffer counted was sent before its count (no sample of the buffer
	 * is in flight now): held from here on. */
	ring_buffer__consume(s->stk_rb);
	cfd = bpf_map__fd(old ? s->skel->maps.counts1 : s->skel->maps.counts0);
	hfd = bpf_map__fd(s->skel->maps.hosts);
	nkeys = smp_take_batch(cfd, sizeof(*keys), sizeof(*cvals), NULL, old, (void **)&keys, (void **)&cvals);
	if (nkeys == -ENOTSUP)
		nkeys = smp_take(cfd, sizeof(*keys), sizeof(*cvals), smp_count_of, old, (void **)&keys,
				 (void **)&cvals);
	/* The hosts map only when the buffer created a host key (a walk of its every bucket
	 * costs as much as the counts map's). Nothing writes the buffer now. */
	if (__atomic_exchange_n(&s->skel->bss->hnew[old], 0, __ATOMIC_SEQ_CST))
		nhosts = smp_take_batch(hfd, sizeof(*hkeys), sizeof(*hvals), smp_host_of, old, (void **)&hkeys,
					(void **)&hvals);
	if (nhosts == -ENOTSUP)
		nhosts = smp_take(hfd, sizeof(*hkeys), sizeof(*hvals), smp_host_of, old, (void **)&hkeys,
				  (void **)&hvals);
	if (nkeys < 0 || nhosts < 0) {
		e = -ENOMEM;
		goto out;
	}
	rows = calloc(nkeys ? nkeys : 1, sizeof(*rows));
	if (!rows) {
		e = -ENOMEM;
		goto out;
	}
	for (i = 0; i < (size_t)nkeys; i++) {
		struct smp_row *row = &rows[nrows];
		struct smp_stk *c = smp_stk_get(s, keys[i].stack);

		row->c = cvals[i];
		/* BPF sends a stack for the buffer before its first count there (or sent it
		 * for an earlier count): held here. When its record was lost (the ring was
		 * full, or out of memory), the same stack held for the other buffer (the
		 * same hash of the same frames) serves: each buffer has its own sent, so
		 * that either can be emptied alone. */
		if (!c) {
			struct smp_stk *o = smp_stk_get(s, keys[i].stack ^ NUPP_SMP_STACK_BUF);

			if (o) {
				c = smp_stk_add(s, keys[i].stack, o->rec, o->size);
				if (!c) {
					e = -ENOMEM;
					goto out;
				}
				if (o->name) /* one stack, one name */
					smp_stk_name(c, o->name, o->name_tgid, o->name_cut, o->name_table);
			}
		}
		/* A record not read yet: the ring's reader stops at a record reserved and not
		 * yet committed, which a sample of the other buffer may hold for a moment
		 * before this buffer's last ones. Read on once. */
		if (!c && !reread) {
			reread = true;
			ring_buffer__consume(s->stk_rb);
			c = smp_stk_get(s, keys[i].stack);
		}
		if (!c) {
			out->lost[NUPP_LOST_SYMBOLIZE] += smp_total(&row->c);
			smp_sym_lost(s, "its stack's record not held", smp_total(&row->c));
			continue;
		}
		smp_stk_used(s, c);
		row->st = c->rec; /* held until a later drain: this one counted it */
		row->size = c->size;
		row->held = c;
		row->key = keys[i];
		row->key.tgid &= ~NUPP_SMP_TGID_BUF;
		nrows++;
	}
	/* Lost counters of this buffer: per-CPU values, summed and zeroed. */
	vals = calloc(ncpu, sizeof(*vals));
	if (!vals) {
		e = -ENOMEM;
		goto out;
	}
	for (r = 0; r < NUPP_SMP_LOST_N; r++) {
		__u32 idx = (__u32)old * NUPP_SMP_LOST_N + r;
		int c2;

		if (bpf_map_lookup_elem(lfd, &idx, vals))
			continue;
		/* The stack ring full is reported as a full map (nothing to sweep for it). */
		for (c2 = 0; c2 < ncpu; c2++)
			out->lost[r == NUPP_SMP_LOST_RING_FULL ? NUPP_LOST_MAP_FULL : r] += vals[c2];
		for (c2 = 0; r != NUPP_SMP_LOST_MAP_FULL && r != NUPP_SMP_LOST_RING_FULL && c2 < ncpu; c2++)
			walk += vals[c2];
		if (r == NUPP_SMP_LOST_MAP_FULL)
			for (c2 = 0; c2 < ncpu; c2++)
				full += vals[c2];
		memset(vals, 0, ncpu * sizeof(*vals));
		bpf_map_update_elem(lfd, &idx, vals, BPF_ANY);
	}
	/* A stack stored without its count (the counts map was full) would stay: swept. */
	if (full) {
		smp_stk_unmark_all(s, old);
		swept = true;
	}
	/* Where the named Lua frames' functions are defined goes to out's frame table. */
	for (i = 0; i < (size_t)s->ntargets; i++)
		if (s->targets[i].sym)
			nupp_sym_set_frames(s->targets[i].sym, &out->frames);
	smp_name_rows(s, rows, nrows, &out->frames);
	for (i = 0; i < (size_t)s->ntargets; i++)
		if (s->targets[i].sym && nupp_sym_set_frames(s->targets[i].sym, NULL))
			e = -ENOMEM;
	if (e)
		goto out;
	nupp_pr(NUPP_DEBUG, "drain: %zu stacks, %ld host IPs, %llu events, %llu stack records refused so far, %llu us\n",
		nrows, nhosts, (unsigned long long)s->ev_handled, (unsigned long long)s->stk_lost,
		(unsigned long long)(smp_now_us() - t0));
	for (i = 0; i < nrows; i++) {
		e = smp_add_row(s, &rows[i], out);
		if (e)
			goto out;
	}
	smp_hold_names(rows, nrows, out->frames.id);
	e = smp_host_rows(s, hkeys, hvals, nhosts, out);
	if (e)
		goto out;
	/* Stacks of this buffer it has not counted for a while (or, crowded, the oldest),
	 * once the rows, which point at the records counted in this drain, are named. */
	smp_stk_evict(s, old, swept, !swept); /* swept: none of them is marked any more */
	/* Where walks failed (mode, walker source line), for -v diagnosis: read when walks
	 * failed, at most every SMP_WHERE_US (the counters add up meanwhile). */
	s->where_due |= walk != 0;
	if (s->where_due && t0 >= s->where_next) {
		smp_lost_where(s);
		s->where_due = false;
		s->where_next = t0 + SMP_WHERE_US;
	}
	for (i = 0; i < (size_t)s->ntargets; i++) {
		if (s->targets[i].traces)
			nupp_traces_purge(s->targets[i].traces, t0);
		/* Copies of prototypes that died before the drain began name no later sample. */
		if (s->targets[i].sym)
			nupp_sym_purge(s->targets[i].sym, s->targets[i].pgen);
	}
out:
	for (i = 0; rows && i < nrows; i++)
		smp_row_unname(&rows[i]);
	free(rows);
	free(vals);
	free(keys);
	free(cvals);
	free(hkeys);
	free(hvals);
	return e;
}

