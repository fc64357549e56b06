/* Runs independent slow steps side by side: loading the channels' BPF programs, and
 * closing them (a uprobe's detach waits for kernel grace periods, which detaches made
 * side by side share). */
#include <pthread.h>
#include <stddef.h>

#include "nupp_internal.h"

/* At most this many threads at once. */
#define PAR_MAX_THREADS 32

/* The shared work list of one nupp_parallel call. */
struct par_job {
	void (*fn)(void *arg, size_t i);
	void *arg;
	size_t n;
	size_t next; /* the next index to take (atomic) */
};

/* Takes and runs items until none is left. */
static void *par_worker(void *p)
{
	struct par_job *j = p;
	size_t i;

	while ((i = __atomic_fetch_add(&j->next, 1, __ATOMIC_SEQ_CST)) < j->n)
		j->fn(j->arg, i);
	return NULL;
}

/* Calls fn(arg, i) for every i < n, concurrently, and returns when all have returned.
 * Runs them in this thread when no thread can be made. */
void nupp_parallel(void (*fn)(void *arg, size_t i), void *arg, size_t n)
{
	struct par_job j = { .fn = fn, .arg = arg, .n = n, .next = 0 };
	pthread_t th[PAR_MAX_THREADS];
	size_t k, nth = 0;

	for (k = 1; k < n && nth < PAR_MAX_THREADS; k++) {
		if (pthread_create(&th[nth], NULL, par_worker, &j))
			break;
		nth++;
	}
	par_worker(&j);
	for (k = 0; k < nth; k++)
		pthread_join(th[k], NULL);
}
