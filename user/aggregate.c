/* The zone/stack aggregate and the abort table: rows, merging, ordering, frees. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/profile.h"

static const char *const lost_names[NUPP_LOST__MAX] = {
	[NUPP_LOST_NO_VM] = "noVm",           [NUPP_LOST_READ_FAULT] = "readFault",
	[NUPP_LOST_BAD_FRAME] = "badFrame",   [NUPP_LOST_TRUNCATED] = "truncated",
	[NUPP_LOST_MAP_FULL] = "mapFull",     [NUPP_LOST_SYMBOLIZE] = "symbolize",
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

/* Adds counts to the row (zone, stack), creating it. Linear lookup is fine for the
 * drain path (called once per distinct BPF key); writers never look up. */
int nupp_sample_set_add(struct nupp_sample_set *s, const char *zone, const char *stack,
			const struct nupp_sample_row *c)
{
	struct nupp_sample_row *r = NULL;
	size_t i;

	for (i = s->n; i-- > 0;)
		if (s->rows[i].pid == c->pid && strcmp(s->rows[i].stack, stack) == 0 &&
		    strcmp(s->rows[i].zone_path, zone) == 0) {
			r = &s->rows[i];
			break;
		}
	if (!r) {
		if (agg_reserve((void **)&s->rows, s->n, &s->cap, sizeof(*r)))
			return -ENOMEM;
		r = &s->rows[s->n];
		memset(r, 0, sizeof(*r));
		r->pid = c->pid;
		r->zone_path = strdup(zone);
		r->stack = strdup(stack);
		if (!r->zone_path || !r->stack) {
			free(r->zone_path);
			free(r->stack);
			return -ENOMEM;
		}
		s->n++;
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

/* qsort order: count descending, then zone and stack ascending. */
static int agg_cmp_sample(const void *a, const void *b)
{
	const struct nupp_sample_row *x = a, *y = b;
	int c;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	c = strcmp(x->zone_path, y->zone_path);
	return c ? c : strcmp(x->stack, y->stack);
}

/* Sorts rows by count descending. */
void nupp_sample_set_sort(struct nupp_sample_set *s)
{
	if (s->n)
		qsort(s->rows, s->n, sizeof(*s->rows), agg_cmp_sample);
}

/* Frees the rows. */
void nupp_sample_set_free(struct nupp_sample_set *s)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		free(s->rows[i].zone_path);
		free(s->rows[i].stack);
	}
	free(s->rows);
	memset(s, 0, sizeof(*s));
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

/* Keeps rows under a zone prefix and cuts stacks below the root module. */
int nupp_sample_set_filter(const struct nupp_sample_set *in, const char *zone_prefix, const char *root,
			   struct nupp_sample_set *out)
{
	size_t i, plen = zone_prefix ? strlen(zone_prefix) : 0;
	int err;

	memcpy(out->lost, in->lost, sizeof(out->lost));
	for (i = 0; i < in->n; i++) {
		const struct nupp_sample_row *r = &in->rows[i];

		if (zone_prefix && strncmp(r->zone_path, zone_prefix, plen) != 0)
			continue;
		err = nupp_sample_set_add(out, r->zone_path, root ? agg_cut_root(r->stack, root) : r->stack, r);
		if (err)
			return err;
	}
	nupp_sample_set_sort(out);
	return 0;
}
