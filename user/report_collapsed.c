/* Collapsed-stack text: "frame;frame;frame count" per line, count descending. */
#include <errno.h>
#include <stdio.h>

#include "nupp/profile.h"

/* Writes the rows as collapsed stacks. Rows with the same stack in different zones
 * are written as they are (the caller filters or merges zones first). */
int nupp_write_collapsed(const struct nupp_sample_set *s, FILE *f)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (s->rows[i].count && fprintf(f, "%s %llu\n", s->rows[i].stack,
						(unsigned long long)s->rows[i].count) < 0)
			return -EIO;
	return ferror(f) ? -EIO : 0;
}
