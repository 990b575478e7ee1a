/* recio thread pool: persistent pthreads that share one batch through an atomic work counter.
 * Each thread owns a state object (here: an rc_worker with its libjpeg decompressor). */
#ifndef RECIO_POOL_H
#define RECIO_POOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

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

/* A byte budget shared by threads: each takes what it is about to allocate and gives it back
 * when done, waiting while the others hold too much. A taker never holds one share while it
 * waits for another (rc_budget_take is called with nothing taken), so waiting cannot deadlock:
 * every holder finishes without needing the budget again. limit 0: no limit. */
typedef struct rc_budget {
  pthread_mutex_t mu;
  pthread_cond_t freed;
  uint64_t limit, used;
} rc_budget;

void rc_budget_init(rc_budget *b, uint64_t limit);
void rc_budget_destroy(rc_budget *b);
/* Takes n bytes, waiting until they fit. Returns 0, or -1 at once when n alone is over the
 * limit (it would never fit). */
int rc_budget_take(rc_budget *b, uint64_t n);
void rc_budget_give(rc_budget *b, uint64_t n);

#endif
