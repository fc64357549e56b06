/* The shapes the report writers draw from: the VM states of a row, the table of
 * distinct frames, the call tree of all stacks merged, and per-function figures. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/profile.h"
#include "report_internal.h"

/* -- VM states ------------------------------------------------------------------ */

/* A row's count in state i. */
__u64 nupp_rstate_of(const struct nupp_sample_row *r, int i)
{
	switch (i) {
	case NUPP_RS_COMPILED:
		return r->compiled;
	case NUPP_RS_INTERP:
		return r->interpreted;
	case NUPP_RS_C:
		return r->ccode;
	case NUPP_RS_GC:
		return r->collecting;
	case NUPP_RS_JIT:
		return r->compiling;
	}
	return 0;
}

/* The JSON field name of state i. */
const char *nupp_rstate_key(int i)
{
	static const char *const k[] = { "compiled", "interpreted", "cCode", "collecting", "compiling" };

	return (unsigned)i < NUPP_RS__MAX ? k[i] : "unknown";
}

/* The legend name of state i. */
const char *nupp_rstate_label(int i)
{
	static const char *const k[] = { "compiled", "interpreted", "C code", "GC", "JIT compiler" };

	return (unsigned)i < NUPP_RS__MAX ? k[i] : "unknown";
}

/* -- Frames ----------------------------------------------------------------------- */

/* FNV-1a of s[0..len). */
static __u64 rtree_hash(const char *s, size_t len, __u64 h)
{
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h ^ (h >> 31);
}

/* Rebuilds the frame hash at twice the size. */
static int rframes_rehash(struct nupp_rframes *t)
{
	size_t cap = t->hcap ? t->hcap * 2 : 256, i, j;
	__u32 *h = calloc(cap, sizeof(*h));

	if (!h)
		return -ENOMEM;
	for (i = 0; i < t->n; i++) {
		j = rtree_hash(t->names[i], strlen(t->names[i]), 1469598103934665603ULL) & (cap - 1);
		while (h[j])
			j = (j + 1) & (cap - 1);
		h[j] = (__u32)i + 1;
	}
	free(t->hash);
	t->hash = h;
	t->hcap = cap;
	return 0;
}

/* The id of frame s[0..len), added if new. */
long nupp_rframes_intern(struct nupp_rframes *t, const char *s, size_t len)
{
	size_t j;
	char *copy;

	if ((t->n + 1) * 2 > t->hcap && rframes_rehash(t))
		return -ENOMEM;
	j = rtree_hash(s, len, 1469598103934665603ULL) & (t->hcap - 1);
	for (; t->hash[j]; j = (j + 1) & (t->hcap - 1)) {
		const char *n = t->names[t->hash[j] - 1];

		if (strncmp(n, s, len) == 0 && n[len] == 0)
			return (long)t->hash[j] - 1;
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		char **nn = realloc(t->names, cap * sizeof(*nn));

		if (!nn)
			return -ENOMEM;
		t->names = nn;
		t->cap = cap;
	}
	copy = strndup(s, len);
	if (!copy)
		return -ENOMEM;
	t->names[t->n] = copy;
	t->hash[j] = (__u32)++t->n;
	return (long)t->n - 1;
}

/* Frees the table. */
void nupp_rframes_free(struct nupp_rframes *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		free(t->names[i]);
	free(t->names);
	free(t->hash);
	memset(t, 0, sizeof(*t));
}

/* -- The call tree ---------------------------------------------------------------- */

/* Hash slot of (parent, frame). */
static size_t rtree_slot(long parent, long frame, size_t cap)
{
	__u64 h = ((__u64)parent * 0x9E3779B97F4A7C15ULL) ^ ((__u64)frame * 0xC2B2AE3D27D4EB4FULL);

	return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* Rebuilds the node hash at twice the size. */
static int rtree_rehash(struct nupp_rtree *t)
{
	size_t cap = t->hcap ? t->hcap * 2 : 1024, i, j;
	long *h = calloc(cap, sizeof(*h));

	if (!h)
		return -ENOMEM;
	for (i = 1; i < t->n; i++) {
		j = rtree_slot(t->nodes[i].parent, t->nodes[i].frame, cap);
		while (h[j])
			j = (j + 1) & (cap - 1);
		h[j] = (long)i + 1;
	}
	free(t->hash);
	t->hash = h;
	t->hcap = cap;
	return 0;
}

/* The child of parent for frame, added if new; -ENOMEM. */
static long rtree_child(struct nupp_rtree *t, long parent, long frame)
{
	size_t j;
	struct nupp_rnode *n;

	if ((t->n + 1) * 2 > t->hcap && rtree_rehash(t))
		return -ENOMEM;
	j = rtree_slot(parent, frame, t->hcap);
	for (; t->hash[j]; j = (j + 1) & (t->hcap - 1)) {
		n = &t->nodes[t->hash[j] - 1];
		if (n->parent == parent && n->frame == frame)
			return t->hash[j] - 1;
	}
	if (t->n == t->cap) {
		size_t cap = t->cap * 2;
		struct nupp_rnode *nn = realloc(t->nodes, cap * sizeof(*nn));

		if (!nn)
			return -ENOMEM;
		t->nodes = nn;
		t->cap = cap;
	}
	n = &t->nodes[t->n];
	memset(n, 0, sizeof(*n));
	n->frame = frame;
	n->parent = parent;
	n->child = n->next = -1;
	t->hash[j] = (long)++t->n;
	return (long)t->n - 1;
}

/* Adds count and the state split of r to node i. */
static void rtree_count(struct nupp_rnode *n, const struct nupp_sample_row *r)
{
	int k;

	n->total += r->count;
	for (k = 0; k < NUPP_RS__MAX; k++)
		n->state[k] += nupp_rstate_of(r, k);
}

static const struct nupp_rtree *rtree_sorting;

/* qsort order of child ids: by frame name. */
static int rtree_cmp(const void *a, const void *b)
{
	const struct nupp_rtree *t = rtree_sorting;
	long x = *(const long *)a, y = *(const long *)b;

	return strcmp(t->frames.names[t->nodes[x].frame], t->frames.names[t->nodes[y].frame]);
}

/* Links every node's children into a list sorted by name. */
static int rtree_link(struct nupp_rtree *t)
{
	size_t *nkids = calloc(t->n, sizeof(*nkids)), *start = calloc(t->n + 1, sizeof(*start)), i;
	long *kids = malloc(t->n * sizeof(*kids));
	size_t *fill = calloc(t->n, sizeof(*fill));

	if (!nkids || !start || !kids || !fill) {
		free(nkids);
		free(start);
		free(kids);
		free(fill);
		return -ENOMEM;
	}
	for (i = 1; i < t->n; i++)
		nkids[t->nodes[i].parent]++;
	for (i = 0; i < t->n; i++)
		start[i + 1] = start[i] + nkids[i];
	for (i = 1; i < t->n; i++) {
		long p = t->nodes[i].parent;

		kids[start[p] + fill[p]++] = (long)i;
	}
	rtree_sorting = t;
	for (i = 0; i < t->n; i++) {
		size_t k;

		if (nkids[i] > 1)
			qsort(kids + start[i], nkids[i], sizeof(*kids), rtree_cmp);
		t->nodes[i].child = nkids[i] ? kids[start[i]] : -1;
		for (k = 0; k < nkids[i]; k++)
			t->nodes[kids[start[i] + k]].next = k + 1 < nkids[i] ? kids[start[i] + k + 1] : -1;
	}
	free(nkids);
	free(start);
	free(kids);
	free(fill);
	return 0;
}

/* Builds the tree of every row's stack. */
int nupp_rtree_build(struct nupp_rtree *t, const struct nupp_sample_set *s)
{
	size_t i;

	memset(t, 0, sizeof(*t));
	t->cap = 1024;
	t->nodes = calloc(t->cap, sizeof(*t->nodes));
	if (!t->nodes)
		return -ENOMEM;
	t->n = 1;
	t->nodes[0].frame = t->nodes[0].parent = -1;
	t->nodes[0].child = t->nodes[0].next = -1;
	for (i = 0; i < s->n; i++) {
		const struct nupp_sample_row *r = &s->rows[i];
		const char *f = r->stack;
		long node = 0;

		if (!r->count)
			continue;
		rtree_count(&t->nodes[0], r);
		while (*f) {
			size_t len = strcspn(f, ";");
			long id = nupp_rframes_intern(&t->frames, f, len);

			if (id < 0 || (node = rtree_child(t, node, id)) < 0) {
				nupp_rtree_free(t);
				return -ENOMEM;
			}
			rtree_count(&t->nodes[node], r);
			f += len;
			if (*f)
				f++;
		}
		t->nodes[node].self += r->count;
	}
	t->total = t->nodes[0].total;
	if (rtree_link(t)) {
		nupp_rtree_free(t);
		return -ENOMEM;
	}
	return 0;
}

/* Frees the tree. */
void nupp_rtree_free(struct nupp_rtree *t)
{
	nupp_rframes_free(&t->frames);
	free(t->nodes);
	free(t->hash);
	memset(t, 0, sizeof(*t));
}

/* -- Per-function figures -------------------------------------------------------- */

static const struct nupp_rframes *rfunc_names;

/* qsort order: self, then total, descending, then name. */
static int rfunc_cmp(const void *a, const void *b)
{
	const struct nupp_rfunc *x = a, *y = b;

	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return strcmp(rfunc_names->names[x->frame], rfunc_names->names[y->frame]);
}

/* The figures of every frame of the rows of s (frames must start empty). */
int nupp_rfuncs(const struct nupp_sample_set *s, struct nupp_rframes *frames, struct nupp_rfunc **out,
		size_t *n)
{
	struct nupp_rfunc *fn = NULL;
	size_t cap = 0, i, k;
	long *seen = NULL; /* per frame: the last row that counted it in total */
	size_t seen_cap = 0;

	for (i = 0; i < s->n; i++) {
		const struct nupp_sample_row *r = &s->rows[i];
		const char *f = r->stack;
		long id = -1;

		if (!r->count)
			continue;
		while (*f) {
			size_t len = strcspn(f, ";");

			id = nupp_rframes_intern(frames, f, len);
			if (id < 0)
				goto nomem;
			if (frames->n > cap) {
				size_t ncap = frames->n * 2;
				struct nupp_rfunc *nf = realloc(fn, ncap * sizeof(*nf));
				long *ns = realloc(seen, ncap * sizeof(*ns));

				if (nf)
					fn = nf;
				if (ns)
					seen = ns;
				if (!nf || !ns)
					goto nomem;
				memset(fn + cap, 0, (ncap - cap) * sizeof(*fn));
				for (k = seen_cap; k < ncap; k++) {
					seen[k] = -1;
					fn[k].frame = (long)k;
				}
				cap = seen_cap = ncap;
			}
			if (seen[id] != (long)i) {
				seen[id] = (long)i;
				fn[id].total += r->count;
			}
			f += len;
			if (*f)
				f++;
		}
		if (id >= 0) {
			fn[id].self += r->count;
			for (k = 0; k < NUPP_RS__MAX; k++)
				fn[id].self_state[k] += nupp_rstate_of(r, (int)k);
		}
	}
	free(seen);
	rfunc_names = frames;
	if (frames->n)
		qsort(fn, frames->n, sizeof(*fn), rfunc_cmp);
	*out = fn;
	*n = frames->n;
	return 0;
nomem:
	free(fn);
	free(seen);
	return -ENOMEM;
}
