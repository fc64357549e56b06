/* speedscope's file format (https://www.speedscope.app/file-format-schema.json): one
 * "sampled" profile per process and thread, their stacks as indices into shared frames. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "core/nupp_internal.h"
#include "report_internal.h"

/* A JSON string of a name for display, or NULL on ENOMEM. */
static json_t *sscope_str(const char *s, size_t len)
{
	struct nupp_buf b = { 0 };
	json_t *v = NULL;

	if (!nupp_rtext_display(&b, s, len))
		v = json_stringn(b.p ? b.p : "", b.len);
	free(b.p);
	return v;
}

/* The "frames" array: name, and file and line where the name gives them. */
static json_t *sscope_frames(const struct nupp_rframes *t)
{
	json_t *arr = json_array();
	size_t i, ml;

	for (i = 0; arr && i < t->n; i++) {
		const char *nm = t->names[i];
		size_t len = strlen(nm);
		json_t *o = json_object();
		int err = !o;

		err = err || json_object_set_new(o, "name", sscope_str(nm, len));
		if (!err && nupp_rtext_frame_split(nm, len, &ml)) {
			int line = nupp_rtext_frame_line(nm, len);

			err = json_object_set_new(o, "file", sscope_str(nm, ml));
			if (!err && line)
				err = json_object_set_new(o, "line", json_integer(line));
		}
		if (err || json_array_append_new(arr, o)) {
			json_decref(o);
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

/* A profile's name: "PID 123 thread 456 (name): command" (tid 0: not known; pid 0:
 * the processes of the meta). */
static json_t *sscope_name(const struct nupp_profile *p, pid_t pid, pid_t tid)
{
	const char *cmd = p->meta.target ? p->meta.target : p->meta.command ? p->meta.command : "";
	char *d = nupp_rtext_display_dup(cmd), *tn = NULL;
	json_t *v;
	int i;

	if (!d)
		return NULL;
	for (i = 0; tid && i < p->meta.nthreads; i++)
		if (p->meta.threads[i].pid == pid && p->meta.threads[i].tid == tid && p->meta.threads[i].name[0]) {
			tn = nupp_rtext_display_dup(p->meta.threads[i].name);
			if (!tn) {
				free(d);
				return NULL;
			}
			break;
		}
	if (!pid && p->meta.npids == 1)
		pid = p->meta.pids[0];
	if (pid && tid && tn)
		v = json_sprintf("PID %d thread %d (%s)%s%s", (int)pid, (int)tid, tn, d[0] ? ": " : "", d);
	else if (pid && tid)
		v = json_sprintf("PID %d thread %d%s%s", (int)pid, (int)tid, d[0] ? ": " : "", d);
	else if (pid)
		v = json_sprintf("PID %d%s%s", (int)pid, d[0] ? ": " : "", d);
	else if (p->meta.npids > 1)
		v = json_sprintf("%d processes%s%s", p->meta.npids, d[0] ? ": " : "", d);
	else
		v = json_string(d[0] ? d : "nupp-bpf profile");
	free(d);
	free(tn);
	return v;
}

/* The "sampled" profile of the rows of thread tid of process pid: stacks as frame
 * indices, weights in seconds (samples / rate), or in samples when the rate is unknown. */
static json_t *sscope_profile(const struct nupp_profile *p, pid_t pid, pid_t tid, struct nupp_rframes *frames)
{
	const struct nupp_sample_set *s = &p->samples;
	json_t *prof = json_object(), *samples = json_array(), *weights = json_array();
	double hz = p->meta.frequency_hz, total = 0;
	size_t i;
	int err = !prof || !samples || !weights;

	for (i = 0; !err && i < s->n; i++) {
		const struct nupp_sample_row *r = &s->rows[i];
		const char *fr = r->stack;
		double w = hz > 0 ? (double)r->count / hz : (double)r->count;
		json_t *st;

		if (!r->count || r->pid != pid || r->tid != tid)
			continue;
		st = json_array();
		err = !st;
		while (!err && *fr) {
			size_t len = strcspn(fr, ";");
			long id = nupp_rframes_intern(frames, fr, len);

			err = id < 0 || json_array_append_new(st, json_integer(id));
			fr += len;
			if (*fr)
				fr++;
		}
		if (err || json_array_append_new(samples, st)) {
			json_decref(st);
			err = 1;
			break;
		}
		err = json_array_append_new(weights, json_real(w));
		total += w;
	}
	err = err || json_object_set_new(prof, "type", json_string("sampled"));
	err = err || json_object_set_new(prof, "name", sscope_name(p, pid, tid));
	err = err || json_object_set_new(prof, "unit", json_string(hz > 0 ? "seconds" : "none"));
	err = err || json_object_set_new(prof, "startValue", json_integer(0));
	err = err || json_object_set_new(prof, "endValue", json_real(total));
	if (!err) {
		err = json_object_set_new(prof, "samples", samples);
		samples = NULL;
	}
	if (!err) {
		err = json_object_set_new(prof, "weights", weights);
		weights = NULL;
	}
	if (!err)
		return prof;
	json_decref(samples);
	json_decref(weights);
	json_decref(prof);
	return NULL;
}

/* A (process, thread) of the rows. */
struct sscope_thread {
	pid_t pid, tid;
};

/* qsort order of threads: by process, then thread. */
static int sscope_cmp_thread(const void *a, const void *b)
{
	const struct sscope_thread *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Writes the speedscope file: one profile per process and thread, frames shared. */
int nupp_write_speedscope(const struct nupp_profile *p, FILE *f)
{
	const struct nupp_sample_set *s = &p->samples;
	struct nupp_rframes frames = { 0 };
	json_t *doc = json_object(), *profiles = json_array(), *shared = json_object();
	struct sscope_thread *th = malloc((s->n ? s->n : 1) * sizeof(*th));
	size_t i, nth = 0;
	int err = !doc || !profiles || !shared || !th;

	/* The distinct threads of the rows, in (pid, tid) order (one profile if none has
	 * rows). */
	for (i = 0; !err && i < s->n; i++)
		if (s->rows[i].count) {
			th[nth].pid = s->rows[i].pid;
			th[nth++].tid = s->rows[i].tid;
		}
	if (!err)
		qsort(th, nth, sizeof(*th), sscope_cmp_thread);
	for (i = 0; !err && i < (nth ? nth : 1); i++) {
		json_t *prof;

		if (nth && i && !sscope_cmp_thread(&th[i], &th[i - 1]))
			continue;
		prof = sscope_profile(p, nth ? th[i].pid : 0, nth ? th[i].tid : 0, &frames);
		err = !prof || json_array_append_new(profiles, prof);
	}
	err = err || json_object_set_new(shared, "frames", sscope_frames(&frames));
	err = err || json_object_set_new(doc, "$schema", json_string("https://www.speedscope.app/file-format-schema.json"));
	err = err || json_object_set_new(doc, "exporter", json_sprintf("nupp-bpf@%s", nupp_version()));
	err = err || json_object_set_new(doc, "name", sscope_name(p, 0, 0));
	err = err || json_object_set_new(doc, "activeProfileIndex", json_integer(0));
	/* json_object_set_new takes the value, set or not. */
	if (!err) {
		err = json_object_set_new(doc, "shared", shared);
		shared = NULL;
	}
	if (!err) {
		err = json_object_set_new(doc, "profiles", profiles);
		profiles = NULL;
	}
	if (!err)
		err = json_dumpf(doc, f, JSON_COMPACT | JSON_PRESERVE_ORDER) ? -EIO : 0;
	else
		err = nupp_fail(-ENOMEM, "out of memory");
	if (!err && fputc('\n', f) == EOF)
		err = -EIO;
	json_decref(profiles);
	json_decref(shared);
	json_decref(doc);
	free(th);
	nupp_rframes_free(&frames);
	return err;
}
