/* The nupp profile: one self-describing JSON document (jansson) with meta, samples, aborts. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "report_internal.h"

/* Sets key to a new JSON value, failing the build of the document on NULL. */
static int json_put(json_t *obj, const char *key, json_t *v)
{
	return v ? json_object_set_new(obj, key, v) : -1;
}

/* A JSON string of a name, in the lossless UTF-8 form (profile.h); NULL on ENOMEM. */
static json_t *rjson_str(const char *s)
{
	char *enc;
	json_t *v;

	if (nupp_rtext_plain(s))
		return json_string(s);
	enc = nupp_bytes_to_utf8(s);
	v = enc ? json_string(enc) : NULL;
	free(enc);
	return v;
}

/* A name, or null for NULL. */
static json_t *rjson_str_or_null(const char *s)
{
	return s ? rjson_str(s) : json_null();
}

/* qsort order of frame table entries: name, first line, last line, file. */
static int rjson_cmp_frame(const void *a, const void *b)
{
	const struct nupp_frame_info *x = *(const struct nupp_frame_info *const *)a,
				     *y = *(const struct nupp_frame_info *const *)b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	if (x->first_line != y->first_line)
		return x->first_line < y->first_line ? -1 : 1;
	if (x->last_line != y->last_line)
		return x->last_line < y->last_line ? -1 : 1;
	return strcmp(x->file, y->file);
}

/* The "frames" object: {name: [{"file", "firstLine", "lastLine"}, ...]}, names sorted,
 * each name's functions by first line. NULL on ENOMEM. */
static json_t *json_frames(const struct nupp_frame_table *t)
{
	const struct nupp_frame_info **v = malloc((t->n ? t->n : 1) * sizeof(*v));
	json_t *obj = json_object(), *arr = NULL;
	size_t i;
	int err = !v || !obj;

	for (i = 0; !err && i < t->n; i++)
		v[i] = &t->v[i];
	if (!err && t->n)
		qsort(v, t->n, sizeof(*v), rjson_cmp_frame);
	for (i = 0; !err && i < t->n; i++) {
		if (!i || strcmp(v[i]->name, v[i - 1]->name) != 0) {
			char *key = nupp_rtext_plain(v[i]->name) ? NULL : nupp_bytes_to_utf8(v[i]->name);

			arr = json_array();
			err = !arr || (!nupp_rtext_plain(v[i]->name) && !key) ||
			      json_object_set_new(obj, key ? key : v[i]->name, arr);
			free(key);
		}
		err = err || json_array_append_new(arr, json_pack("{s:o, s:i, s:i}", "file", rjson_str(v[i]->file),
								  "firstLine", v[i]->first_line, "lastLine",
								  v[i]->last_line));
	}
	free(v);
	if (err) {
		json_decref(obj);
		return NULL;
	}
	return obj;
}

/* The "meta" object. */
static json_t *json_meta(const struct nupp_profile_meta *m, const struct nupp_sample_set *s,
			 const struct nupp_abort_set *a)
{
	json_t *meta = json_object(), *pids = json_array(), *lost = json_object();
	int i, err = 0;

	if (!meta || !pids || !lost)
		goto fail;
	for (i = 0; i < m->npids; i++)
		err |= json_array_append_new(pids, json_integer(m->pids[i]));
	for (i = 0; i < NUPP_LOST__MAX; i++)
		err |= json_put(lost, nupp_lost_name(i), json_integer((json_int_t)s->lost[i]));
	err |= json_put(meta, "tool", m->tool ? rjson_str(m->tool) : json_sprintf("nupp-bpf %s", nupp_version()));
	err |= json_put(meta, "command", rjson_str(m->command ? m->command : ""));
	err |= json_put(meta, "target", rjson_str_or_null(m->target));
	err |= json_put(meta, "pids", pids);
	pids = NULL;
	err |= json_put(meta, "backend", rjson_str(m->backend ? m->backend : "bpf"));
	err |= json_put(meta, "frequencyHz", json_integer(m->frequency_hz));
	err |= json_put(meta, "intervalMs", json_real(m->frequency_hz ? 1000.0 / m->frequency_hz : 0));
	err |= json_put(meta, "depth", json_integer(m->depth));
	err |= json_put(meta, "durationSec", json_real(m->duration_sec));
	if (m->start_time > 0)
		err |= json_put(meta, "startTime", json_real(m->start_time));
	err |= json_put(meta, "samples", json_integer((json_int_t)s->samples));
	err |= json_put(meta, "hostSamples", json_integer((json_int_t)s->host_samples));
	err |= json_put(meta, "truncatedStacks", json_integer((json_int_t)s->cut_samples));
	err |= json_put(meta, "lost", lost);
	lost = NULL;
	err |= json_put(meta, "zoneFilter", rjson_str_or_null(m->zone_filter));
	err |= json_put(meta, "root", rjson_str_or_null(m->root));
	err |= json_put(meta, "aborts", json_boolean(m->aborts));
	err |= json_put(meta, "includeBenign", json_boolean(m->include_benign));
	err |= json_put(meta, "totalAborts", json_integer((json_int_t)(a ? a->total_aborts : 0)));
	err |= json_put(meta, "blacklisted", json_integer((json_int_t)(a ? a->blacklisted : 0)));
	err |= json_put(meta, "luajit", rjson_str(m->luajit ? m->luajit : nupp_luajit_build()));
	err |= json_put(meta, "lines", json_boolean(m->lines));
	err |= json_put(meta, "fullFilenames", json_boolean(m->full_filenames));
	if (m->nthreads > 0) {
		json_t *th = json_array();

		for (i = 0; th && i < m->nthreads; i++)
			err |= json_array_append_new(th, json_pack("{s:i, s:i, s:o}", "pid", (int)m->threads[i].pid,
								   "tid", (int)m->threads[i].tid, "name",
								   rjson_str(m->threads[i].name)));
		err |= json_put(meta, "threads", th);
	}
	if (s->frames.n)
		err |= json_put(meta, "frames", json_frames(&s->frames));
	if (err)
		goto fail;
	return meta;
fail:
	json_decref(pids);
	json_decref(lost);
	json_decref(meta);
	return NULL;
}

/* The "aborts" array: the seed's profile.AbortSite fields. */
static json_t *json_aborts(const struct nupp_abort_set *a)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; arr && a && i < a->n; i++) {
		const struct nupp_abort_row *r = &a->rows[i];
		json_t *o = json_pack("{s:s, s:I, s:o, s:o, s:o}", "severity", nupp_severity_name(r->severity),
				      "count", (json_int_t)r->count, "reason", rjson_str(r->reason), "location",
				      rjson_str(r->location), "zonePath", rjson_str(r->zone_path));

		if (!o || json_array_append_new(arr, o)) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

/* Output buffer of a dump: jansson writes a document in small pieces, and one fwrite
 * (with its stream lock) per piece was most of the time of a large profile. */
struct rjson_buf {
	FILE *f;
	size_t n;
	int err;
	char b[1 << 16];
};

/* Flushes the buffer to its file. */
static void rjson_flush(struct rjson_buf *o)
{
	if (o->n && !o->err && fwrite(o->b, 1, o->n, o->f) != o->n)
		o->err = -EIO;
	o->n = 0;
}

/* json_dump_callback's writer: appends to the buffer. */
static int rjson_put(const char *buf, size_t size, void *data)
{
	struct rjson_buf *o = data;

	if (size > sizeof(o->b) - o->n) {
		rjson_flush(o);
		if (size > sizeof(o->b)) {
			if (!o->err && fwrite(buf, 1, size, o->f) != size)
				o->err = -EIO;
			return o->err ? -1 : 0;
		}
	}
	memcpy(o->b + o->n, buf, size);
	o->n += size;
	return o->err ? -1 : 0;
}

/* Appends a JSON value dumped by jansson (the meta, the aborts, an encoded name). */
static void rjson_value(struct rjson_buf *o, json_t *v, size_t flags)
{
	if (!v || json_dump_callback(v, rjson_put, o, flags | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER))
		o->err = o->err ? o->err : -ENOMEM;
}

/* Appends a name as a JSON string: a name of printable ASCII without quote or backslash
 * (nearly every frame name) as it is, anything else encoded by jansson in the lossless
 * form. */
static void rjson_name(struct rjson_buf *o, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	json_t *v;

	while (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\')
		p++;
	if (!*p) {
		rjson_put("\"", 1, o);
		rjson_put(s, (size_t)(p - (const unsigned char *)s), o);
		rjson_put("\"", 1, o);
		return;
	}
	v = rjson_str(s);
	rjson_value(o, v, 0);
	json_decref(v);
}

/* Appends the "samples" array, one row (the seed's profile.Sample fields) per line:
 * streamed, since a profile may hold 100,000 distinct stacks. */
static void rjson_samples(struct rjson_buf *o, const struct nupp_sample_set *s)
{
	char num[256];
	size_t i;

	rjson_put("[", 1, o);
	for (i = 0; i < s->n && !o->err; i++) {
		const struct nupp_sample_row *r = &s->rows[i];
		int n;

		n = snprintf(num, sizeof(num), "%s\n  {\"pid\": %d, \"tid\": %d, \"zonePath\": ", i ? "," : "",
			     (int)r->pid, (int)r->tid);
		rjson_put(num, (size_t)n, o);
		rjson_name(o, r->zone_path);
		rjson_put(", \"stack\": ", 11, o);
		rjson_name(o, r->stack);
		n = snprintf(num, sizeof(num),
			     ", \"count\": %llu, \"compiled\": %llu, \"interpreted\": %llu, \"cCode\": %llu, "
			     "\"collecting\": %llu, \"compiling\": %llu}",
			     (unsigned long long)r->count, (unsigned long long)r->compiled,
			     (unsigned long long)r->interpreted, (unsigned long long)r->ccode,
			     (unsigned long long)r->collecting, (unsigned long long)r->compiling);
		rjson_put(num, (size_t)n, o);
	}
	rjson_put(s->n ? "\n ]" : "]", s->n ? 3 : 1, o);
}

/* Writes the nupp profile JSON document (version 1): the meta and the aborts dumped by
 * jansson, the samples streamed row by row. */
int nupp_write_profile_json(const struct nupp_profile_meta *m, const struct nupp_sample_set *s,
			    const struct nupp_abort_set *a, FILE *f)
{
	struct rjson_buf *o = malloc(sizeof(*o));
	json_t *meta, *aborts;
	int err;

	if (!o)
		return -ENOMEM;
	o->f = f;
	o->n = 0;
	o->err = 0;
	meta = json_meta(m, s, a);
	aborts = json_aborts(a);
	rjson_put("{\n \"version\": 1,\n \"meta\": ", 26, o);
	rjson_value(o, meta, JSON_INDENT(1));
	rjson_put(",\n \"samples\": ", 14, o);
	rjson_samples(o, s);
	rjson_put(",\n \"aborts\": ", 13, o);
	rjson_value(o, aborts, JSON_INDENT(1));
	rjson_put("\n}\n", 3, o);
	rjson_flush(o);
	err = o->err;
	json_decref(meta);
	json_decref(aborts);
	free(o);
	return err;
}
