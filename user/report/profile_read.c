/* Reading profiles back: the nupp profile JSON document (jansson) and collapsed stacks,
 * into a struct nupp_profile, with errors that name the file and the position. */
#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "core/nupp_internal.h"
#include "report_internal.h"

/* What nupp_profile_read allocated for the meta: its strings and its pids. */
struct pread_store {
	char **strs;
	size_t n, cap;
	pid_t *pids;
	struct nupp_thread_name *threads;
};

/* One read in progress. */
struct pread {
	const char *name; /* the file, for messages */
	struct nupp_profile *p;
	struct pread_store *st;
};

/* -- Freeing -------------------------------------------------------------------- */

/* Frees the rows and what the reader allocated for the meta. */
void nupp_profile_free(struct nupp_profile *p)
{
	struct pread_store *st = p->meta_store;
	size_t i;

	if (st) {
		for (i = 0; i < st->n; i++)
			free(st->strs[i]);
		free(st->strs);
		free(st->pids);
		free(st->threads);
		free(st);
	}
	nupp_sample_set_free(&p->samples);
	nupp_abort_set_free(&p->aborts);
	memset(p, 0, sizeof(*p));
}

/* Keeps s for the meta (freed with the profile); s or NULL on ENOMEM (s freed). */
static char *pread_keep(struct pread *r, char *s)
{
	struct pread_store *st = r->st;

	if (!s)
		return NULL;
	if (st->n == st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 16;
		char **ns = realloc(st->strs, cap * sizeof(*ns));

		if (!ns) {
			free(s);
			return NULL;
		}
		st->strs = ns;
		st->cap = cap;
	}
	st->strs[st->n++] = s;
	return s;
}

/* -- JSON fields ---------------------------------------------------------------- */

/* Fails the read with "name: where: what"; returns -EINVAL. */
static int pread_bad(struct pread *r, const char *where, const char *what)
{
	return nupp_fail(-EINVAL, "%s: %s: %s", r->name, where, what);
}

/* The bytes of JSON string v (the lossless form mapped back), malloc'ed; *err set on
 * failure (-EINVAL for a NUL inside, -ENOMEM). */
static char *pread_bytes(struct pread *r, json_t *v, const char *where, int *err)
{
	const char *s = json_string_value(v);
	char *out;

	if (strlen(s) != json_string_length(v)) {
		*err = pread_bad(r, where, "a string holds a NUL character (\\u0000)");
		return NULL;
	}
	out = nupp_utf8_to_bytes(s, NULL);
	if (!out)
		*err = -ENOMEM;
	return out;
}

/* Reads string field key of obj (at path where) into *out, malloc'ed: required, or
 * NULL when missing or null if nullable. 0 or -errno. */
static int pread_str(struct pread *r, json_t *obj, const char *where, const char *key, bool nullable,
		     char **out)
{
	json_t *v = json_object_get(obj, key);
	char path[256];
	int err = 0;

	snprintf(path, sizeof(path), "%s.%s", where, key);
	*out = NULL;
	if (!v || json_is_null(v)) {
		if (nullable)
			return 0;
		return pread_bad(r, path, v ? "expected a string, found null" : "missing");
	}
	if (!json_is_string(v))
		return pread_bad(r, path, "expected a string");
	*out = pread_bytes(r, v, path, &err);
	return err;
}

/* Reads a meta string (kept with the profile). */
static int pread_meta_str(struct pread *r, json_t *meta, const char *key, bool nullable, const char **out)
{
	char *s;
	int err = pread_str(r, meta, "meta", key, nullable, &s);

	if (err)
		return err;
	*out = s;
	if (s && !pread_keep(r, s))
		return -ENOMEM;
	return 0;
}

/* Reads a non-negative integer field (0 when missing and optional). */
static int pread_uint(struct pread *r, json_t *obj, const char *where, const char *key, bool required, __u64 *out)
{
	json_t *v = json_object_get(obj, key);
	char path[256];

	snprintf(path, sizeof(path), "%s.%s", where, key);
	*out = 0;
	if (!v)
		return required ? pread_bad(r, path, "missing") : 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return pread_bad(r, path, "expected a non-negative integer");
	*out = (__u64)json_integer_value(v);
	return 0;
}

/* Reads an integer field within [lo, hi] (0 when missing). */
static int pread_int(struct pread *r, json_t *obj, const char *key, long long lo, long long hi, int *out)
{
	json_t *v = json_object_get(obj, key);
	char path[256], what[96];

	snprintf(path, sizeof(path), "meta.%s", key);
	*out = 0;
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
		snprintf(what, sizeof(what), "expected an integer in %lld..%lld", lo, hi);
		return pread_bad(r, path, what);
	}
	*out = (int)json_integer_value(v);
	return 0;
}

/* Reads a boolean field (false when missing). */
static int pread_bool(struct pread *r, json_t *obj, const char *key, bool *out)
{
	json_t *v = json_object_get(obj, key);
	char path[256];

	snprintf(path, sizeof(path), "meta.%s", key);
	*out = false;
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return pread_bad(r, path, "expected true or false");
	*out = json_is_true(v);
	return 0;
}

/* -- The document --------------------------------------------------------------- */

/* Reads "meta.threads": [{"pid", "tid", "name"}, ...] (optional). */
static int pread_threads(struct pread *r, json_t *th)
{
	struct nupp_profile_meta *m = &r->p->meta;
	char where[64];
	json_t *v;
	size_t i;

	if (!th)
		return 0;
	if (!json_is_array(th) || json_array_size(th) > 1 << 20)
		return pread_bad(r, "meta.threads", "expected an array of threads");
	r->st->threads = calloc(json_array_size(th) ? json_array_size(th) : 1, sizeof(*r->st->threads));
	if (!r->st->threads)
		return -ENOMEM;
	json_array_foreach(th, i, v) {
		struct nupp_thread_name *t = &r->st->threads[i];
		__u64 pid, tid;
		char *name;
		int err;

		snprintf(where, sizeof(where), "meta.threads[%zu]", i);
		if (!json_is_object(v))
			return pread_bad(r, where, "expected an object");
		err = pread_uint(r, v, where, "pid", true, &pid);
		err = err ? err : pread_uint(r, v, where, "tid", true, &tid);
		if (!err && (pid > INT_MAX || tid > INT_MAX))
			err = pread_bad(r, where, "pid or tid out of range");
		err = err ? err : pread_str(r, v, where, "name", false, &name);
		if (err)
			return err;
		if (!pread_keep(r, name))
			return -ENOMEM;
		t->pid = (pid_t)pid;
		t->tid = (pid_t)tid;
		t->name = name;
	}
	m->threads = r->st->threads;
	m->nthreads = (int)json_array_size(th);
	return 0;
}

/* Reads "meta.frames": {name: [{"file", "firstLine", "lastLine"}, ...]} (optional: a
 * profile written before it has no frame table) into the samples' frame table. */
static int pread_frames(struct pread *r, json_t *fr)
{
	const char *key;
	size_t klen;
	json_t *arr;
	char where[192];

	if (!fr)
		return 0;
	if (!json_is_object(fr))
		return pread_bad(r, "meta.frames", "expected an object of frame names");
	json_object_keylen_foreach(fr, key, klen, arr) {
		char *name = NULL;
		json_t *v;
		size_t j;
		int err = 0;

		snprintf(where, sizeof(where), "meta.frames[\"%.100s\"]", key);
		if (!json_is_array(arr))
			return pread_bad(r, where, "expected an array of functions");
		if (strlen(key) != klen)
			return pread_bad(r, where, "a name holds a NUL character (\\u0000)");
		name = nupp_utf8_to_bytes(key, NULL);
		if (!name)
			return -ENOMEM;
		json_array_foreach(arr, j, v) {
			char at[224], *file = NULL;
			__u64 first = 0, last = 0;

			snprintf(at, sizeof(at), "%s[%zu]", where, j);
			if (!json_is_object(v))
				err = pread_bad(r, at, "expected an object");
			err = err ? err : pread_str(r, v, at, "file", false, &file);
			err = err ? err : pread_uint(r, v, at, "firstLine", true, &first);
			err = err ? err : pread_uint(r, v, at, "lastLine", true, &last);
			if (!err && (first > INT_MAX || last > INT_MAX || last < first))
				err = pread_bad(r, at, "expected 0 <= firstLine <= lastLine <= 2147483647");
			if (!err && nupp_frame_table_add(&r->p->samples.frames, name, file, (int)first, (int)last))
				err = -ENOMEM;
			free(file);
			if (err)
				break;
		}
		free(name);
		if (err)
			return err;
	}
	return 0;
}

/* Reads "meta" (the sample and abort totals go to the sets). */
static int pread_meta(struct pread *r, json_t *meta, __u64 *samples)
{
	struct nupp_profile_meta *m = &r->p->meta;
	json_t *pids, *lost, *v;
	__u64 u;
	size_t i;
	int err = 0;

	if (!json_is_object(meta))
		return pread_bad(r, "meta", meta ? "expected an object" : "missing");
	err = err ? err : pread_meta_str(r, meta, "tool", true, &m->tool);
	err = err ? err : pread_meta_str(r, meta, "command", true, &m->command);
	err = err ? err : pread_meta_str(r, meta, "target", true, &m->target);
	err = err ? err : pread_meta_str(r, meta, "backend", true, &m->backend);
	err = err ? err : pread_meta_str(r, meta, "luajit", true, &m->luajit);
	err = err ? err : pread_meta_str(r, meta, "zoneFilter", true, &m->zone_filter);
	err = err ? err : pread_meta_str(r, meta, "root", true, &m->root);
	err = err ? err : pread_int(r, meta, "frequencyHz", 0, 1000000000, &m->frequency_hz);
	err = err ? err : pread_int(r, meta, "depth", 0, 1000000, &m->depth);
	err = err ? err : pread_bool(r, meta, "aborts", &m->aborts);
	err = err ? err : pread_bool(r, meta, "includeBenign", &m->include_benign);
	err = err ? err : pread_bool(r, meta, "lines", &m->lines);
	err = err ? err : pread_bool(r, meta, "fullFilenames", &m->full_filenames);
	err = err ? err : pread_uint(r, meta, "meta", "samples", false, samples);
	err = err ? err : pread_uint(r, meta, "meta", "totalAborts", false, &r->p->aborts.total_aborts);
	err = err ? err : pread_uint(r, meta, "meta", "blacklisted", false, &r->p->aborts.blacklisted);
	err = err ? err : pread_uint(r, meta, "meta", "hostSamples", false, &r->p->samples.host_samples);
	err = err ? err : pread_uint(r, meta, "meta", "truncatedStacks", false, &r->p->samples.cut_samples);
	if (err)
		return err;
	v = json_object_get(meta, "durationSec");
	if (v && (!json_is_number(v) || !(json_number_value(v) >= 0)))
		return pread_bad(r, "meta.durationSec", "expected a number of seconds >= 0");
	m->duration_sec = v ? json_number_value(v) : 0;
	v = json_object_get(meta, "startTime");
	if (v && (!json_is_number(v) || !(json_number_value(v) >= 0) || json_number_value(v) > 9e9))
		return pread_bad(r, "meta.startTime", "expected a Unix time in seconds >= 0");
	m->start_time = v ? json_number_value(v) : 0;
	pids = json_object_get(meta, "pids");
	if (pids && !json_is_array(pids))
		return pread_bad(r, "meta.pids", "expected an array of process IDs");
	if (pids && json_array_size(pids)) {
		if (json_array_size(pids) > 1 << 20)
			return pread_bad(r, "meta.pids", "too many process IDs");
		r->st->pids = calloc(json_array_size(pids), sizeof(pid_t));
		if (!r->st->pids)
			return -ENOMEM;
		json_array_foreach(pids, i, v) {
			if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
				char path[64];

				snprintf(path, sizeof(path), "meta.pids[%zu]", i);
				return pread_bad(r, path, "expected a process ID");
			}
			r->st->pids[i] = (pid_t)json_integer_value(v);
		}
		m->pids = r->st->pids;
		m->npids = (int)json_array_size(pids);
	}
	err = pread_threads(r, json_object_get(meta, "threads"));
	if (!err)
		err = pread_frames(r, json_object_get(meta, "frames"));
	if (err)
		return err;
	lost = json_object_get(meta, "lost");
	if (lost && !json_is_object(lost))
		return pread_bad(r, "meta.lost", "expected an object of counts by reason");
	for (i = 0; lost && i < NUPP_LOST__MAX; i++) {
		err = pread_uint(r, lost, "meta.lost", nupp_lost_name(i), false, &u);
		if (err)
			return err;
		r->p->samples.lost[i] = u;
	}
	return 0;
}

/* Adds the counts of c under (c->pid, c->tid, zone, stack), merged into an equal row, and frees
 * zone and stack; 0 or -ENOMEM. */
static int pread_add_row(struct pread *r, char *zone, char *stack, const struct nupp_sample_row *c)
{
	int err = nupp_sample_set_add(&r->p->samples, zone, stack, c);

	free(zone);
	free(stack);
	return err;
}

/* Reads one sample row (index i). */
static int pread_sample(struct pread *r, json_t *o, size_t i)
{
	static const char *const keys[] = { "compiled", "interpreted", "cCode", "collecting", "compiling" };
	struct nupp_sample_row c = { 0 };
	__u64 *fields[] = { &c.compiled, &c.interpreted, &c.ccode, &c.collecting, &c.compiling };
	char where[48], *zone = NULL, *stack = NULL;
	__u64 sum = 0, pid = 0, tid = 0;
	size_t k;
	int err;

	snprintf(where, sizeof(where), "samples[%zu]", i);
	if (!json_is_object(o))
		return pread_bad(r, where, "expected an object");
	err = pread_uint(r, o, where, "count", true, &c.count);
	for (k = 0; !err && k < 5; k++) {
		err = pread_uint(r, o, where, keys[k], false, fields[k]);
		if (!err && *fields[k] > c.count - sum) {
			char what[128];

			snprintf(what, sizeof(what), "the VM-state counts add up to more than count (%llu)",
				 (unsigned long long)c.count);
			return pread_bad(r, where, what);
		}
		sum += *fields[k];
	}
	err = err ? err : pread_uint(r, o, where, "pid", false, &pid);
	if (!err && pid > INT_MAX)
		err = pread_bad(r, where, "pid out of range");
	c.pid = (pid_t)pid;
	/* A profile written before rows named their thread reads as thread 0 (not known). */
	err = err ? err : pread_uint(r, o, where, "tid", false, &tid);
	if (!err && tid > INT_MAX)
		err = pread_bad(r, where, "tid out of range");
	c.tid = (pid_t)tid;
	err = err ? err : pread_str(r, o, where, "zonePath", false, &zone);
	err = err ? err : pread_str(r, o, where, "stack", false, &stack);
	if (!err && !stack[0])
		err = pread_bad(r, where, "empty stack");
	if (!err && r->p->samples.samples + c.count < c.count)
		err = pread_bad(r, where, "the sample counts overflow");
	if (err) {
		free(zone);
		free(stack);
		return err;
	}
	return pread_add_row(r, zone, stack, &c);
}

/* Reads one abort row (index i). */
static int pread_abort(struct pread *r, json_t *o, size_t i)
{
	char where[48], *reason = NULL, *loc = NULL, *zone = NULL, *sev = NULL;
	enum nupp_severity s;
	__u64 count;
	int err;

	snprintf(where, sizeof(where), "aborts[%zu]", i);
	if (!json_is_object(o))
		return pread_bad(r, where, "expected an object");
	err = pread_uint(r, o, where, "count", true, &count);
	err = err ? err : pread_str(r, o, where, "severity", false, &sev);
	err = err ? err : pread_str(r, o, where, "reason", false, &reason);
	err = err ? err : pread_str(r, o, where, "location", false, &loc);
	err = err ? err : pread_str(r, o, where, "zonePath", false, &zone);
	if (!err) {
		for (s = NUPP_SEV_BLACKLIST; s <= NUPP_SEV_INFO; s++)
			if (strcmp(sev, nupp_severity_name(s)) == 0)
				break;
		if (s > NUPP_SEV_INFO)
			err = pread_bad(r, where, "severity is not blacklist, warn or info");
	}
	if (!err)
		err = nupp_abort_set_add(&r->p->aborts, s, reason, loc, zone, count);
	free(sev);
	free(reason);
	free(loc);
	free(zone);
	return err;
}

/* Reads a parsed document into r->p. */
static int pread_doc(struct pread *r, json_t *doc)
{
	json_t *v, *arr;
	__u64 samples = 0;
	size_t i;
	int err;

	if (!json_is_object(doc))
		return pread_bad(r, "the document", "expected a JSON object (a nupp profile)");
	v = json_object_get(doc, "version");
	if (!v || !json_is_integer(v))
		return pread_bad(r, "version", v ? "expected an integer" : "missing: not a nupp profile");
	if (json_integer_value(v) != 1)
		return nupp_fail(-EPROTO, "%s: version %lld: this nupp-bpf reads version 1 profiles", r->name,
				 (long long)json_integer_value(v));
	err = pread_meta(r, json_object_get(doc, "meta"), &samples);
	if (err)
		return err;
	arr = json_object_get(doc, "samples");
	if (!json_is_array(arr))
		return pread_bad(r, "samples", arr ? "expected an array" : "missing");
	json_array_foreach(arr, i, v)
		if ((err = pread_sample(r, v, i)))
			return err;
	if (json_object_get(json_object_get(doc, "meta"), "samples") && samples != r->p->samples.samples) {
		char what[160];

		snprintf(what, sizeof(what), "says %llu samples but the rows hold %llu",
			 (unsigned long long)samples, (unsigned long long)r->p->samples.samples);
		return pread_bad(r, "meta.samples", what);
	}
	arr = json_object_get(doc, "aborts");
	if (arr && !json_is_array(arr))
		return pread_bad(r, "aborts", "expected an array");
	json_array_foreach(arr, i, v)
		if ((err = pread_abort(r, v, i)))
			return err;
	return 0;
}

/* -- Collapsed stacks ------------------------------------------------------------- */

/* Reads collapsed stacks ("frame;frame count" per line) from buf[0..len): the rows get
 * a count and no VM-state split (the format has none). Empty lines are skipped. */
static int pread_collapsed(struct pread *r, const char *buf, size_t len)
{
	const char *line = buf, *end = buf + len;
	size_t lineno = 0;
	int err;

	while (line < end) {
		const char *nl = memchr(line, '\n', (size_t)(end - line)), *le = nl ? nl : end, *sp;
		struct nupp_sample_row c = { 0 };
		char where[64], *stack, *zone;
		__u64 v = 0;

		lineno++;
		if (le > line && le[-1] == '\r')
			le--;
		snprintf(where, sizeof(where), "line %zu", lineno);
		const char *q = line;

		while (q < le && (*q == ' ' || *q == '\t'))
			q++;
		if (q == le) {
			line = nl ? nl + 1 : end; /* a blank line */
			continue;
		}
		if (memchr(line, 0, (size_t)(le - line)))
			return pread_bad(r, where, "a NUL byte: not collapsed stacks text");
		for (sp = le; sp > line && sp[-1] != ' '; sp--)
			;
		if (sp == line || sp == le || sp - 1 == line)
			return pread_bad(r, where, "expected \"frame;frame;... count\"");
		for (const char *d = sp; d < le; d++) {
			if (*d < '0' || *d > '9')
				return pread_bad(r, where, "the count is not a whole number of samples");
			if (v > (UINT64_MAX - 9) / 10)
				return pread_bad(r, where, "the count is too large");
			v = v * 10 + (__u64)(*d - '0');
		}
		if (r->p->samples.samples + v < v)
			return pread_bad(r, where, "the sample counts overflow");
		c.count = v;
		stack = strndup(line, (size_t)(sp - 1 - line));
		zone = strdup("");
		if (!stack || !zone) {
			free(stack);
			free(zone);
			return -ENOMEM;
		}
		if (v && (err = pread_add_row(r, zone, stack, &c)))
			return err;
		if (!v) {
			free(stack);
			free(zone);
		}
		line = nl ? nl + 1 : end;
	}
	return 0;
}

/* -- Entry points ----------------------------------------------------------------- */

/* Reads a profile from buf[0..len): JSON or collapsed by its first non-blank byte, or
 * collapsed stacks whatever it starts with. */
static int pread_buf(const char *buf, size_t len, const char *name, struct nupp_profile *p, bool collapsed)
{
	struct pread r = { .name = name, .p = p };
	size_t i = 0;
	int err;

	memset(p, 0, sizeof(*p));
	r.st = calloc(1, sizeof(*r.st));
	if (!r.st)
		return -ENOMEM;
	p->meta_store = r.st;
	while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r'))
		i++;
	if (!collapsed && i < len && buf[i] == '{') {
		json_error_t jerr;
		json_t *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);

		if (!doc) {
			err = nupp_fail(-EINVAL, "%s:%d:%d: %s (byte %d of %zu)", name, jerr.line, jerr.column,
					jerr.text, jerr.position, len);
		} else {
			err = pread_doc(&r, doc);
			json_decref(doc);
		}
	} else {
		err = pread_collapsed(&r, buf, len);
		if (!err && !p->samples.n)
			err = nupp_fail(-EINVAL, "%s: %s", name,
					i == len ? "empty: neither a nupp profile nor collapsed stacks"
						 : "no stack with a sample in these collapsed stacks");
	}
	if (err == -ENOMEM)
		nupp_fail(err, "%s: out of memory", name);
	if (err)
		nupp_profile_free(p);
	return err;
}

/* Reads the rest of f into a malloc'ed buffer; 0 or -errno. */
static int pread_slurp(FILE *f, char **out, size_t *len)
{
	size_t cap = 1 << 16, n = 0, got;
	char *buf = malloc(cap), *nb;

	errno = 0;
	if (!buf)
		return -ENOMEM;
	while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
	}
	if (ferror(f)) {
		int e = errno ? errno : EIO;

		free(buf);
		return -e;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* Reads a nupp profile (JSON) or collapsed stacks from f. */
int nupp_profile_read(FILE *f, const char *name, struct nupp_profile *p)
{
	char *buf;
	size_t len;
	int err = pread_slurp(f, &buf, &len);

	if (err)
		return nupp_fail(err, "cannot read %s: %s", name, strerror(-err));
	err = pread_buf(buf, len, name, p, false);
	free(buf);
	return err;
}

/* The same from a file ("-": stdin). */
int nupp_profile_read_file(const char *path, struct nupp_profile *p)
{
	FILE *f;
	int err;

	if (strcmp(path, "-") == 0)
		return nupp_profile_read(stdin, "stdin", p);
	f = fopen(path, "re");
	if (!f)
		return nupp_fail(-errno, "cannot read %s: %s", path, strerror(errno));
	err = nupp_profile_read(f, path, p);
	fclose(f);
	return err;
}

/* Reads from memory. */
int nupp_profile_read_mem(const void *buf, size_t len, const char *name, struct nupp_profile *p)
{
	return pread_buf(buf, len, name, p, false);
}

/* Reads collapsed stacks from memory, whatever the first byte. */
int nupp_rread_collapsed(const void *buf, size_t len, const char *name, struct nupp_profile *p)
{
	return pread_buf(buf, len, name, p, true);
}
