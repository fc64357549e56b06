/* Helpers of the comparison reports: a string -> index table (FNV-1a, open
 * addressing), and names as JSON strings. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/profile.h"
#include "compare_internal.h"

/* FNV-1a of len bytes. */
static uint64_t strtab_hash(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

/* Doubles the slot array; 0 or -ENOMEM. */
static int strtab_grow(struct nupp_strtab *t)
{
	size_t n = t->nslots ? t->nslots * 2 : 1024, i, k;
	size_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (i = 0; i < t->n; i++) {
		for (k = strtab_hash(t->keys[i], t->lens[i]) & (n - 1); s[k]; k = (k + 1) & (n - 1))
			;
		s[k] = i + 1;
	}
	free(t->slots);
	t->slots = s;
	t->nslots = n;
	return 0;
}

/* The index of key[0..len), added if asked. */
long nupp_strtab_get(struct nupp_strtab *t, const char *key, size_t len, bool add)
{
	size_t k, mask;

	if ((t->n + 1) * 2 > t->nslots && strtab_grow(t))
		return -ENOMEM;
	mask = t->nslots - 1;
	for (k = strtab_hash(key, len) & mask; t->slots[k]; k = (k + 1) & mask) {
		size_t i = t->slots[k] - 1;

		if (t->lens[i] == len && memcmp(t->keys[i], key, len) == 0)
			return (long)i;
	}
	if (!add)
		return -1;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		char **nk = realloc(t->keys, cap * sizeof(*nk));
		size_t *nl;

		if (!nk)
			return -ENOMEM;
		t->keys = nk;
		nl = realloc(t->lens, cap * sizeof(*nl));
		if (!nl)
			return -ENOMEM;
		t->lens = nl;
		t->cap = cap;
	}
	t->keys[t->n] = strndup(key, len);
	if (!t->keys[t->n])
		return -ENOMEM;
	t->lens[t->n] = len;
	t->slots[k] = t->n + 1;
	return (long)t->n++;
}

/* Frees the table and its keys. */
void nupp_strtab_free(struct nupp_strtab *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		free(t->keys[i]);
	free(t->keys);
	free(t->lens);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

/* A name as a JSON string in the lossless form. */
json_t *nupp_json_name(const char *bytes)
{
	char *u = nupp_bytes_to_utf8(bytes ? bytes : "");
	json_t *j;

	if (!u)
		return NULL;
	j = json_string(u);
	free(u);
	return j;
}

/* Writes doc (taken: freed here) to f, indented, with a final newline; 0, -ENOMEM (doc
 * NULL) or -EIO. */
int nupp_json_dump(json_t *doc, FILE *f)
{
	int err;

	if (!doc)
		return -ENOMEM;
	err = json_dumpf(doc, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER) ? -EIO : 0;
	if (!err && fputc('\n', f) == EOF)
		err = -EIO;
	json_decref(doc);
	return err;
}
