/* The stacks the sampler sent, held in userspace (struct smp_stk): read from the stack
 * ring, found by key, kept in each buffer's list by the drain that last counted them,
 * given the names drains made, and let go of (their marks cleared in the stacks map) when
 * idle or crowded. Names no stack (sampler_name.c) and reads no count (sampler_drain.c). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sampler_priv.h"
#include "sampler.skel.h"

/* Drains of its buffer a stack may go uncounted and stay: a minute at record's period
 * (500 ms, two buffers). Keeping one costs memory only (bounded by the crowding rule);
 * deleting one costs an interrupt, and a program's stacks mostly come back (luacheck:
 * 4,000 stacks in 10 s, of which a window of 16 drains at 200 ms deleted most). */
#define SMP_STK_IDLE 60

/* Clears the mark of stack key k, unless another stack's took its slot since. */
void smp_stk_unmark(struct nupp_sampler *s, __u64 k)
{
	__u64 was = k;

	if (s->marks)
		__atomic_compare_exchange_n(&s->marks[nupp_smp_stack_slot(k, s->stk_slots)], &was, 0, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/* Clears every mark of buffer buf, which nothing writes now. */
void smp_stk_unmark_all(struct nupp_sampler *s, int buf)
{
	if (s->marks)
		memset(&s->marks[buf ? s->stk_slots : 0], 0, (size_t)s->stk_slots * sizeof(*s->marks));
}

/* A stack the sampler sent (struct nupp_smp_stack_rec, up to its depth): held for its key
 * (a drain finds it there when it counts it), unless held already (sent again: its slot
 * was another stack's). One that cannot be held (malformed, or out of memory) has its
 * mark cleared, so that BPF sends it again. */
int smp_on_stack(void *ctx, void *data, size_t size)
{
	struct nupp_sampler *s = ctx;
	const struct nupp_smp_stack_rec *r = data;
	size_t hdr = offsetof(struct nupp_smp_stack_rec, st) + offsetof(struct nupp_smp_stack, frames);

	if (size < hdr)
		return 0;
	if (smp_stk_get(s, r->key))
		return 0;
	if (r->st.depth > smp_walk_depth(s) || hdr + (size_t)r->st.depth * sizeof(r->st.frames[0]) > size ||
	    !smp_stk_add(s, r->key, &r->st, NUPP_SMP_STACK_SIZE(r->st.depth))) {
		s->stk_lost++;
		smp_stk_unmark(s, r->key);
	}
	return 0;
}

/* Gives name (taken, not copied) to c, for process tgid and frame table table. */
void smp_stk_give_name(struct smp_stk *c, char *name, __u32 tgid, bool cut, unsigned long long table)
{
	free(c->name);
	c->name = name;
	c->name_tgid = tgid;
	c->name_cut = cut;
	c->name_table = table;
}

/* Keeps a copy of name as c's (a failed copy only costs the name). */
void smp_stk_name(struct smp_stk *c, const char *name, __u32 tgid, bool cut, unsigned long long table)
{
	char *copy = strdup(name);

	if (copy)
		smp_stk_give_name(c, copy, tgid, cut, table);
}

/* Bucket of stack key k among nb (a power of two). */
static size_t smp_stk_bucket(__u64 k, size_t nb)
{
	return (size_t)((k * 0x9e3779b97f4a7c15ull) >> 20) & (nb - 1);
}

/* The stack held for key k, or NULL. */
struct smp_stk *smp_stk_get(struct nupp_sampler *s, __u64 k)
{
	struct smp_stk *c;

	if (!s->stk_nb)
		return NULL;
	for (c = s->stk[smp_stk_bucket(k, s->stk_nb)]; c; c = c->next)
		if (c->key == k)
			return c;
	return NULL;
}

/* Takes c out of its buffer's list (c->older and c->newer are left as they were). */
static void smp_stk_unlist(struct nupp_sampler *s, struct smp_stk *c)
{
	int b = !!(c->key & NUPP_SMP_STACK_BUF);

	if (c->older)
		c->older->newer = c->newer;
	else if (s->stk_old[b] == c)
		s->stk_old[b] = c->newer;
	if (c->newer)
		c->newer->older = c->older;
	else if (s->stk_new[b] == c)
		s->stk_new[b] = c->older;
}

/* Marks c counted in this drain: the newest of its buffer's list, which stays ordered by
 * the drain that last counted each stack. */
void smp_stk_used(struct nupp_sampler *s, struct smp_stk *c)
{
	int b = !!(c->key & NUPP_SMP_STACK_BUF);

	c->used = s->drains;
	if (s->stk_new[b] == c)
		return;
	smp_stk_unlist(s, c);
	c->older = s->stk_new[b];
	c->newer = NULL;
	if (c->older)
		c->older->newer = c;
	else
		s->stk_old[b] = c;
	s->stk_new[b] = c;
}

/* Holds a copy of rec (size bytes) for key k; NULL when out of memory. */
struct smp_stk *smp_stk_add(struct nupp_sampler *s, __u64 k, const struct nupp_smp_stack *rec, size_t size)
{
	size_t n = s->stk_n[0] + s->stk_n[1], b;
	struct smp_stk *c;

	if (n + 1 > s->stk_nb) {
		size_t nb = s->stk_nb ? 2 * s->stk_nb : 4096, i;
		struct smp_stk **t = calloc(nb, sizeof(*t)), *next;

		if (!t)
			return NULL;
		for (i = 0; i < s->stk_nb; i++)
			for (c = s->stk[i]; c; c = next) {
				next = c->next;
				b = smp_stk_bucket(c->key, nb);
				c->next = t[b];
				t[b] = c;
			}
		free(s->stk);
		s->stk = t;
		s->stk_nb = nb;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->rec = malloc(size))) {
		free(c);
		return NULL;
	}
	memcpy(c->rec, rec, size);
	c->size = size;
	c->key = k;
	b = smp_stk_bucket(k, s->stk_nb);
	c->next = s->stk[b];
	s->stk[b] = c;
	s->stk_n[!!(k & NUPP_SMP_STACK_BUF)]++;
	smp_stk_used(s, c);
	return c;
}

/* Lets go of buffer buf's stacks not counted for SMP_STK_IDLE of its drains (all: every
 * one; crowded past half the room: the least recently counted down to three eighths of
 * it, a few each drain rather than most at once), clearing their marks (unmark; none
 * other writes the buffer's marks while it is drained). The oldest come first in the
 * buffer's list: the walk stops at the first stack to keep. */
void smp_stk_evict(struct nupp_sampler *s, int buf, bool all, bool unmark)
{
	__u64 idle = 2 * SMP_STK_IDLE;
	size_t keep = s->stk_n[buf] > s->opts.max_stacks / 2 ? s->opts.max_stacks / 8 * 3 : SIZE_MAX;
	struct smp_stk **pp, *c;

	while ((c = s->stk_old[buf]) && (all || c->used + idle < s->drains || s->stk_n[buf] > keep)) {
		if (unmark)
			smp_stk_unmark(s, c->key);
		smp_stk_unlist(s, c);
		for (pp = &s->stk[smp_stk_bucket(c->key, s->stk_nb)]; *pp != c; pp = &(*pp)->next)
			;
		*pp = c->next;
		s->stk_n[buf]--;
		free(c->rec);
		free(c->name);
		free(c);
	}
}
