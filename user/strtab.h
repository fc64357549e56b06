/* A string -> index table for libnupp's report builders (diff, why): the caller keeps
 * its values in an array indexed by what the table returns. */
#ifndef NUPP_STRTAB_H
#define NUPP_STRTAB_H

#include <stdbool.h>
#include <stddef.h>

struct nupp_strtab {
	char **keys;   /* n keys, NUL-terminated copies */
	size_t *lens;
	size_t n, cap;
	size_t *slots; /* open addressing: index + 1, 0 = empty */
	size_t nslots; /* a power of two */
};

/* The index of key[0..len): an existing one, or (add) a new one, n - 1. -1 when absent
 * and not added; -ENOMEM. */
long nupp_strtab_get(struct nupp_strtab *t, const char *key, size_t len, bool add);
/* Frees the table and its keys. */
void nupp_strtab_free(struct nupp_strtab *t);

#endif /* NUPP_STRTAB_H */
