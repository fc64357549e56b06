/* Why: the hottest code that ran interpreted, joined by source location with the trace
 * aborts recorded at it, in code it calls, or (without line information) in its file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "nupp/why.h"
#include "core/nupp_internal.h"
#include "compare_internal.h"

#define WHY_DEFAULT_MIN_SHARE 1.0
#define WHY_DEFAULT_TOP 10
#define WHY_MAX_GAP 3 /* lines of a block are at most this far apart */
#define WHY_MAX_FRAMES 512
#define WHY_MAX_ABOVE 30 /* lines above a block an abort may join it from (its function's start) */

/* -- Frames ------------------------------------------------------------------- */

/* One frame of a stack, as a slice of the stack string. */
struct why_frame {
	const char *s;
	size_t len;
	size_t modlen; /* bytes of the module (file) part */
	int line;      /* for a frame module:line, else 0 */
	bool lua;      /* a Lua frame: module:name or module:line */
};

/* Splits a stack into frames (outermost first); how many (at most max). A Lua frame has
 * a module part before its last ':'; builtins ("[builtin:x]", "[host]..."), fast
 * functions ("string.format") and C symbols have none. */
static int why_frames(const char *stack, struct why_frame *fr, int max)
{
	const char *p = stack;
	int n = 0;

	while (n < max) {
		const char *e = strchr(p, ';'), *c;
		struct why_frame *f = &fr[n++];
		size_t i;

		f->s = p;
		f->len = e ? (size_t)(e - p) : strlen(p);
		f->lua = false;
		f->line = 0;
		f->modlen = 0;
		c = memrchr(p, ':', f->len);
		if (c && c > p && p[0] != '[' && p[0] != '@' && c + 1 < p + f->len) {
			f->lua = true;
			f->modlen = (size_t)(c - p);
			for (i = 1; c + i < p + f->len && c[i] >= '0' && c[i] <= '9'; i++)
				;
			if (c + i == p + f->len && i < 10)
				f->line = atoi(c + 1);
		}
		if (!e)
			break;
		p = e + 1;
	}
	return n;
}

/* The basename of s[0..len): its part after the last '/'. */
static const char *why_base(const char *s, size_t len, size_t *blen)
{
	const char *b = memrchr(s, '/', len);

	b = b ? b + 1 : s;
	*blen = len - (size_t)(b - s);
	return b;
}

/* True if the files a[0..al) and b[0..bl) have the same basename (abort locations name
 * a chunk by basename; frames may carry the full path). */
static bool why_same_file(const char *a, size_t al, const char *b, size_t bl)
{
	size_t x, y;
	const char *p = why_base(a, al, &x), *q = why_base(b, bl, &y);

	return x == y && memcmp(p, q, x) == 0;
}

/* Parses an abort location "file:line"; false if it has no line. */
static bool why_loc(const char *loc, size_t *filelen, int *line)
{
	const char *c = strrchr(loc, ':');
	char *end;
	long v;

	if (!c || c == loc || !c[1])
		return false;
	v = strtol(c + 1, &end, 10);
	if (*end || v < 0)
		return false;
	*filelen = (size_t)(c - loc);
	*line = (int)v;
	return true;
}

/* -- Building ------------------------------------------------------------------ */

/* Self counts of one source line or one function. */
struct why_unit {
	__u64 count, compiled, interpreted, ccode, collecting, compiling;
	bool call; /* a call site: seen as an outer frame of some sample */
};

/* Adds a sample row's counts to u. */
static void why_add(struct why_unit *u, const struct nupp_sample_row *r)
{
	u->count += r->count;
	u->compiled += r->compiled;
	u->interpreted += r->interpreted;
	u->ccode += r->ccode;
	u->collecting += r->collecting;
	u->compiling += r->compiling;
}

/* A sampled line: its file (a slice of a key), line and counts; sortable. */
struct why_line {
	const char *parent;  /* the frames that called it (a slice of a key) */
	size_t parentlen;
	const char *file;
	size_t filelen;
	int line;
	struct why_unit u;
};

/* Orders slices a[0..al) and b[0..bl) bytewise, a prefix first. */
static int why_cmp_slice(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	return c ? c : al == bl ? 0 : al < bl ? -1 : 1;
}

/* Orders lines by their callers, then file, then line. */
static int why_cmp_lines(const void *pa, const void *pb)
{
	const struct why_line *a = pa, *b = pb;
	int c = why_cmp_slice(a->parent, a->parentlen, b->parent, b->parentlen);

	if (!c)
		c = why_cmp_slice(a->file, a->filelen, b->file, b->filelen);
	return c ? c : a->line - b->line;
}

/* True if lines a and b have the same callers and file. */
static bool why_same_group(const struct why_line *a, const struct why_line *b)
{
	return !why_cmp_slice(a->parent, a->parentlen, b->parent, b->parentlen) &&
	       !why_cmp_slice(a->file, a->filelen, b->file, b->filelen);
}

/* Orders items by interpreted samples, then samples, then name. */
static int why_cmp_items(const void *pa, const void *pb)
{
	const struct nupp_why_item *a = pa, *b = pb;

	if (a->interpreted != b->interpreted)
		return a->interpreted < b->interpreted ? 1 : -1;
	if (a->samples != b->samples)
		return a->samples < b->samples ? 1 : -1;
	return strcmp(a->what, b->what);
}

/* Orders an item's aborts: blacklist first, then count, then location. */
static int why_cmp_aborts(const void *pa, const void *pb)
{
	const struct nupp_why_abort *a = pa, *b = pb;

	if (a->row->severity != b->row->severity)
		return (int)a->row->severity - (int)b->row->severity;
	if (a->row->count != b->row->count)
		return a->row->count < b->row->count ? 1 : -1;
	return strcmp(a->row->location, b->row->location);
}

/* Sets an item's counts from u. */
static void why_item_counts(struct nupp_why_item *it, const struct why_unit *u)
{
	it->samples = u->count;
	it->compiled = u->compiled;
	it->interpreted = u->interpreted;
	it->ccode = u->ccode;
	it->collecting = u->collecting;
	it->compiling = u->compiling;
}

/* The innermost Lua frame of fr[0..n) (with a line, in lines mode), or -1. */
static int why_innermost(const struct why_frame *fr, int n, bool lines)
{
	int i;

	for (i = n - 1; i >= 0; i--)
		if (fr[i].lua && (!lines || fr[i].line > 0))
			return i;
	return -1;
}

/* True if frame f is in item it (a block: same file, line in range; a function: equal). */
static bool why_in_item(const struct why_frame *f, const struct nupp_why_item *it, bool lines)
{
	if (!f->lua)
		return false;
	if (!lines)
		return f->len == strlen(it->what) && memcmp(f->s, it->what, f->len) == 0;
	return f->line >= it->first && f->line <= it->last && f->modlen == strlen(it->file) &&
	       memcmp(f->s, it->file, f->modlen) == 0;
}

/* Adds the block [first, last] of file ln[a].file to w->items, with the counts of every
 * sampled line in it (ln[a..b) are the lines of that file, sorted). */
static int why_block_add(struct nupp_why *w, const struct why_line *ln, size_t a, size_t b, int first, int last)
{
	struct nupp_why_item *it = &w->items[w->n];
	struct why_unit u = { 0 };
	size_t j;
	int len;

	for (j = a; j < b; j++)
		if (ln[j].line >= first && ln[j].line <= last) {
			u.count += ln[j].u.count;
			u.compiled += ln[j].u.compiled;
			u.interpreted += ln[j].u.interpreted;
			u.ccode += ln[j].u.ccode;
			u.collecting += ln[j].u.collecting;
			u.compiling += ln[j].u.compiling;
		}
	it->file = strndup(ln[a].file, ln[a].filelen);
	if (!it->file)
		return -ENOMEM;
	it->first = first;
	it->last = last;
	len = first == last ? asprintf(&it->what, "%s:%d", it->file, first)
			    : asprintf(&it->what, "%s:%d-%d", it->file, first, last);
	if (len < 0) {
		it->what = NULL;
		free(it->file);
		return -ENOMEM;
	}
	why_item_counts(it, &u);
	w->n++;
	return 0;
}

/* Groups the sampled lines into blocks of interpreted code, into w->items (unsorted).
 * Per file, in line order: a line more compiled than interpreted ends a block; a line
 * with interpreted samples starts or extends one (at most WHY_MAX_GAP lines after the
 * last); a call site with no compiled or interpreted sample of its own (the loop's call
 * into an interpreted function) extends one the same way, or starts one that an
 * interpreted line then joins; any other line neither extends nor ends a block. */
static int why_blocks(struct nupp_why *w, struct why_line *ln, size_t nl)
{
	size_t a = 0, b, j;

	qsort(ln, nl, sizeof(*ln), why_cmp_lines);
	while (a < nl) {
		int first = 0, last = 0, pfirst = 0, plast = 0;
		bool open = false, pending = false;

		for (b = a; b < nl && why_same_group(&ln[b], &ln[a]); b++)
			;
		for (j = a; j < b; j++) {
			const struct why_unit *u = &ln[j].u;
			int l = ln[j].line;

			if (u->compiled > u->interpreted) {
				if (open && why_block_add(w, ln, a, b, first, last))
					return -ENOMEM;
				open = pending = false;
			} else if (u->interpreted > 0) {
				if (open && l - last <= WHY_MAX_GAP) {
					last = l;
					continue;
				}
				if (open && why_block_add(w, ln, a, b, first, last))
					return -ENOMEM;
				first = pending && l - plast <= WHY_MAX_GAP ? pfirst : l;
				last = l;
				open = true;
				pending = false;
			} else if (u->call) {
				if (open && l - last <= WHY_MAX_GAP) {
					last = l;
				} else if (!open && pending && l - plast <= WHY_MAX_GAP) {
					plast = l;
				} else {
					if (open && why_block_add(w, ln, a, b, first, last))
						return -ENOMEM;
					open = false;
					pending = true;
					pfirst = plast = l;
				}
			}
		}
		if (open && why_block_add(w, ln, a, b, first, last))
			return -ENOMEM;
		a = b;
	}
	return 0;
}

/* Orders items by file, then first line. */
static int why_cmp_spans(const void *pa, const void *pb)
{
	const struct nupp_why_item *a = pa, *b = pb;
	int c = strcmp(a->file, b->file);

	return c ? c : a->first != b->first ? a->first - b->first : a->last - b->last;
}

/* Merges blocks of one file whose lines overlap (the same code reached from different
 * callers, or a closure defined inside a loop's lines), summing their counts. */
static int why_coalesce(struct nupp_why *w)
{
	size_t i, k = 0;

	qsort(w->items, w->n, sizeof(*w->items), why_cmp_spans);
	for (i = 0; i < w->n; i++) {
		struct nupp_why_item *it = &w->items[i], *o = k ? &w->items[k - 1] : NULL;
		int len;

		if (!o || strcmp(o->file, it->file) || it->first > o->last) {
			w->items[k++] = *it;
			continue;
		}
		if (it->last > o->last)
			o->last = it->last;
		o->samples += it->samples;
		o->compiled += it->compiled;
		o->interpreted += it->interpreted;
		o->ccode += it->ccode;
		o->collecting += it->collecting;
		o->compiling += it->compiling;
		free(it->what);
		free(it->file);
		free(o->what);
		len = o->first == o->last ? asprintf(&o->what, "%s:%d", o->file, o->first)
					  : asprintf(&o->what, "%s:%d-%d", o->file, o->first, o->last);
		if (len < 0) {
			o->what = NULL;
			w->n = k;
			return -ENOMEM;
		}
	}
	w->n = k;
	return 0;
}

/* Keeps the items with enough interpreted samples, most first, at most top of them. */
static void why_keep(struct nupp_why *w)
{
	double min = w->opts.min_share / 100 * (double)w->samples;
	size_t i, k = 0;

	qsort(w->items, w->n, sizeof(*w->items), why_cmp_items);
	for (i = 0; i < w->n; i++) {
		struct nupp_why_item *it = &w->items[i];

		if (it->interpreted > 0 && (double)it->interpreted >= min && k < (size_t)w->opts.top) {
			w->items[k++] = *it;
			continue;
		}
		free(it->what);
		free(it->file);
	}
	w->n = k;
}

/* Fills each item's inclusive count and, in lines mode, the frames called from it
 * (callees[i], keys "file:line" by basename). */
static int why_inclusive(struct nupp_why *w, const struct nupp_profile *p, struct nupp_strtab *callees)
{
	struct why_frame fr[WHY_MAX_FRAMES];
	size_t r, i;
	int n, k, m;

	for (r = 0; r < p->samples.n; r++) {
		n = why_frames(p->samples.rows[r].stack, fr, WHY_MAX_FRAMES);
		for (i = 0; i < w->n; i++) {
			for (k = 0; k < n && !why_in_item(&fr[k], &w->items[i], w->opts.lines); k++)
				;
			if (k == n)
				continue;
			w->items[i].inclusive += p->samples.rows[r].count;
			if (!w->opts.lines)
				continue;
			for (m = k + 1; m < n; m++) {
				char key[512];
				size_t bl;
				const char *b;
				int len;

				if (!fr[m].lua || !fr[m].line || why_in_item(&fr[m], &w->items[i], true))
					continue;
				b = why_base(fr[m].s, fr[m].modlen, &bl);
				len = snprintf(key, sizeof(key), "%.*s:%d", (int)bl, b, fr[m].line);
				if (len > 0 && (size_t)len < sizeof(key) &&
				    nupp_strtab_get(&callees[i], key, (size_t)len, true) == -ENOMEM)
					return -ENOMEM;
			}
		}
	}
	return 0;
}

/* Adds abort row a to item it with the join kind. */
static int why_attach(struct nupp_why_item *it, const struct nupp_abort_row *a, enum nupp_why_join how)
{
	struct nupp_why_abort *na = realloc(it->aborts, (it->naborts + 1) * sizeof(*na));

	if (!na)
		return -ENOMEM;
	it->aborts = na;
	na[it->naborts].row = a;
	na[it->naborts].join = how;
	it->naborts++;
	return 0;
}

/* True if a line of file (the sorted sampled lines ln[0..nl)) strictly between lo and hi
 * ran (has samples, or is a call site). */
static bool why_sampled_between(const struct why_line *ln, size_t nl, const char *file, int lo, int hi)
{
	size_t i, fl = strlen(file);

	for (i = 0; i < nl; i++)
		if (ln[i].filelen == fl && memcmp(ln[i].file, file, fl) == 0 && ln[i].line > lo && ln[i].line < hi &&
		    (ln[i].u.count || ln[i].u.call))
			return true;
	return false;
}

/* Whether abort row r (at line of its file) is the nearest one above block it, with
 * nothing sampled between: no row of rows[0..n) lies closer above it. */
static bool why_above(const struct nupp_why_item *it, const struct nupp_abort_row *rows, size_t n, size_t r, int line,
		      const struct why_line *ln, size_t nl)
{
	size_t k, fl, ofl;
	int other;

	if (line >= it->first - 1 || it->first - line > WHY_MAX_ABOVE || !why_loc(rows[r].location, &fl, &other))
		return false;
	for (k = 0; k < n; k++)
		if (k != r && why_loc(rows[k].location, &ofl, &other) && other > line && other < it->first - 1 &&
		    why_same_file(rows[k].location, ofl, rows[r].location, fl))
			return false;
	return !why_sampled_between(ln, nl, it->file, line, it->first);
}

/* Joins every abort row to the items it explains; the rest go to w->unmatched. */
static int why_join(struct nupp_why *w, const struct nupp_profile *p, struct nupp_strtab *callees,
		    const struct why_line *ln, size_t nl)
{
	size_t r, i;

	w->unmatched = calloc(p->aborts.n ? p->aborts.n : 1, sizeof(*w->unmatched));
	if (!w->unmatched)
		return -ENOMEM;
	for (r = 0; r < p->aborts.n; r++) {
		const struct nupp_abort_row *a = &p->aborts.rows[r];
		size_t fl = 0, bl;
		int line = 0, klen = 0;
		bool has_line = why_loc(a->location, &fl, &line), joined = false;
		const char *b;
		char key[512];

		if (!has_line)
			fl = strlen(a->location);
		b = why_base(a->location, fl, &bl);
		if (has_line)
			klen = snprintf(key, sizeof(key), "%.*s:%d", (int)bl, b, line);
		for (i = 0; i < w->n; i++) {
			struct nupp_why_item *it = &w->items[i];
			bool same = why_same_file(a->location, fl, it->file, strlen(it->file));
			int how = -1;

			if (!w->opts.lines)
				how = same ? NUPP_WHY_FILE : -1;
			else if (same && has_line && line >= it->first - 1 && line <= it->last + 1)
				how = NUPP_WHY_WITHIN;
			else if (klen > 0 && (size_t)klen < sizeof(key) &&
				 nupp_strtab_get(&callees[i], key, (size_t)klen, false) >= 0)
				how = NUPP_WHY_CALLEE;
			else if (same && has_line && why_above(it, p->aborts.rows, p->aborts.n, r, line, ln, nl))
				how = NUPP_WHY_ABOVE;
			if (how < 0)
				continue;
			if (why_attach(it, a, (enum nupp_why_join)how))
				return -ENOMEM;
			joined = true;
		}
		if (!joined)
			w->unmatched[w->nunmatched++] = a;
	}
	for (i = 0; i < w->n; i++)
		qsort(w->items[i].aborts, w->items[i].naborts, sizeof(*w->items[i].aborts), why_cmp_aborts);
	return 0;
}

/* Frees a result. */
void nupp_why_free(struct nupp_why *w)
{
	size_t i;

	if (!w)
		return;
	for (i = 0; i < w->n; i++) {
		free(w->items[i].what);
		free(w->items[i].file);
		free(w->items[i].aborts);
	}
	free(w->items);
	free(w->unmatched);
	free(w);
}

/* Builds the explanation of p. */
int nupp_why_compute(const struct nupp_profile *p, const struct nupp_why_opts *opts, struct nupp_why **out)
{
	struct why_frame fr[WHY_MAX_FRAMES];
	struct nupp_strtab units = { 0 }, *callees = NULL;
	struct why_unit *u = NULL;
	struct why_line *ln = NULL;
	struct nupp_why *w;
	size_t r, i, ucap = 0;
	int err = -ENOMEM, n, k, m;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->opts.sz = sizeof(w->opts);
	w->opts.min_share = WHY_DEFAULT_MIN_SHARE;
	w->opts.top = WHY_DEFAULT_TOP;
	if (opts) {
		if (opts->min_share > 0)
			w->opts.min_share = opts->min_share;
		if (opts->top > 0)
			w->opts.top = opts->top;
		w->opts.lines = opts->lines;
	}
	w->aborts_counted = p->meta.aborts;
	w->total_aborts = p->aborts.total_aborts;
	w->blacklisted = p->aborts.blacklisted;

	/* Self counts per line (lines mode) or per function, by innermost Lua frame. */
	for (r = 0; r < p->samples.n; r++) {
		const struct nupp_sample_row *row = &p->samples.rows[r];
		long idx;

		w->samples += row->count;
		n = why_frames(row->stack, fr, WHY_MAX_FRAMES);
		k = why_innermost(fr, n, w->opts.lines);
		if (k < 0)
			continue;
		for (m = w->opts.lines ? 0 : k; m <= k; m++) {
			if (!fr[m].lua || (w->opts.lines && !fr[m].line))
				continue;
			/* A line is keyed with its callers (the stack up to it): the same line run
			 * from another function (a closure defined on it) is another unit. */
			idx = w->opts.lines ? nupp_strtab_get(&units, row->stack, (size_t)(fr[m].s + fr[m].len - row->stack), true)
					    : nupp_strtab_get(&units, fr[m].s, fr[m].len, true);
			if (idx < 0)
				goto out;
			if ((size_t)idx >= ucap) {
				size_t cap = ucap ? ucap * 2 : 256;
				struct why_unit *nu = realloc(u, cap * sizeof(*nu));

				if (!nu)
					goto out;
				memset(nu + ucap, 0, (cap - ucap) * sizeof(*nu));
				u = nu;
				ucap = cap;
			}
			if (m == k)
				why_add(&u[idx], row);
			else
				u[idx].call = true;
		}
	}
	w->items = calloc(units.n ? units.n : 1, sizeof(*w->items));
	if (!w->items)
		goto out;
	if (w->opts.lines) {
		ln = calloc(units.n ? units.n : 1, sizeof(*ln));
		if (!ln)
			goto out;
		for (i = 0; i < units.n; i++) {
			const struct why_frame *last;

			n = why_frames(units.keys[i], fr, WHY_MAX_FRAMES);
			last = &fr[n - 1];
			ln[i].parent = units.keys[i];
			ln[i].parentlen = n > 1 ? (size_t)(last->s - units.keys[i] - 1) : 0;
			ln[i].file = last->s;
			ln[i].filelen = last->modlen;
			ln[i].line = last->line;
			ln[i].u = u[i];
		}
		if (why_blocks(w, ln, units.n) || why_coalesce(w))
			goto out;
	} else {
		for (i = 0; i < units.n; i++) {
			struct nupp_why_item *it = &w->items[w->n++];

			why_frames(units.keys[i], fr, 1);
			it->what = strdup(units.keys[i]);
			it->file = strndup(units.keys[i], fr[0].modlen);
			if (!it->what || !it->file)
				goto out;
			why_item_counts(it, &u[i]);
		}
	}
	why_keep(w);
	callees = calloc(w->n ? w->n : 1, sizeof(*callees));
	if (!callees || why_inclusive(w, p, callees) || why_join(w, p, callees, ln, ln ? units.n : 0))
		goto out;
	err = 0;
	*out = w;
out:
	for (i = 0; callees && i < w->n; i++)
		nupp_strtab_free(&callees[i]);
	free(callees);
	nupp_strtab_free(&units);
	free(u);
	free(ln);
	if (err)
		nupp_why_free(w);
	return err;
}

/* -- Writers ------------------------------------------------------------------- */

/* Percent of part in whole (0 when whole is 0). */
static double why_pct(__u64 part, __u64 whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0;
}

/* One abort row as text: "NYI: bytecode FNEW at f.lua:12, blacklisted". */
static void why_text_abort(FILE *f, const char *lead, const struct nupp_abort_row *a)
{
	fprintf(f, "%s%s at %s", lead, a->reason, a->location[0] ? a->location : "(no location)");
	if (a->severity == NUPP_SEV_BLACKLIST)
		fprintf(f, ", blacklisted");
	if (a->severity == NUPP_SEV_BLACKLIST && a->count > 1)
		fprintf(f, " (%llu times)", (unsigned long long)a->count);
	else if (a->severity != NUPP_SEV_BLACKLIST)
		fprintf(f, " (%llu abort%s%s)", (unsigned long long)a->count, a->count == 1 ? "" : "s",
			a->severity == NUPP_SEV_INFO ? ", benign" : "");
	if (a->zone_path && a->zone_path[0])
		fprintf(f, " in zone %s", a->zone_path);
	fputc('\n', f);
}

/* Writes the explanation as text. */
int nupp_why_write_text(const struct nupp_why *w, FILE *f)
{
	bool file_join = false;
	size_t i, j;

	if (!w->n) {
		fprintf(f, "nothing to explain: no code ran interpreted for %.1f %% or more of the %llu samples",
			w->opts.min_share, (unsigned long long)w->samples);
		if (w->aborts_counted)
			fprintf(f, " (%llu trace abort%s, %llu blacklisted)", (unsigned long long)w->total_aborts,
				w->total_aborts == 1 ? "" : "s", (unsigned long long)w->blacklisted);
		fputc('\n', f);
	} else {
		fprintf(f, "Hot code that ran interpreted (%llu samples", (unsigned long long)w->samples);
		if (w->aborts_counted)
			fprintf(f, "; %llu trace abort%s, %llu blacklisted", (unsigned long long)w->total_aborts,
				w->total_aborts == 1 ? "" : "s", (unsigned long long)w->blacklisted);
		fprintf(f, "):\n");
	}
	for (i = 0; i < w->n; i++) {
		const struct nupp_why_item *it = &w->items[i];

		fprintf(f, "\n%zu. %s %s took %.1f %% of the samples", i + 1, w->opts.lines ? "the code at" : "the function",
			it->what, why_pct(it->samples, w->samples));
		if (it->inclusive > it->samples)
			fprintf(f, " (%.1f %% with what it calls)", why_pct(it->inclusive, w->samples));
		fprintf(f, ", %.0f %% of its Lua time interpreted\n", why_pct(it->interpreted, it->interpreted + it->compiled));
		fprintf(f, "   its samples: %.1f %% interpreted, %.1f %% compiled, %.1f %% C, %.1f %% GC, %.1f %% JIT compiler\n",
			why_pct(it->interpreted, it->samples), why_pct(it->compiled, it->samples),
			why_pct(it->ccode, it->samples), why_pct(it->collecting, it->samples),
			why_pct(it->compiling, it->samples));
		for (j = 0; j < it->naborts; j++) {
			const struct nupp_why_abort *a = &it->aborts[j];

			why_text_abort(f, a->join == NUPP_WHY_WITHIN   ? "   why: "
					  : a->join == NUPP_WHY_CALLEE ? "   why (in code it calls): "
					  : a->join == NUPP_WHY_ABOVE  ? "   why (above it, where its function or loop may start): "
								       : "   in the same file: ",
				       a->row);
			file_join |= a->join == NUPP_WHY_FILE;
		}
		if (!it->naborts)
			fprintf(f, "   %s\n", w->aborts_counted
						  ? "no trace abort recorded there: the JIT may be off for it (jit.off), it may "
						    "be too cold to be recorded, or it was blacklisted before the recording began"
						  : "trace aborts were not counted (recorded with --no-aborts)");
	}
	if (w->nunmatched) {
		fprintf(f, "\n%s:\n", w->n ? "Trace aborts not joined to the code above" : "Trace aborts recorded");
		for (i = 0; i < w->nunmatched; i++)
			why_text_abort(f, "   ", w->unmatched[i]);
	}
	if (file_join)
		fprintf(f, "\nThis profile names functions, not lines: aborts are joined by file. Record with --lines "
			   "to join them by line.\n");
	return ferror(f) ? -EIO : 0;
}

/* An abort row as a JSON object. */
static json_t *why_json_abort(const struct nupp_abort_row *a, const char *join)
{
	json_t *o = json_pack("{s:s, s:o, s:o, s:I, s:o}", "severity", nupp_severity_name(a->severity), "reason",
			      nupp_json_name(a->reason), "location", nupp_json_name(a->location), "count",
			      (json_int_t)a->count, "zonePath", nupp_json_name(a->zone_path));

	if (o && join && json_object_set_new(o, "join", json_string(join))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Writes the explanation as JSON. */
int nupp_why_write_json(const struct nupp_why *w, FILE *f)
{
	static const char *const joins[] = { "within", "callee", "above", "file" };
	json_t *items = json_array(), *unm = json_array(), *doc;
	size_t i, j;
	int err = 0;

	for (i = 0; items && i < w->n && !err; i++) {
		const struct nupp_why_item *it = &w->items[i];
		json_t *ab = json_array(), *o;

		for (j = 0; ab && j < it->naborts; j++)
			if (json_array_append_new(ab, why_json_abort(it->aborts[j].row, joins[it->aborts[j].join])))
				err = -ENOMEM;
		o = json_pack("{s:o, s:o, s:i, s:i, s:I, s:f, s:I, s:f, s:f, s:{s:I, s:I, s:I, s:I, s:I}, s:o}", "what",
			      nupp_json_name(it->what), "file", nupp_json_name(it->file), "first", it->first, "last", it->last, "samples",
			      (json_int_t)it->samples, "share", why_pct(it->samples, w->samples), "inclusive",
			      (json_int_t)it->inclusive, "inclusiveShare", why_pct(it->inclusive, w->samples),
			      "interpretedOfLua", why_pct(it->interpreted, it->interpreted + it->compiled), "states",
			      "compiled", (json_int_t)it->compiled, "interpreted", (json_int_t)it->interpreted, "cCode",
			      (json_int_t)it->ccode, "collecting", (json_int_t)it->collecting, "compiling",
			      (json_int_t)it->compiling, "aborts", ab ? ab : json_null());
		if (!o || json_array_append_new(items, o))
			err = -ENOMEM;
	}
	for (i = 0; unm && i < w->nunmatched && !err; i++)
		if (json_array_append_new(unm, why_json_abort(w->unmatched[i], NULL)))
			err = -ENOMEM;
	if (err || !items || !unm) {
		json_decref(items);
		json_decref(unm);
		return -ENOMEM;
	}
	doc = json_pack("{s:i, s:I, s:b, s:f, s:b, s:I, s:I, s:b, s:o, s:o}", "version", 1, "samples",
			(json_int_t)w->samples, "lines", w->opts.lines, "minShare", w->opts.min_share, "abortsCounted",
			w->aborts_counted, "totalAborts", (json_int_t)w->total_aborts, "blacklisted",
			(json_int_t)w->blacklisted, "nothingToExplain", w->n == 0, "items", items, "unmatched", unm);
	return nupp_json_dump(doc, f);
}
