/* The abort table as RFC 4180 CSV: severity,count,reason,location,zonePath. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nupp/profile.h"

/* Writes one field, quoted when it holds a comma, a quote, CR or LF. */
static void csv_field(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

/* Writes the header and one CRLF-terminated record per row. */
int nupp_write_abort_csv(const struct nupp_abort_set *a, FILE *f)
{
	size_t i;

	fputs("severity,count,reason,location,zonePath\r\n", f);
	for (i = 0; i < a->n; i++) {
		const struct nupp_abort_row *r = &a->rows[i];

		fprintf(f, "%s,%llu,", nupp_severity_name(r->severity), (unsigned long long)r->count);
		csv_field(f, r->reason);
		fputc(',', f);
		csv_field(f, r->location);
		fputc(',', f);
		csv_field(f, r->zone_path);
		fputs("\r\n", f);
	}
	return ferror(f) ? -EIO : 0;
}
