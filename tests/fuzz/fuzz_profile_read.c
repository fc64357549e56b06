/* libFuzzer target for the profile readers: any input is read (as a nupp profile JSON
 * document or as collapsed stacks, by FUZZ_COLLAPSED) without a crash, a leak or
 * undefined behaviour; what reads is rendered in every format, and a profile written
 * and read back writes the same bytes again (the lossless round trip). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/profile.h"
#include "report/report_internal.h"

/* Renders p in fmt into a malloc'ed buffer; NULL if the writer failed. */
static char *fuzz_render(const struct nupp_profile *p, enum nupp_format fmt, size_t *len)
{
	struct nupp_report_opts o = { .sz = sizeof(o), .top = 5 };
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	int err;

	if (!f)
		abort();
	err = nupp_profile_write(p, fmt, &o, f);
	fclose(f);
	if (err) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* Reads data with the reader under test. */
static int fuzz_read(const void *data, size_t size, struct nupp_profile *p)
{
#ifdef FUZZ_COLLAPSED
	return nupp_rread_collapsed(data, size, "fuzz", p);
#else
	return nupp_profile_read_mem(data, size, "fuzz", p);
#endif
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	static const enum nupp_format all[] = { NUPP_FMT_JSON, NUPP_FMT_COLLAPSED, NUPP_FMT_SVG, NUPP_FMT_SPEEDSCOPE,
						NUPP_FMT_PPROF, NUPP_FMT_TOP, NUPP_FMT_CSV };
	enum nupp_format rt = data && size && data[0] == '{' ? NUPP_FMT_JSON : NUPP_FMT_COLLAPSED;
	struct nupp_profile p = { 0 }, q = { 0 };
	char *a, *b, *out;
	size_t la, lb, lo, i;

#ifdef FUZZ_COLLAPSED
	rt = NUPP_FMT_COLLAPSED;
#endif
	if (fuzz_read(data, size, &p))
		return 0;
	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		out = fuzz_render(&p, all[i], &lo);
		if (!out)
			abort(); /* a profile that reads must render */
		free(out);
	}
	/* Written and read back, it writes the same bytes. */
	a = fuzz_render(&p, rt, &la);
	if (rt == NUPP_FMT_COLLAPSED ? nupp_rread_collapsed(a, la, "again", &q) : nupp_profile_read_mem(a, la, "again", &q))
		abort();
	b = fuzz_render(&q, rt, &lb);
	if (!b || la != lb || memcmp(a, b, la))
		abort();
	free(a);
	free(b);
	nupp_profile_free(&q);
	nupp_profile_free(&p);
	return 0;
}
