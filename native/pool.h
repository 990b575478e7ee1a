/* recio thread pool: persistent pthreads that share one batch through an atomic work counter.
 * Each thread owns a state object (here: an rc_worker with its libjpeg decompressor). */
#ifndef RECIO_POOL_H
#define RECIO_POOL_H

#include <stddef.h>

typedef struct rc_pool rc_pool;
typedef void *(*rc_state_new_fn)(void);
typedef void (*rc_state_free_fn)(void *state);
typedef void (*rc_task_fn)(void *ctx, void *state, size_t item);

/* Starts n threads, each with state_new(). Returns NULL on failure (nothing left running). */
rc_pool *rc_pool_new(int n, rc_state_new_fn state_new, rc_state_free_fn state_free);
int rc_pool_size(const rc_pool *p);
/* Runs fn(ctx, state, i) for i in [0, n) on the pool's threads and waits for all of them.
 * Calls from several threads are serialised. Returns -1 if the pool is shut down. */
int rc_pool_run(rc_pool *p, rc_task_fn fn, void *ctx, size_t n);
/* Stops and joins the threads, frees the states. Idempotent; waits for a running batch. */
void rc_pool_shutdown(rc_pool *p);
/* Frees the pool (after shutdown). */
void rc_pool_free(rc_pool *p);
/* After fork() the child has no pool threads: forget them without joining. */
void rc_pool_forget(rc_pool *p);

#endif
