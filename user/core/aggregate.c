/* The zone/stack aggregate and the abort table: rows, merging, ordering, frees. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/profile.h"

static const char *const lost_names[NUPP_LOST__MAX] = {
#define AGG_LOST_NAME(id, name, what, remedy) [NUPP_LOST_##id] = name,
	NUPP_LOSTDEF(AGG_LOST_NAME)
#undef AGG_LOST_NAME
};

/* The name of a loss reason as it appears in reports. */
const char *nupp_lost_name(enum nupp_lost r)
{
	return (unsigned)r < NUPP_LOST__MAX ? lost_names[r] : "unknown";
}

/* "blacklist", "warn" or "info". */
const char *nupp_severity_name(enum nupp_severity s)
{
	switch (s) {
	case NUPP_SEV_BLACKLIST:
		return "blacklist";
	case NUPP_SEV_WARN:
		return "warn";
	case NUPP_SEV_INFO:
		return "info";
	}
	return "unknown";
}

/* Grows a row array to hold one more element; 0 or -ENOMEM. */
static int agg_reserve(void **rows, size_t n, size_t *cap, size_t elem)
{
	void *nr;
	size_t ncap;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 64;
	nr = realloc(*rows, ncap * elem);
	if (!nr)
		return -ENOMEM;
	*rows = nr;
	*cap = ncap;
	return 0;
}

/* Folds s[0..n) into h eight bytes at a time (a multiply-xorshift step per word):
 * every stack of every drain is hashed, a byte at a time was most of the cost. */
static __u64 agg_mix(__u64 h, const char *s, size_t n)
{
	__u64 w;

	for (; n >= 8; s += 8, n -= 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 32;
	}
	if (n) {
		w = 0;
		memcpy(&w, s, n);
		h = (h ^ w ^ ((__u64)n << 56)) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 32;
	}
	return h;
}

/* Final avalanche of a hash (the index takes its low bits). */
static size_t agg_final(__u64 h)
{
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (size_t)h;
}

/* Hash of a (pid, tid, zone, stack) key (the zone's length separates it from the
 * stack). */
static size_t agg_hash(pid_t pid, pid_t tid, const char *zone, const char *stack)
{
	__u64 h = 0xcbf29ce484222325ull ^ ((__u64)(__u32)pid * 0x9e3779b97f4a7c15ull) ^
		  ((__u64)(__u32)tid * 0xc2b2ae3d27d4eb4full);
	size_t zl = strlen(zone);

	h = agg_mix(h, zone, zl);
	h = (h ^ zl) * 0x100000001b3ull;
	return agg_final(agg_mix(h, stack, strlen(stack)));
}

/* The index slot of (pid, tid, zone, stack): the row's, or the empty slot where it belongs. */
static size_t agg_slot(const struct nupp_sample_set *s, pid_t pid, pid_t tid, const char *zone, const char *stack,
		       size_t h)
{
	size_t m = s->nslots - 1, i;

	for (i = h & m; s->index[i]; i = (i + 1) & m) {
		const struct nupp_sample_row *r = &s->rows[s->index[i] - 1];

		/* Every indexed row's hash is known: long stacks are compared only on a match. */
		if (s->hashes[s->index[i] - 1] == h && r->pid == pid && r->tid == tid && r->stack &&
		    strcmp(r->stack, stack) == 0 &&
		    strcmp(r->zone_path, zone) == 0)
			break;
	}
	return i;
}

/* Makes room for the hashes of rows [0, n); 0 or -ENOMEM. */
static int agg_hashes_reserve(struct nupp_sample_set *s, size_t n)
{
	size_t cap = s->nhashes ? s->nhashes : 64;
	size_t *h;

	if (n <= s->nhashes)
		return 0;
	while (cap < n)
		cap *= 2;
	h = realloc(s->hashes, cap * sizeof(*h));
	if (!h)
		return -ENOMEM;
	s->hashes = h;
	s->nhashes = cap;
	return 0;
}

/* Makes the index cover every row with room for one more (load <= 1/2); rows that are
 * equal (code other than nupp_sample_set_add may have made them) keep their first
 * index; rows taken (NULL stack) are left out. A grown index reuses the hashes of the
 * rows it covered. 0 or -ENOMEM. */
static int agg_index(struct nupp_sample_set *s)
{
	size_t want = 16, i, known;

	if (agg_hashes_reserve(s, s->n + 1))
		return -ENOMEM;
	if (s->index && s->nindexed == s->n && 2 * (s->n + 1) <= s->nslots)
		return 0;
	while (want < 2 * (s->n + 1))
		want *= 2;
	known = s->index && s->nindexed <= s->n ? s->nindexed : 0;
	if (!s->index || want != s->nslots || s->nindexed > s->n) {
		size_t *ix = calloc(want, sizeof(*ix));

		if (!ix)
			return -ENOMEM;
		free(s->index);
		s->index = ix;
		s->nslots = want;
		s->nindexed = 0;
	}
	for (i = s->nindexed; i < s->n; i++) {
		const struct nupp_sample_row *r = &s->rows[i];
		size_t slot;

		if (!r->stack)
			continue;
		if (i >= known)
			s->hashes[i] = agg_hash(r->pid, r->tid, r->zone_path, r->stack);
		slot = agg_slot(s, r->pid, r->tid, r->zone_path, r->stack, s->hashes[i]);
		if (!s->index[slot])
			s->index[slot] = i + 1;
	}
	s->nindexed = s->n;
	return 0;
}

/* Adds c's counts to the row (c->pid, c->tid, zone, stack) of hash h, creating it with
 * the given strings (owned: taken, not copied) or copies of zone and stack; *made says
 * whether it was created. 0 or -ENOMEM. */
static int agg_add(struct nupp_sample_set *s, const char *zone, const char *stack, size_t h,
		   const struct nupp_sample_row *c, char *own_zone, char *own_stack, bool *made)
{
	struct nupp_sample_row *r;
	size_t slot;

	*made = false;
	if (agg_index(s))
		return -ENOMEM;
	slot = agg_slot(s, c->pid, c->tid, zone, stack, h);
	if (s->index[slot]) {
		r = &s->rows[s->index[slot] - 1];
	} else {
		if (agg_reserve((void **)&s->rows, s->n, &s->cap, sizeof(*r)))
			return -ENOMEM;
		r = &s->rows[s->n];
		memset(r, 0, sizeof(*r));
		r->pid = c->pid;
		r->tid = c->tid;
		r->zone_path = own_zone ? own_zone : strdup(zone);
		r->stack = own_stack ? own_stack : strdup(stack);
		if (!r->zone_path || !r->stack) {
			if (!own_zone)
				free(r->zone_path);
			if (!own_stack)
				free(r->stack);
			return -ENOMEM;
		}
		s->hashes[s->n] = h; /* room: agg_index reserved n + 1 */
		s->n++;
		s->index[slot] = s->n;
		s->nindexed = s->n;
		*made = true;
	}
	r->count += c->count;
	r->compiled += c->compiled;
	r->interpreted += c->interpreted;
	r->ccode += c->ccode;
	r->collecting += c->collecting;
	r->compiling += c->compiling;
	s->samples += c->count;
	return 0;
}

/* Adds counts to the row (pid, tid, zone, stack), creating it: one hash lookup. */
int nupp_sample_set_add(struct nupp_sample_set *s, const char *zone, const char *stack,
			const struct nupp_sample_row *c)
{
	bool made;

	return agg_add(s, zone, stack, agg_hash(c->pid, c->tid, zone, stack), c, NULL, NULL, &made);
}

/* Adds src's row i to dst, taking its strings for a new row (see profile.h). */
int nupp_sample_set_take(struct nupp_sample_set *dst, struct nupp_sample_set *src, size_t i, const char *zone)
{
	struct nupp_sample_row *r = &src->rows[i];
	bool same, made;
	size_t h;
	char *oz;
	int e;

	if (!r->stack)
		return 0; /* taken already */
	same = !zone || zone == r->zone_path || strcmp(zone, r->zone_path) == 0;
	if (!zone)
		zone = r->zone_path;
	h = same && i < src->nindexed && i < src->nhashes ? src->hashes[i] : agg_hash(r->pid, r->tid, zone, r->stack);
	oz = same ? r->zone_path : NULL;
	e = agg_add(dst, zone, r->stack, h, r, oz, r->stack, &made);
	if (e)
		return e;
	if (made) {
		if (!same)
			free(r->zone_path);
	} else {
		free(r->zone_path);
		free(r->stack);
	}
	r->zone_path = NULL;
	r->stack = NULL;
	r->count = r->compiled = r->interpreted = r->ccode = r->collecting = r->compiling = 0;
	return 0;
}

/* qsort order: count descending, then zone and stack ascending. */
static int agg_cmp_sample(const void *a, const void *b)
{
	const struct nupp_sample_row *x = a, *y = b;
	int c;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	c = strcmp(x->zone_path, y->zone_path);
	return c ? c : strcmp(x->stack, y->stack);
}

/* Sorts rows by count descending (the index is rebuilt at the next add). */
void nupp_sample_set_sort(struct nupp_sample_set *s)
{
	if (s->n)
		qsort(s->rows, s->n, sizeof(*s->rows), agg_cmp_sample);
	s->nindexed = (size_t)-1;
}

/* Frees the rows and the frame table. */
void nupp_sample_set_free(struct nupp_sample_set *s)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		free(s->rows[i].zone_path);
		free(s->rows[i].stack);
	}
	free(s->rows);
	free(s->index);
	free(s->hashes);
	nupp_frame_table_free(&s->frames);
	memset(s, 0, sizeof(*s));
}

/* -- The frame table ---------------------------------------------------------------- */

/* Hash of a frame name s[0..len). */
static size_t agg_name_hash(const char *s, size_t len)
{
	return agg_final(agg_mix(0xcbf29ce484222325ull ^ len, s, len));
}

/* The index slot of name[0..len): its first entry's, or the empty slot where it belongs. */
static size_t agg_name_slot(const struct nupp_frame_table *t, const char *name, size_t len)
{
	size_t m = t->nslots - 1, i;

	for (i = agg_name_hash(name, len) & m; t->index[i]; i = (i + 1) & m) {
		const char *o = t->v[t->index[i] - 1].name;

		if (strncmp(o, name, len) == 0 && !o[len])
			break;
	}
	return i;
}

/* Doubles the name index (load <= 1/2) when one more entry could pass it; 0 or -ENOMEM. */
static int agg_name_grow(struct nupp_frame_table *t)
{
	size_t want = t->nslots ? t->nslots : 64, i, *old = t->index, oldn = t->nslots;

	if (t->index && 2 * (t->n + 1) <= t->nslots)
		return 0;
	while (want < 2 * (t->n + 1))
		want *= 2;
	t->index = calloc(want, sizeof(*t->index));
	if (!t->index) {
		t->index = old;
		return -ENOMEM;
	}
	t->nslots = want;
	for (i = 0; i < oldn; i++)
		if (old[i]) {
			const char *nm = t->v[old[i] - 1].name;

			t->index[agg_name_slot(t, nm, strlen(nm))] = old[i];
		}
	free(old);
	return 0;
}

/* The first entry of frame name[0..len), or NULL. */
const struct nupp_frame_info *nupp_frame_table_find(const struct nupp_frame_table *t, const char *name,
						     size_t len)
{
	size_t slot;

	if (!t->nslots)
		return NULL;
	slot = agg_name_slot(t, name, len);
	return t->index[slot] ? &t->v[t->index[slot] - 1] : NULL;
}

/* The next entry of e's name, or NULL. */
const struct nupp_frame_info *nupp_frame_table_next(const struct nupp_frame_table *t,
						     const struct nupp_frame_info *e)
{
	return e->next ? &t->v[e->next - 1] : NULL;
}

/* Adds (name, file, first_line, last_line) unless it is there. */
int nupp_frame_table_add(struct nupp_frame_table *t, const char *name, const char *file, int first_line,
			 int last_line)
{
	static unsigned long long ids;
	struct nupp_frame_info *e;
	size_t len = strlen(name), slot, k, last = 0; /* last: the name's last entry + 1 */

	if (!t->id)
		t->id = __atomic_add_fetch(&ids, 1, __ATOMIC_RELAXED);
	if (agg_name_grow(t))
		return -ENOMEM;
	slot = agg_name_slot(t, name, len);
	for (k = t->index[slot]; k; k = t->v[k - 1].next) {
		e = &t->v[k - 1];
		if (e->first_line == first_line && e->last_line == last_line && strcmp(e->file, file) == 0)
			return 0;
		last = k;
	}
	if (agg_reserve((void **)&t->v, t->n, &t->cap, sizeof(*e)))
		return -ENOMEM;
	e = &t->v[t->n];
	e->name = strdup(name);
	e->file = strdup(file);
	e->first_line = first_line;
	e->last_line = last_line;
	e->next = 0;
	if (!e->name || !e->file) {
		free(e->name);
		free(e->file);
		return -ENOMEM;
	}
	t->n++;
	if (last)
		t->v[last - 1].next = t->n;
	else
		t->index[slot] = t->n;
	return 0;
}

/* Adds every entry of src to t. */
int nupp_frame_table_merge(struct nupp_frame_table *t, const struct nupp_frame_table *src)
{
	size_t i;

	for (i = 0; i < src->n; i++)
		if (nupp_frame_table_add(t, src->v[i].name, src->v[i].file, src->v[i].first_line, src->v[i].last_line))
			return -ENOMEM;
	return 0;
}

/* Frees the entries. */
void nupp_frame_table_free(struct nupp_frame_table *t)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		free(t->v[i].name);
		free(t->v[i].file);
	}
	free(t->v);
	free(t->index);
	memset(t, 0, sizeof(*t));
}

/* Adds count to the row (severity, reason, location, zone), creating it. */
int nupp_abort_set_add(struct nupp_abort_set *a, enum nupp_severity sev, const char *reason,
		       const char *location, const char *zone, __u64 count)
{
	struct nupp_abort_row *r = NULL;
	size_t i;

	for (i = 0; i < a->n; i++)
		if (a->rows[i].severity == sev && strcmp(a->rows[i].reason, reason) == 0 &&
		    strcmp(a->rows[i].location, location) == 0 && strcmp(a->rows[i].zone_path, zone) == 0) {
			r = &a->rows[i];
			break;
		}
	if (!r) {
		if (agg_reserve((void **)&a->rows, a->n, &a->cap, sizeof(*r)))
			return -ENOMEM;
		r = &a->rows[a->n];
		memset(r, 0, sizeof(*r));
		r->severity = sev;
		r->reason = strdup(reason);
		r->location = strdup(location);
		r->zone_path = strdup(zone);
		if (!r->reason || !r->location || !r->zone_path) {
			free(r->reason);
			free(r->location);
			free(r->zone_path);
			return -ENOMEM;
		}
		a->n++;
	}
	r->count += count;
	return 0;
}

/* qsort order: severity (blacklist, warn, info), count descending, then text. */
static int agg_cmp_abort(const void *a, const void *b)
{
	const struct nupp_abort_row *x = a, *y = b;
	int c;

	if (x->severity != y->severity)
		return x->severity < y->severity ? -1 : 1;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if ((c = strcmp(x->location, y->location)))
		return c;
	if ((c = strcmp(x->reason, y->reason)))
		return c;
	return strcmp(x->zone_path, y->zone_path);
}

/* Sorts rows by severity, then count descending. */
void nupp_abort_set_sort(struct nupp_abort_set *a)
{
	if (a->n)
		qsort(a->rows, a->n, sizeof(*a->rows), agg_cmp_abort);
}

/* Frees the rows. */
void nupp_abort_set_free(struct nupp_abort_set *a)
{
	size_t i;

	for (i = 0; i < a->n; i++) {
		free(a->rows[i].reason);
		free(a->rows[i].location);
		free(a->rows[i].zone_path);
	}
	free(a->rows);
	memset(a, 0, sizeof(*a));
}

/* The module of a frame "module:name" (length up to the last ':'), or the frame. */
static size_t agg_frame_module_len(const char *frame, size_t len)
{
	size_t i;

	for (i = len; i-- > 0;)
		if (frame[i] == ':')
			return i;
	return len;
}

/* Returns the suffix of stack starting at its outermost frame of module root, or the
 * whole stack if no frame is from root. */
static const char *agg_cut_root(const char *stack, const char *root)
{
	size_t rlen = strlen(root);
	const char *f = stack;

	while (*f) {
		size_t len = strcspn(f, ";");

		if (agg_frame_module_len(f, len) == rlen && strncmp(f, root, rlen) == 0)
			return f;
		if (!f[len])
			break;
		f += len + 1;
	}
	return stack;
}

/* Copies row r to the end of out (out's rows are distinct: no lookup); 0 or -ENOMEM. */
static int agg_copy_row(struct nupp_sample_set *out, const struct nupp_sample_row *r)
{
	struct nupp_sample_row *o;

	if (agg_reserve((void **)&out->rows, out->n, &out->cap, sizeof(*o)))
		return -ENOMEM;
	o = &out->rows[out->n];
	*o = *r;
	o->zone_path = strdup(r->zone_path);
	o->stack = strdup(r->stack);
	if (!o->zone_path || !o->stack) {
		free(o->zone_path);
		free(o->stack);
		return -ENOMEM;
	}
	out->n++;
	out->samples += r->count;
	return 0;
}

/* Keeps rows under a zone prefix and cuts stacks below the root module. Without a root
 * the rows stay distinct and are copied as they are; a root cut may make rows equal,
 * which are merged (one hash lookup each). */
int nupp_sample_set_filter(const struct nupp_sample_set *in, const char *zone_prefix, const char *root,
			   struct nupp_sample_set *out)
{
	size_t i, plen = zone_prefix ? strlen(zone_prefix) : 0;
	int err;

	memcpy(out->lost, in->lost, sizeof(out->lost));
	out->host_samples = in->host_samples;
	out->cut_samples = in->cut_samples;
	if (nupp_frame_table_merge(&out->frames, &in->frames))
		return -ENOMEM;
	for (i = 0; i < in->n; i++) {
		const struct nupp_sample_row *r = &in->rows[i];

		if (zone_prefix && strncmp(r->zone_path, zone_prefix, plen) != 0)
			continue;
		if (root)
			err = nupp_sample_set_add(out, r->zone_path, agg_cut_root(r->stack, root), r);
		else
			err = agg_copy_row(out, r);
		if (err)
			return err;
	}
	nupp_sample_set_sort(out);
	return 0;
}
