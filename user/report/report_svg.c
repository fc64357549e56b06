/* The flame graph: a self-contained SVG (no external script, font or network) whose
 * frames are coloured by how their samples split between VM states, with JIT trace
 * aborts marked on the frames of their functions; hover, click-zoom and search. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "core/nupp_internal.h"
#include "report_internal.h"
#include "report_svg_js.h" /* nupp_svg_js: user/report/report_svg.js as a C string */

#define SVG_WIDTH 1200
#define SVG_PAD 10
#define SVG_FH 16       /* frame height */
#define SVG_FONT 12     /* font size of frame labels */
#define SVG_TOP 86      /* title, subtitle, legend and search above the frames */
#define SVG_BOTTOM 34   /* the details line below */
#define SVG_SEARCH "#e600e6"

/* Hue, saturation and lightness of each VM state's colour, then "unknown". */
static const double svg_hsl[NUPP_RS__MAX + 1][3] = {
	{ 125, 0.48, 0.52 }, /* compiled: green */
	{ 8, 0.78, 0.58 },   /* interpreted: red-orange, to stand out */
	{ 212, 0.58, 0.62 }, /* C code: blue */
	{ 282, 0.42, 0.64 }, /* GC: purple */
	{ 44, 0.88, 0.55 },  /* JIT compiler: amber */
	{ 0, 0.0, 0.72 },    /* unknown (collapsed input): grey */
};

/* One frame drawn: a tree node, or the merge of its narrow siblings (node < 0). */
struct svg_frame {
	long node;
	const char *name; /* display name (malloc'ed) */
	__u64 off, n, self;
	__u64 state[NUPP_RS__MAX];
	int depth;
	int abort; /* index into the abort texts, -1 */
};

struct svg {
	const struct nupp_profile *p;
	struct nupp_rtree t;
	struct svg_frame *fr;
	size_t n, cap;
	int maxdepth;
	double minw, scale; /* pixels per sample */
	bool inverted;
	char **texts;       /* the distinct abort texts, as A[] */
	size_t ntexts;
	int *frame_abort;   /* per tree frame id: index into texts, -1 */
	const struct nupp_profile *base; /* a differential graph against this, or NULL */
	double *delta;      /* per drawn frame: change of its share from base, in points */
	double maxdelta;    /* the largest |delta| */
};

/* -- Text --------------------------------------------------------------------------- */

/* Writes s as XML character data or attribute value. */
static void svg_xml(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		default:
			fputc(*s, f);
		}
	}
}

/* Writes s as a JavaScript string literal that cannot end the CDATA section. */
static void svg_js_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20 || c == '<' || c == '>' || c == '&')
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* The label that fits w pixels, as the script's fit() cuts it (in UTF-16 units, as
 * JavaScript counts): into buf. */
static void svg_fit(const char *name, double w, char *buf, size_t size)
{
	long n = (long)floor((w - 6) / (SVG_FONT * 0.59)), units = 0;
	const unsigned char *p;

	buf[0] = 0;
	if (n < 3)
		return;
	for (p = (const unsigned char *)name; *p; p++)
		if ((*p & 0xC0) != 0x80)
			units += *p >= 0xF0 ? 2 : 1;
	if (units <= n) {
		snprintf(buf, size, "%s", name);
		return;
	}
	units = 0;
	for (p = (const unsigned char *)name; *p;) {
		int u = *p >= 0xF0 ? 2 : 1, len = 1;

		while ((p[len] & 0xC0) == 0x80)
			len++;
		if (units + u > n - 2)
			break;
		units += u;
		p += len;
	}
	snprintf(buf, size, "%.*s..", (int)((const char *)p - name), name);
}

/* "1,234,567". */
static const char *svg_num(__u64 v, char *buf, size_t size)
{
	char tmp[32];
	int len = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)v), i, o = 0;

	for (i = 0; i < len && (size_t)o + 2 < size; i++) {
		if (i && (len - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = tmp[i];
	}
	buf[o] = 0;
	return buf;
}

/* -- Colours ------------------------------------------------------------------------- */

/* The fill of a frame in state k (NUPP_RS__MAX: unknown), its lightness varied by name
 * so that neighbours stay apart. */
static void svg_color(int k, const char *name, char *buf, size_t size)
{
	double h = svg_hsl[k][0], s = svg_hsl[k][1], l = svg_hsl[k][2], c, x, m, r, g, b;
	unsigned hash = 2166136261u;

	for (; *name; name++)
		hash = (hash ^ (unsigned char)*name) * 16777619u;
	l += ((double)(hash % 1000) / 1000.0 - 0.5) * 0.12;
	h += ((double)((hash / 1000) % 1000) / 1000.0 - 0.5) * 10;
	if (h < 0)
		h += 360;
	c = (1 - fabs(2 * l - 1)) * s;
	x = c * (1 - fabs(fmod(h / 60, 2) - 1));
	m = l - c / 2;
	if (h < 60)
		r = c, g = x, b = 0;
	else if (h < 120)
		r = x, g = c, b = 0;
	else if (h < 180)
		r = 0, g = c, b = x;
	else if (h < 240)
		r = 0, g = x, b = c;
	else if (h < 300)
		r = x, g = 0, b = c;
	else
		r = c, g = 0, b = x;
	snprintf(buf, size, "rgb(%d,%d,%d)", (int)lround((r + m) * 255), (int)lround((g + m) * 255),
		 (int)lround((b + m) * 255));
}

/* The state most samples of a frame were in (NUPP_RS__MAX if mostly unknown). */
static int svg_dominant(const struct svg_frame *fr)
{
	__u64 best = 0, known = 0;
	int k, kb = NUPP_RS__MAX;

	for (k = 0; k < NUPP_RS__MAX; k++) {
		known += fr->state[k];
		if (fr->state[k] > best) {
			best = fr->state[k];
			kb = k;
		}
	}
	return fr->n - known > best ? NUPP_RS__MAX : kb;
}

/* -- Abort marks ----------------------------------------------------------------------- */

/* The file of a location "file:line" (length), and its line in *line (0 if none). */
static size_t svg_loc_file(const char *loc, int *line)
{
	const char *c = strrchr(loc, ':');

	*line = c ? atoi(c + 1) : 0;
	return c ? (size_t)(c - loc) : strlen(loc);
}

/* The basename of file[0..len) (abort locations name a chunk by its basename, as
 * jit.p's default frames do), its length in *blen. */
static const char *svg_base(const char *file, size_t len, size_t *blen)
{
	const char *b;

	for (b = file + len; b > file && b[-1] != '/'; b--)
		;
	*blen = (size_t)(file + len - b);
	return b;
}

/* True if abort location loc (file part flen bytes) is in the chunk of file. */
static bool svg_same_file(const char *loc, size_t flen, const char *file)
{
	size_t blen;
	const char *b = svg_base(file, strlen(file), &blen);

	return blen == flen && strncmp(loc, b, blen) == 0;
}

/* For each abort row, the narrowest function of the frame table whose lines hold the
 * row's line strictly inside (in[2i], in[2i+1]: its first and last line; -1 if none).
 * The row's bytecode is in that function or one nested in it that holds the line: a
 * function's code is never on the lines strictly inside a function nested in it. */
static void svg_abort_funcs(const struct nupp_abort_set *a, const struct nupp_frame_table *t, int *in)
{
	size_t i, k;

	for (i = 0; i < a->n; i++) {
		int line;
		size_t flen = svg_loc_file(a->rows[i].location, &line);

		in[2 * i] = in[2 * i + 1] = -1;
		for (k = 0; k < t->n; k++) {
			const struct nupp_frame_info *e = &t->v[k];

			if (e->first_line >= line || e->last_line <= line || !svg_same_file(a->rows[i].location, flen, e->file))
				continue;
			if (in[2 * i] < 0 || e->last_line - e->first_line < in[2 * i + 1] - in[2 * i])
				in[2 * i] = e->first_line, in[2 * i + 1] = e->last_line;
		}
	}
}

/* True if abort row r (file part flen bytes, line line; in: svg_abort_funcs's bounds)
 * may have aborted in the function of a frame (fi: its entries in the frame table): the
 * function holds the line and is not an outer one of the narrowest function holding it
 * strictly inside. A line on the first or last line of a nested function (its FNEW is
 * on its last line) may be either's: both are marked. */
static bool svg_abort_in(const struct nupp_frame_table *t, const struct nupp_frame_info *fi,
			 const struct nupp_abort_row *r, size_t flen, int line, const int *in)
{
	for (; fi; fi = nupp_frame_table_next(t, fi))
		if (fi->first_line <= line && line <= fi->last_line &&
		    (in[0] < 0 || (fi->first_line >= in[0] && fi->last_line <= in[1])) &&
		    svg_same_file(r->location, flen, fi->file))
			return true;
	return false;
}

/* Matches abort rows to frames: in a profile of lines, the frame of the same file and
 * line; else, for a frame of the frame table, the frame whose function holds the
 * location's line (the innermost of those sampled, svg_abort_in); else (a profile
 * written without the table) the frames of the same file. Builds one text per frame. */
static int svg_aborts(struct svg *sv)
{
	const struct nupp_abort_set *a = &sv->p->aborts;
	const struct nupp_frame_table *ft = &sv->p->samples.frames;
	const struct nupp_rframes *fr = &sv->t.frames;
	struct nupp_buf *bufs;
	int *in = NULL;
	size_t i, j;
	int err = 0;

	sv->frame_abort = malloc((fr->n ? fr->n : 1) * sizeof(int));
	bufs = calloc(fr->n ? fr->n : 1, sizeof(*bufs));
	if (!sv->p->meta.lines && ft->n && a->n)
		in = malloc(2 * a->n * sizeof(*in));
	if (!sv->frame_abort || !bufs || (!sv->p->meta.lines && ft->n && a->n && !in)) {
		free(bufs);
		free(in);
		return -ENOMEM;
	}
	if (in)
		svg_abort_funcs(a, ft, in);
	for (j = 0; j < fr->n; j++) {
		const char *nm = fr->names[j], *base;
		size_t ml, nlen = strlen(nm), blen;
		int fline = nupp_rtext_frame_line(nm, nlen);
		const struct nupp_frame_info *fi;

		sv->frame_abort[j] = -1;
		if (!a->n || !nupp_rtext_frame_split(nm, nlen, &ml))
			continue;
		base = svg_base(nm, ml, &blen);
		fi = in ? nupp_frame_table_find(ft, nm, nlen) : NULL;
		for (i = 0; i < a->n; i++) {
			const struct nupp_abort_row *r = &a->rows[i];
			int line;
			size_t flen = svg_loc_file(r->location, &line);
			char cnt[32];

			if (fi ? !svg_abort_in(ft, fi, r, flen, line, &in[2 * i])
			       : flen != blen || strncmp(r->location, base, blen) != 0)
				continue;
			if (sv->p->meta.lines && line != fline)
				continue;
			if (bufs[j].len > 600) {
				nupp_buf_add(&bufs[j], "\n...", 4);
				break;
			}
			if (bufs[j].len)
				nupp_buf_addc(&bufs[j], '\n');
			svg_num(r->count, cnt, sizeof(cnt));
			nupp_buf_add(&bufs[j], cnt, strlen(cnt));
			nupp_buf_add(&bufs[j], "x ", 2);
			nupp_rtext_display(&bufs[j], r->reason, strlen(r->reason));
			nupp_buf_add(&bufs[j], " at ", 4);
			nupp_rtext_display(&bufs[j], r->location, strlen(r->location));
			nupp_buf_add(&bufs[j], " (", 2);
			nupp_buf_add(&bufs[j], nupp_severity_name(r->severity), strlen(nupp_severity_name(r->severity)));
			nupp_buf_addc(&bufs[j], ')');
		}
		if (bufs[j].len && !bufs[j].err && !nupp_buf_addc(&bufs[j], 0)) {
			char **nt = realloc(sv->texts, (sv->ntexts + 1) * sizeof(*nt));

			if (!nt) {
				err = -ENOMEM;
				break;
			}
			sv->texts = nt;
			sv->texts[sv->ntexts] = bufs[j].p;
			bufs[j].p = NULL;
			sv->frame_abort[j] = (int)sv->ntexts++;
		}
		if (bufs[j].err)
			err = -ENOMEM;
	}
	for (j = 0; j < fr->n; j++)
		free(bufs[j].p);
	free(bufs);
	free(in);
	return err;
}

/* -- Layout ----------------------------------------------------------------------------- */

/* Adds a drawn frame. */
static struct svg_frame *svg_add(struct svg *sv)
{
	if (sv->n == sv->cap) {
		size_t cap = sv->cap ? sv->cap * 2 : 1024;
		struct svg_frame *nf = realloc(sv->fr, cap * sizeof(*nf));

		if (!nf)
			return NULL;
		sv->fr = nf;
		sv->cap = cap;
	}
	memset(&sv->fr[sv->n], 0, sizeof(sv->fr[0]));
	sv->fr[sv->n].abort = -1;
	return &sv->fr[sv->n++];
}

/* Lays out node (drawn at offset off and depth) and, below it, its children wide
 * enough to see, in name order, then one merge of the narrower ones. Iterative: a
 * stack of (node, offset, depth). */
static int svg_layout(struct svg *sv)
{
	struct item {
		long node;
		__u64 off;
		int depth;
	} *st = malloc(sizeof(*st) * 1024);
	size_t sp = 0, scap = 1024;
	int err = 0;

	if (!st)
		return -ENOMEM;
	st[sp++] = (struct item){ 0, 0, 0 };
	while (sp && !err) {
		struct item it = st[--sp];
		const struct nupp_rnode *nd = &sv->t.nodes[it.node];
		struct svg_frame *f = svg_add(sv);
		__u64 off = it.off, merged = 0, mstate[NUPP_RS__MAX] = { 0 };
		size_t nmerged = 0, first = sp;
		long c;
		int k;

		if (!f) {
			err = -ENOMEM;
			break;
		}
		f->node = it.node;
		f->off = it.off;
		f->n = nd->total;
		f->self = nd->self;
		f->depth = it.depth;
		memcpy(f->state, nd->state, sizeof(f->state));
		f->name = nd->frame < 0 ? strdup("all") : nupp_rtext_display_dup(sv->t.frames.names[nd->frame]);
		if (!f->name) {
			err = -ENOMEM;
			break;
		}
		if (nd->frame >= 0 && sv->frame_abort)
			f->abort = sv->frame_abort[nd->frame];
		if (it.depth > sv->maxdepth)
			sv->maxdepth = it.depth;
		for (c = nd->child; c >= 0; c = sv->t.nodes[c].next) {
			const struct nupp_rnode *ch = &sv->t.nodes[c];

			if ((double)ch->total * sv->scale < sv->minw) {
				merged += ch->total;
				nmerged++;
				for (k = 0; k < NUPP_RS__MAX; k++)
					mstate[k] += ch->state[k];
				continue;
			}
			if (sp == scap) {
				struct item *ns = realloc(st, sizeof(*st) * scap * 2);

				if (!ns) {
					err = -ENOMEM;
					break;
				}
				st = ns;
				scap *= 2;
			}
			st[sp++] = (struct item){ c, off, it.depth + 1 };
			off += ch->total;
		}
		/* Children are popped in name order: reverse the ones just pushed. */
		for (size_t a = first, b = sp; b > a + 1; a++, b--) {
			struct item t = st[a];

			st[a] = st[b - 1];
			st[b - 1] = t;
		}
		if (nmerged && (double)merged * sv->scale >= sv->minw && !err) {
			char name[64];
			struct svg_frame *m = svg_add(sv);

			if (!m) {
				err = -ENOMEM;
				break;
			}
			snprintf(name, sizeof(name), "\u2026 %zu narrow frames", nmerged);
			m->node = -1;
			m->name = strdup(name);
			m->off = off;
			m->n = merged;
			m->depth = it.depth + 1;
			memcpy(m->state, mstate, sizeof(mstate));
			if (!m->name)
				err = -ENOMEM;
			if (m->depth > sv->maxdepth)
				sv->maxdepth = m->depth;
		}
	}
	free(st);
	return err;
}

/* -- Differential graphs -------------------------------------------------------------- */

/* The change of each drawn frame's share of the samples from the same call path in
 * sv->base (0 for merged frames), in percentage points. */
static int svg_diff(struct svg *sv)
{
	struct nupp_rtree bt = { 0 };
	long *path = NULL;
	size_t i, cap = 0;
	int err = nupp_rtree_build(&bt, &sv->base->samples);

	sv->delta = calloc(sv->n ? sv->n : 1, sizeof(*sv->delta));
	if (err || !sv->delta) {
		nupp_rtree_free(&bt);
		return -ENOMEM;
	}
	for (i = 0; i < sv->n; i++) {
		const struct svg_frame *fr = &sv->fr[i];
		size_t depth = 0;
		long n, b = 0;
		double now, before = 0;

		if (fr->node < 0)
			continue;
		for (n = fr->node; n > 0; n = sv->t.nodes[n].parent) {
			if (depth == cap) {
				long *np = realloc(path, (cap = cap ? cap * 2 : 64) * sizeof(*np));

				if (!np) {
					err = -ENOMEM;
					goto out;
				}
				path = np;
			}
			path[depth++] = n;
		}
		/* Walks the same frame names down BASE's tree from its root. */
		while (depth && b >= 0) {
			const char *name = sv->t.frames.names[sv->t.nodes[path[--depth]].frame];
			long c;

			for (c = bt.nodes[b].child; c >= 0 && strcmp(bt.frames.names[bt.nodes[c].frame], name); c = bt.nodes[c].next)
				;
			b = c;
		}
		if (b >= 0 && bt.total)
			before = 100.0 * (double)bt.nodes[b].total / (double)bt.total;
		now = sv->t.total ? 100.0 * (double)fr->n / (double)sv->t.total : 0;
		sv->delta[i] = now - before;
		if (fabs(sv->delta[i]) > sv->maxdelta)
			sv->maxdelta = fabs(sv->delta[i]);
	}
out:
	free(path);
	nupp_rtree_free(&bt);
	return err;
}

/* The fill of a frame whose share changed by delta points: red (grew) or blue (shrank),
 * stronger with the change, light grey when it did not move. */
static void svg_diff_color(const struct svg *sv, double delta, char *buf, size_t size)
{
	double a = sv->maxdelta > 0 ? fabs(delta) / sv->maxdelta : 0;
	int light = (int)lround(235 * (1 - a));

	if (fabs(delta) < 0.005)
		snprintf(buf, size, "rgb(235,235,235)");
	else if (delta > 0)
		snprintf(buf, size, "rgb(255,%d,%d)", light, light);
	else
		snprintf(buf, size, "rgb(%d,%d,255)", light, light);
}

/* -- Writing ---------------------------------------------------------------------------- */

/* The subtitle: rate, duration, samples, lost (and the filters applied). */
static void svg_subtitle(const struct nupp_profile *p, char *buf, size_t size)
{
	const struct nupp_sample_set *s = &p->samples;
	char n[32], l[32], reasons[256] = "";
	__u64 lost = 0;
	int i, len = 0;

	for (i = 0; i < NUPP_LOST__MAX; i++) {
		lost += s->lost[i];
		if (s->lost[i])
			snprintf(reasons + strlen(reasons), sizeof(reasons) - strlen(reasons), "%s%s %llu",
				 reasons[0] ? ", " : "", nupp_lost_name(i), (unsigned long long)s->lost[i]);
	}
	if (p->meta.frequency_hz)
		len += snprintf(buf + len, size - len, "%d Hz, %.1f s, ", p->meta.frequency_hz, p->meta.duration_sec);
	len += snprintf(buf + len, size - (size_t)len, "%s samples, %s lost%s%s%s", svg_num(s->samples, n, sizeof(n)),
			svg_num(lost, l, sizeof(l)), reasons[0] ? " (" : "", reasons, reasons[0] ? ")" : "");
	if (p->meta.zone_filter && (size_t)len < size)
		len += snprintf(buf + len, size - (size_t)len, ", zone %s", p->meta.zone_filter);
	if (p->meta.root && (size_t)len < size)
		snprintf(buf + len, size - (size_t)len, ", root %s", p->meta.root);
}

/* The <style> and the fixed parts above and below the frames. */
static void svg_head(struct svg *sv, FILE *f, int height, const char *title)
{
	const struct nupp_profile *p = sv->p;
	char *sub, raw[1024], c[64], pcts[32];
	int k, x;

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		   "<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" onload=\"init(evt)\" "
		   "xmlns=\"http://www.w3.org/2000/svg\">\n",
		SVG_WIDTH, height, SVG_WIDTH, height);
	if (sv->base)
		fprintf(f, "<!-- Differential flame graph by nupp-bpf %s: widths from NEW; each frame is red when "
			   "its share of the samples grew from BASE, blue when it shrank. -->\n",
			nupp_version());
	else
		fprintf(f, "<!-- Flame graph by nupp-bpf %s. Frames are coloured by the VM state most of their "
			   "samples were in; the strip at a frame's foot shows the split. -->\n",
			nupp_version());
	fprintf(f, "<style>\n"
		   "text { font-family: Verdana, \"DejaVu Sans\", sans-serif; font-size: %dpx; fill: #000; }\n"
		   "#title { font-size: 17px; text-anchor: middle; }\n"
		   "#subtitle { text-anchor: middle; fill: #444; }\n"
		   "#frames g { cursor: pointer; }\n"
		   "#frames g:hover rect:first-of-type { stroke: #000; stroke-width: 0.5; }\n"
		   "#frames g.parent { opacity: 0.5; }\n"
		   "#frames text { pointer-events: none; }\n"
		   ".btn { cursor: pointer; fill: #333; text-decoration: underline; }\n"
		   "#matched { text-anchor: end; }\n"
		   "path.a { fill: #000; }\n"
		   "</style>\n",
		SVG_FONT);
	fputs("<defs><linearGradient id=\"bg\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\"><stop offset=\"5%\" "
	      "stop-color=\"#f8f8f8\"/><stop offset=\"95%\" stop-color=\"#e8e8ee\"/></linearGradient></defs>\n",
	      f);
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"url(#bg)\"/>\n", SVG_WIDTH, height);
	fprintf(f, "<text id=\"title\" x=\"%d\" y=\"24\">", SVG_WIDTH / 2);
	sub = nupp_rtext_display_dup(title);
	svg_xml(f, sub ? sub : "");
	free(sub);
	fputs("</text>\n", f);
	svg_subtitle(p, raw, sizeof(raw));
	fprintf(f, "<text id=\"subtitle\" x=\"%d\" y=\"44\">", SVG_WIDTH / 2);
	sub = nupp_rtext_display_dup(raw);
	svg_xml(f, sub ? sub : "");
	free(sub);
	fputs("</text>\n", f);
	/* The legend: each state's colour and its share of all samples (for a differential
	 * graph: what red and blue mean). */
	fputs("<g id=\"legend\">", f);
	if (sv->base) {
		svg_diff_color(sv, sv->maxdelta, c, sizeof(c));
		fprintf(f, "<rect x=\"170\" y=\"58\" width=\"14\" height=\"14\" fill=\"%s\"/><text x=\"189\" y=\"70\">"
			   "share of the samples grew</text>", c);
		svg_diff_color(sv, -sv->maxdelta, c, sizeof(c));
		fprintf(f, "<rect x=\"420\" y=\"58\" width=\"14\" height=\"14\" fill=\"%s\"/><text x=\"439\" y=\"70\">"
			   "shrank, from BASE (full colour: %.1f points); widths from NEW</text>", c, sv->maxdelta);
	}
	for (k = 0, x = 170; !sv->base && k < NUPP_RS__MAX; k++, x += 150) {
		__u64 n = sv->t.nodes[0].state[k];

		svg_color(k, "", c, sizeof(c));
		snprintf(pcts, sizeof(pcts), "%.1f%%", sv->t.total ? 100.0 * (double)n / (double)sv->t.total : 0.0);
		fprintf(f, "<g data-state=\"%s\"><rect x=\"%d\" y=\"58\" width=\"14\" height=\"14\" fill=\"%s\"/>"
			   "<text x=\"%d\" y=\"70\">%s %s</text></g>",
			nupp_rstate_key(k), x, c, x + 19, nupp_rstate_label(k), pcts);
	}
	fputs("</g>\n", f);
	fprintf(f, "<text id=\"unzoom\" class=\"btn\" x=\"%d\" y=\"70\" style=\"display:none\">Reset Zoom</text>\n",
		SVG_PAD);
	fprintf(f, "<foreignObject x=\"%d\" y=\"55\" width=\"250\" height=\"24\">"
		   "<input xmlns=\"http://www.w3.org/1999/xhtml\" id=\"searchbox\" type=\"search\" "
		   "placeholder=\"Search (Ctrl-F): regex\" style=\"width:200px;font:12px Verdana,sans-serif\"/>"
		   "</foreignObject>\n",
		SVG_WIDTH - SVG_PAD - 250);
	fprintf(f, "<text id=\"searchclear\" class=\"btn\" x=\"%d\" y=\"70\">clear</text>\n",
		SVG_WIDTH - SVG_PAD - 40);
	fprintf(f, "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n", SVG_PAD, height - 12);
	fprintf(f, "<text id=\"matched\" x=\"%d\" y=\"%d\"></text>\n", SVG_WIDTH - SVG_PAD, height - 12);
}

/* One frame: its rect, label, VM-state strip when its samples are mixed, abort mark. */
static void svg_frame_el(struct svg *sv, FILE *f, const struct svg_frame *fr)
{
	double x = SVG_PAD + (double)fr->off * sv->scale, w = (double)fr->n * sv->scale, y;
	int dom = svg_dominant(fr), k;
	char fill[64], label[1024];
	__u64 before = 0;

	y = SVG_TOP + (double)(sv->inverted ? fr->depth : sv->maxdepth - fr->depth) * SVG_FH;
	if (sv->base)
		svg_diff_color(sv, sv->delta[fr - sv->fr], fill, sizeof(fill));
	else
		svg_color(dom, fr->name, fill, sizeof(fill));
	fprintf(f, "<g class=\"%s\" data-vm=\"%s\"><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
		   "fill=\"%s\" data-fill=\"%s\" rx=\"2\"/><text x=\"%.2f\" y=\"%.1f\">",
		fr->node < 0 ? "f m" : "f", dom < NUPP_RS__MAX ? nupp_rstate_key(dom) : "unknown", x, y,
		w > 0.5 ? w - 0.5 : 0, SVG_FH - 1, fill, fill, x + 3, y + SVG_FH - 4.5);
	svg_fit(fr->name, w, label, sizeof(label));
	svg_xml(f, label);
	fputs("</text>", f);
	if (!sv->base && w >= 8 && fr->n && fr->state[dom < NUPP_RS__MAX ? dom : 0] * 200 < fr->n * 199) {
		for (k = 0; k < NUPP_RS__MAX; k++) {
			double sx = x + w * (double)before / (double)fr->n, sw = w * (double)fr->state[k] / (double)fr->n;

			before += fr->state[k];
			if (!fr->state[k])
				continue;
			svg_color(k, "", fill, sizeof(fill));
			fprintf(f, "<rect data-k=\"%d\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"3\" fill=\"%s\"/>", k,
				sx, y + SVG_FH - 4, sw > 0.5 ? sw - 0.5 : 0, fill);
		}
	}
	if (fr->abort >= 0)
		fprintf(f, "<path class=\"a\" d=\"M0 %.1f h-7 l7 7 z\" transform=\"translate(%.2f,0)\"%s/>", y,
			x + w - 0.5, w >= 8 ? "" : " style=\"display:none\"");
	fputs("</g>\n", f);
}

/* Writes the script's data: F (one entry per drawn frame, in document order), A, M. */
static void svg_data(struct svg *sv, FILE *f, int height)
{
	size_t i;
	int k;

	fputs("var F=[", f);
	for (i = 0; i < sv->n; i++) {
		const struct svg_frame *fr = &sv->fr[i];

		fputs(i ? ",\n[" : "[", f);
		svg_js_str(f, fr->name);
		fprintf(f, ",%llu,%llu,%d", (unsigned long long)fr->off, (unsigned long long)fr->n, fr->depth);
		for (k = 0; k < NUPP_RS__MAX; k++)
			fprintf(f, ",%llu", (unsigned long long)fr->state[k]);
		fprintf(f, ",%llu,%d]", (unsigned long long)fr->self, fr->abort);
	}
	fputs("];\n", f);
	if (sv->base) {
		fputs("var D=[", f);
		for (i = 0; i < sv->n; i++)
			fprintf(f, "%s%.3f", i ? "," : "", sv->delta[i]);
		fputs("];\n", f);
	}
	fputs("var A=[", f);
	for (i = 0; i < sv->ntexts; i++) {
		if (i)
			fputc(',', f);
		svg_js_str(f, sv->texts[i]);
	}
	fprintf(f, "];\nvar M={total:%llu,width:%d,pad:%d,fontsize:%d,height:%d,inverted:%s,searchColor:\"%s\","
		   "states:[",
		(unsigned long long)sv->t.total, SVG_WIDTH, SVG_PAD, SVG_FONT, height, sv->inverted ? "true" : "false",
		SVG_SEARCH);
	for (k = 0; k < NUPP_RS__MAX; k++)
		fprintf(f, "%s\"%s\"", k ? "," : "", nupp_rstate_label(k));
	fputs("]};\n", f);
}

/* Writes the flame graph of p. */
int nupp_write_svg(const struct nupp_profile *p, const struct nupp_report_opts *o, FILE *f)
{
	struct svg sv = { .p = p, .minw = o && o->min_width > 0 ? o->min_width : 0.5, .inverted = o && o->inverted };
	const char *title = o && o->title ? o->title : p->meta.target ? p->meta.target : p->meta.command;
	char tbuf[64];
	size_t i;
	int err, height;

	err = nupp_rtree_build(&sv.t, &p->samples);
	if (!err)
		err = svg_aborts(&sv);
	sv.scale = sv.t.total ? (double)(SVG_WIDTH - 2 * SVG_PAD) / (double)sv.t.total : 0;
	if (!err && sv.t.total)
		err = svg_layout(&sv);
	if (!err && o && o->sz >= offsetof(struct nupp_report_opts, diff_base) + sizeof(o->diff_base) && o->diff_base) {
		sv.base = o->diff_base;
		err = svg_diff(&sv);
	}
	if (err) {
		err = nupp_fail(-ENOMEM, "out of memory");
		goto out;
	}
	if (!title || !title[0]) {
		snprintf(tbuf, sizeof(tbuf), p->meta.npids ? "PID %d" : "Flame graph", p->meta.npids ? (int)p->meta.pids[0] : 0);
		title = tbuf;
	}
	height = SVG_TOP + (sv.n ? sv.maxdepth + 1 : 2) * SVG_FH + SVG_BOTTOM;
	svg_head(&sv, f, height, title);
	fputs("<g id=\"frames\">\n", f);
	for (i = 0; i < sv.n; i++)
		svg_frame_el(&sv, f, &sv.fr[i]);
	fputs("</g>\n", f);
	if (!sv.n)
		fprintf(f, "<text x=\"%d\" y=\"%d\" style=\"text-anchor:middle;font-size:17px\">No samples: "
			   "the target did not run Lua on a CPU while it was recorded</text>\n",
			SVG_WIDTH / 2, SVG_TOP + 20);
	fputs("<script type=\"text/ecmascript\"><![CDATA[\n", f);
	svg_data(&sv, f, height);
	fputs(nupp_svg_js, f);
	fputs("]]></script>\n</svg>\n", f);
	err = ferror(f) ? -EIO : 0;
out:
	for (i = 0; i < sv.n; i++)
		free((char *)sv.fr[i].name);
	free(sv.fr);
	for (i = 0; i < sv.ntexts; i++)
		free(sv.texts[i]);
	free(sv.texts);
	free(sv.frame_abort);
	free(sv.delta);
	nupp_rtree_free(&sv.t);
	return err;
}
