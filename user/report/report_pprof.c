/* pprof: a gzip'd perftools.profiles.Profile (Google's profile.proto, encoded with
 * protobuf-c): sample types samples/count and cpu/nanoseconds, a function and a location
 * per frame, labels for the zone path and the VM state. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "core/nupp_internal.h"
#include "profile.pb-c.h"
#include "report_internal.h"

/* The message being built: its parts are owned here, not by protobuf-c. */
struct pprof {
	Perftools__Profiles__Profile prof;
	struct nupp_rframes strings; /* the string table; "" is index 0 */
	struct nupp_rframes frames;  /* frame name -> function and location id - 1 */
	Perftools__Profiles__Sample *samples;
	Perftools__Profiles__Sample **sample_ptrs;
	size_t nsamples, samples_cap;
	uint64_t *locs;             /* every sample's location ids, back to back */
	size_t nlocs, locs_cap;
	Perftools__Profiles__Label *labels; /* two per sample at most */
	int err;
};

/* The string table index of s[0..len) shown for display (valid UTF-8, as proto3
 * strings must be); -1 on ENOMEM. */
static int64_t pprof_str(struct pprof *pp, const char *s, size_t len)
{
	struct nupp_buf b = { 0 };
	long id;

	if (nupp_rtext_display(&b, s, len) || nupp_buf_addc(&b, 0)) {
		free(b.p);
		return pp->err = -ENOMEM;
	}
	id = nupp_rframes_intern(&pp->strings, b.p, b.len - 1);
	free(b.p);
	if (id < 0)
		pp->err = -ENOMEM;
	return id;
}

/* Adds one sample of n samples in VM state state_key on the row's stack. */
static void pprof_sample(struct pprof *pp, const struct nupp_sample_row *r, __u64 n, const char *state_key,
			 int64_t period, int nvalues)
{
	Perftools__Profiles__Sample *s;
	Perftools__Profiles__Label *l;
	size_t first = pp->nlocs, depth = 0, i;
	const char *f = r->stack;

	if (pp->err || !n)
		return;
	while (*f) {
		size_t len = strcspn(f, ";");
		long id = nupp_rframes_intern(&pp->frames, f, len);

		if (id < 0 || (pp->nlocs == pp->locs_cap && !pp->err)) {
			size_t cap = pp->locs_cap ? pp->locs_cap * 2 : 4096;
			uint64_t *nl = id < 0 ? NULL : realloc(pp->locs, cap * sizeof(*nl));

			if (!nl) {
				pp->err = -ENOMEM;
				return;
			}
			pp->locs = nl;
			pp->locs_cap = cap;
		}
		pp->locs[pp->nlocs++] = (uint64_t)id + 1;
		depth++;
		f += len;
		if (*f)
			f++;
	}
	/* pprof lists a sample's locations leaf first; stacks are root first. */
	for (i = 0; i < depth / 2; i++) {
		uint64_t t = pp->locs[first + i];

		pp->locs[first + i] = pp->locs[first + depth - 1 - i];
		pp->locs[first + depth - 1 - i] = t;
	}
	if (pp->nsamples == pp->samples_cap) {
		size_t cap = pp->samples_cap ? pp->samples_cap * 2 : 1024;
		void *ns = realloc(pp->samples, cap * sizeof(*pp->samples));

		if (!ns) {
			pp->err = -ENOMEM;
			return;
		}
		pp->samples = ns;
		ns = realloc(pp->labels, cap * 2 * sizeof(*pp->labels));
		if (!ns) {
			pp->err = -ENOMEM;
			return;
		}
		pp->labels = ns;
		pp->samples_cap = cap;
	}
	s = &pp->samples[pp->nsamples];
	perftools__profiles__sample__init(s);
	s->n_location_id = depth;
	s->location_id = (uint64_t *)(uintptr_t)first; /* an offset until the array stops moving */
	s->n_value = (size_t)nvalues;
	s->value = malloc(2 * sizeof(int64_t));
	if (!s->value) {
		pp->err = -ENOMEM;
		return;
	}
	s->value[0] = n > INT64_MAX ? INT64_MAX : (int64_t)n;
	/* cpu/nanoseconds, saturated (a profile read from a file may hold any count) */
	s->value[1] = period && s->value[0] > INT64_MAX / period ? INT64_MAX : s->value[0] * period;
	l = &pp->labels[pp->nsamples * 2];
	perftools__profiles__label__init(&l[0]);
	perftools__profiles__label__init(&l[1]);
	l[0].key = pprof_str(pp, "vmstate", 7);
	l[0].str = pprof_str(pp, state_key, strlen(state_key));
	s->n_label = 1;
	if (r->zone_path[0]) {
		l[1].key = pprof_str(pp, "zone", 4);
		l[1].str = pprof_str(pp, r->zone_path, strlen(r->zone_path));
		s->n_label = 2;
	}
	pp->nsamples++;
}

/* Compresses buf[0..len) as gzip and writes it to f. */
static int pprof_gzip(const uint8_t *buf, size_t len, FILE *f)
{
	z_stream zs = { 0 };
	uint8_t out[65536];
	int zerr, err = 0;

	if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return nupp_fail(-ENOMEM, "out of memory (zlib)");
	zs.next_in = (Bytef *)buf;
	zs.avail_in = (uInt)len;
	do {
		zs.next_out = out;
		zs.avail_out = sizeof(out);
		zerr = deflate(&zs, Z_FINISH);
		if (zerr == Z_STREAM_ERROR) {
			err = nupp_fail(-EIO, "zlib failed");
			break;
		}
		if (fwrite(out, 1, sizeof(out) - zs.avail_out, f) != sizeof(out) - zs.avail_out) {
			err = -EIO;
			break;
		}
	} while (zerr != Z_STREAM_END);
	deflateEnd(&zs);
	return err;
}

/* Writes the pprof profile. */
int nupp_write_pprof(const struct nupp_profile *p, FILE *f)
{
	const struct nupp_sample_set *s = &p->samples;
	const char *cmd = p->meta.target ? p->meta.target : p->meta.command ? p->meta.command : "";
	struct pprof pp = { .prof = PERFTOOLS__PROFILES__PROFILE__INIT };
	Perftools__Profiles__ValueType vt[2], *vtp[2], period_type;
	Perftools__Profiles__Function *fns = NULL, **fnp = NULL;
	Perftools__Profiles__Location *locs = NULL, **locp = NULL;
	Perftools__Profiles__Line *lines = NULL, **linep = NULL;
	Perftools__Profiles__Label **labelp = NULL;
	int64_t period = p->meta.frequency_hz > 0 ? 1000000000LL / p->meta.frequency_hz : 0, comment[2];
	int nvalues = period ? 2 : 1;
	uint8_t *buf = NULL;
	size_t i, len;
	int k, err;

	pprof_str(&pp, "", 0);
	for (k = 0; k < 2; k++) {
		perftools__profiles__value_type__init(&vt[k]);
		vtp[k] = &vt[k];
	}
	vt[0].type = pprof_str(&pp, "samples", 7);
	vt[0].unit = pprof_str(&pp, "count", 5);
	vt[1].type = pprof_str(&pp, "cpu", 3);
	vt[1].unit = pprof_str(&pp, "nanoseconds", 11);
	perftools__profiles__value_type__init(&period_type);
	period_type = vt[nvalues - 1];
	for (i = 0; i < s->n; i++) {
		const struct nupp_sample_row *r = &s->rows[i];
		__u64 known = 0;

		for (k = 0; k < NUPP_RS__MAX; k++) {
			known += nupp_rstate_of(r, k);
			pprof_sample(&pp, r, nupp_rstate_of(r, k), nupp_rstate_key(k), period, nvalues);
		}
		pprof_sample(&pp, r, r->count - known, "unknown", period, nvalues);
	}
	err = pp.err;
	/* One function and one location (with one line) per distinct frame. */
	if (!err) {
		size_t n = pp.frames.n ? pp.frames.n : 1;

		fns = calloc(n, sizeof(*fns));
		fnp = calloc(n, sizeof(*fnp));
		locs = calloc(n, sizeof(*locs));
		locp = calloc(n, sizeof(*locp));
		lines = calloc(n, sizeof(*lines));
		linep = calloc(n, sizeof(*linep));
		pp.sample_ptrs = calloc(pp.nsamples ? pp.nsamples : 1, sizeof(*pp.sample_ptrs));
		labelp = calloc(pp.nsamples ? pp.nsamples * 2 : 1, sizeof(*labelp));
		if (!fns || !fnp || !locs || !locp || !lines || !linep || !pp.sample_ptrs || !labelp)
			err = -ENOMEM;
	}
	for (i = 0; !err && i < pp.frames.n; i++) {
		const struct nupp_frame_info *fi;
		const char *nm = pp.frames.names[i];
		size_t nlen = strlen(nm), ml;
		int line = nupp_rtext_frame_line(nm, nlen);

		perftools__profiles__function__init(&fns[i]);
		fns[i].id = i + 1;
		fns[i].name = fns[i].system_name = pprof_str(&pp, nm, nlen);
		if (nupp_rtext_frame_split(nm, nlen, &ml))
			fns[i].filename = pprof_str(&pp, nm, ml);
		/* The first line of the function from the frame table (the lowest if the name
		 * stands for several); without one, "module:N" is a function's first line,
		 * except in a profile of lines. */
		fi = nupp_frame_table_find(&s->frames, nm, nlen);
		fns[i].start_line = fi ? fi->first_line : p->meta.lines ? 0 : line;
		for (; fi; fi = nupp_frame_table_next(&s->frames, fi))
			if (fi->first_line < fns[i].start_line)
				fns[i].start_line = fi->first_line;
		fnp[i] = &fns[i];
		perftools__profiles__line__init(&lines[i]);
		lines[i].function_id = i + 1;
		lines[i].line = line;
		linep[i] = &lines[i];
		perftools__profiles__location__init(&locs[i]);
		locs[i].id = i + 1;
		locs[i].n_line = 1;
		locs[i].line = &linep[i];
		locp[i] = &locs[i];
	}
	for (i = 0; !err && i < pp.nsamples; i++) {
		Perftools__Profiles__Sample *sm = &pp.samples[i];

		sm->location_id = pp.locs + (uintptr_t)sm->location_id;
		labelp[i * 2] = &pp.labels[i * 2];
		labelp[i * 2 + 1] = &pp.labels[i * 2 + 1];
		sm->label = &labelp[i * 2];
		pp.sample_ptrs[i] = sm;
	}
	if (!err) {
		char *c = NULL;

		if ((p->meta.tool ? asprintf(&c, "%s profile of %s", p->meta.tool, cmd)
				  : asprintf(&c, "nupp-bpf %s profile of %s", nupp_version(), cmd)) < 0)
			err = -ENOMEM;
		else
			comment[0] = pprof_str(&pp, c, strlen(c));
		free(c);
		if (!err && asprintf(&c, "%llu samples, %llu lost", (unsigned long long)s->samples,
				     (unsigned long long)(s->lost[0] + s->lost[1] + s->lost[2] + s->lost[3] +
							  s->lost[4] + s->lost[5])) < 0)
			err = -ENOMEM;
		else if (!err)
			comment[1] = pprof_str(&pp, c, strlen(c));
		free(c);
		err = err ? err : pp.err;
	}
	if (!err) {
		pp.prof.n_sample_type = (size_t)nvalues;
		pp.prof.sample_type = vtp;
		pp.prof.n_sample = pp.nsamples;
		pp.prof.sample = pp.sample_ptrs;
		pp.prof.n_location = pp.frames.n;
		pp.prof.location = locp;
		pp.prof.n_function = pp.frames.n;
		pp.prof.function = fnp;
		pp.prof.n_string_table = pp.strings.n;
		pp.prof.string_table = pp.strings.names;
		pp.prof.duration_nanos = p->meta.duration_sec * 1e9 < 9e18 ? (int64_t)(p->meta.duration_sec * 1e9)
									     : INT64_MAX;
		/* time_nanos: the start as Unix nanoseconds, split so that no double of
		 * 1e18 rounds away the fraction */
		if (p->meta.start_time > 0 && p->meta.start_time < 9e9) {
			double whole = (double)(int64_t)p->meta.start_time;

			pp.prof.time_nanos = (int64_t)whole * 1000000000LL +
					     (int64_t)((p->meta.start_time - whole) * 1e9 + 0.5);
		}
		pp.prof.period_type = &period_type;
		pp.prof.period = period ? period : 1;
		pp.prof.n_comment = 2;
		pp.prof.comment = comment;
		pp.prof.default_sample_type = vt[nvalues - 1].type;
		len = perftools__profiles__profile__get_packed_size(&pp.prof);
		buf = malloc(len ? len : 1);
		if (!buf)
			err = -ENOMEM;
		else
			perftools__profiles__profile__pack(&pp.prof, buf);
	}
	if (!err)
		err = pprof_gzip(buf, len, f);
	else if (err == -ENOMEM)
		nupp_fail(err, "out of memory");
	for (i = 0; i < pp.nsamples; i++)
		free(pp.samples[i].value);
	free(buf);
	free(fns);
	free(fnp);
	free(locs);
	free(locp);
	free(lines);
	free(linep);
	free(labelp);
	free(pp.sample_ptrs);
	free(pp.samples);
	free(pp.labels);
	free(pp.locs);
	nupp_rframes_free(&pp.strings);
	nupp_rframes_free(&pp.frames);
	return err;
}
