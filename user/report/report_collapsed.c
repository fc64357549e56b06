/* Collapsed-stack text: "frame;frame;frame count" per line, count descending. */
#include <errno.h>
#include <stdio.h>

#include "nupp/profile.h"
#include "core/nupp_internal.h"

/* Writes the rows as collapsed stacks, one line per (zone, stack): the rows of one stack
 * in several processes or threads are merged. Rows with the same stack in different
 * zones are written as they are (the caller filters or merges zones first). */
int nupp_write_collapsed(const struct nupp_sample_set *s, FILE *f)
{
	struct nupp_sample_set m = { 0 };
	size_t i;
	int err = 0;

	for (i = 0; i < s->n && !err; i++) {
		struct nupp_sample_row c = s->rows[i];

		c.pid = c.tid = 0;
		if (c.count)
			err = nupp_sample_set_add(&m, c.zone_path, c.stack, &c);
	}
	if (err)
		nupp_fail(err, "out of memory");
	else
		nupp_sample_set_sort(&m);
	for (i = 0; !err && i < m.n; i++)
		if (fprintf(f, "%s %llu\n", m.rows[i].stack, (unsigned long long)m.rows[i].count) < 0)
			err = -EIO;
	nupp_sample_set_free(&m);
	return err ? err : ferror(f) ? -EIO : 0;
}
