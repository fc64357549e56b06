/* Internals shared by the comparison reports (user/compare/diff.c, user/compare/diff_write.c,
 * user/compare/why.c): a string -> index table, and names as JSON strings. */
#ifndef NUPP_COMPARE_INTERNAL_H
#define NUPP_COMPARE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

/* -- A string -> index table (the caller keeps its values in an array indexed by what
 * the table returns) -- */

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

/* A name (bytes, maybe not UTF-8) as a JSON string in the nupp profile's lossless form
 * (nupp_bytes_to_utf8); NULL on ENOMEM. */
json_t *nupp_json_name(const char *bytes);
/* Writes doc (taken: freed here) to f, indented, with a final newline; 0, -ENOMEM (doc
 * NULL) or -EIO. */
int nupp_json_dump(json_t *doc, FILE *f);

#endif /* NUPP_COMPARE_INTERNAL_H */
