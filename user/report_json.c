/* The nupp profile: one self-describing JSON document (jansson) with meta, samples, aborts. */
#include <errno.h>
#include <jansson.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"

/* Sets key to a new JSON value, failing the build of the document on NULL. */
static int json_put(json_t *obj, const char *key, json_t *v)
{
	return v ? json_object_set_new(obj, key, v) : -1;
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
	err |= json_put(meta, "tool", json_sprintf("nupp-bpf %s", nupp_version()));
	err |= json_put(meta, "command", json_string(m->command ? m->command : ""));
	err |= json_put(meta, "target", m->target ? json_string(m->target) : json_null());
	err |= json_put(meta, "pids", pids);
	pids = NULL;
	err |= json_put(meta, "backend", json_string(m->backend ? m->backend : "bpf"));
	err |= json_put(meta, "frequencyHz", json_integer(m->frequency_hz));
	err |= json_put(meta, "intervalMs", json_real(m->frequency_hz ? 1000.0 / m->frequency_hz : 0));
	err |= json_put(meta, "depth", json_integer(m->depth));
	err |= json_put(meta, "durationSec", json_real(m->duration_sec));
	err |= json_put(meta, "samples", json_integer((json_int_t)s->samples));
	err |= json_put(meta, "hostSamples", json_integer((json_int_t)s->host_samples));
	err |= json_put(meta, "truncatedStacks", json_integer((json_int_t)s->cut_samples));
	err |= json_put(meta, "lost", lost);
	lost = NULL;
	err |= json_put(meta, "zoneFilter", m->zone_filter ? json_string(m->zone_filter) : json_null());
	err |= json_put(meta, "root", m->root ? json_string(m->root) : json_null());
	err |= json_put(meta, "aborts", json_boolean(m->aborts));
	err |= json_put(meta, "includeBenign", json_boolean(m->include_benign));
	err |= json_put(meta, "totalAborts", json_integer((json_int_t)(a ? a->total_aborts : 0)));
	err |= json_put(meta, "blacklisted", json_integer((json_int_t)(a ? a->blacklisted : 0)));
	err |= json_put(meta, "luajit", json_string(m->luajit ? m->luajit : nupp_luajit_build()));
	if (err)
		goto fail;
	return meta;
fail:
	json_decref(pids);
	json_decref(lost);
	json_decref(meta);
	return NULL;
}

/* The "samples" array: the seed's profile.Sample fields. */
static json_t *json_samples(const struct nupp_sample_set *s)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; arr && i < s->n; i++) {
		const struct nupp_sample_row *r = &s->rows[i];
		json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "zonePath", r->zone_path, "stack",
				      r->stack, "count", (json_int_t)r->count, "compiled", (json_int_t)r->compiled,
				      "interpreted", (json_int_t)r->interpreted, "cCode", (json_int_t)r->ccode,
				      "collecting", (json_int_t)r->collecting, "compiling", (json_int_t)r->compiling);

		if (!o || json_array_append_new(arr, o)) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

/* The "aborts" array: the seed's profile.AbortSite fields. */
static json_t *json_aborts(const struct nupp_abort_set *a)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; arr && a && i < a->n; i++) {
		const struct nupp_abort_row *r = &a->rows[i];
		json_t *o = json_pack("{s:s, s:I, s:s, s:s, s:s}", "severity", nupp_severity_name(r->severity), "count",
				      (json_int_t)r->count, "reason", r->reason, "location", r->location, "zonePath",
				      r->zone_path);

		if (!o || json_array_append_new(arr, o)) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

/* Writes the nupp profile JSON document (version 1). */
int nupp_write_profile_json(const struct nupp_profile_meta *m, const struct nupp_sample_set *s,
			    const struct nupp_abort_set *a, FILE *f)
{
	json_t *doc = json_object();
	int err = 0;

	if (!doc)
		return -ENOMEM;
	err |= json_put(doc, "version", json_integer(1));
	err |= json_put(doc, "meta", json_meta(m, s, a));
	err |= json_put(doc, "samples", json_samples(s));
	err |= json_put(doc, "aborts", json_aborts(a));
	if (!err)
		err = json_dumpf(doc, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER) ? -EIO : 0;
	else
		err = -ENOMEM;
	if (!err && fputc('\n', f) == EOF)
		err = -EIO;
	json_decref(doc);
	return err;
}
