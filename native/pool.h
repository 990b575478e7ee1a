/* recio thread pool: persistent pthreads that work through a queue of jobs, the items of one
 * job shared through an atomic work counter. Each thread owns a state object (here: an
 * rc_worker with its libjpeg decompressor). */
#ifndef RECIO_POOL_H
#define RECIO_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rc_pool rc_pool;
typedef void *(*rc_state_new_fn)(void);
typedef void (*rc_state_free_fn)(void *state);
typedef void (*rc_task_fn)(void *ctx, void *state, size_t item);

/* A queued job: fn(ctx, state, i) for every i in [0, n), run by the pool's threads once the
 * jobs submitted before it have all their items taken. The caller owns its memory, and keeps
 * it (and whatever ctx points to) until rc_job_wait reports it finished. The fields after n
 * are the pool's. */
typedef struct rc_job {
  rc_task_fn fn;
  void *ctx;
  size_t n;
  atomic_size_t next;    /* the next item to take */
  atomic_int cancelled;  /* items were skipped: the pool shut down meanwhile */
  int workers;           /* threads inside it (pool mutex) */
  struct rc_job *queued; /* the next job in the queue (pool mutex) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int finished; /* every item run (or skipped) and no thread inside it any more (mu) */
} rc_job;

/* Starts n threads, each with state_new(). Returns NULL on failure (nothing left running). */
rc_pool *rc_pool_new(int n, rc_state_new_fn state_new, rc_state_free_fn state_free);
int rc_pool_size(const rc_pool *p);
/* Parks all but the first k threads (1 <= k <= size, clamped): NOTE [parked threads]. Returns
 * the count set. */
int rc_pool_set_active(rc_pool *p, int k);
int rc_pool_active(rc_pool *p);
/* Nanoseconds the threads have spent in jobs (running their items; a one-item run in the
 * caller's thread too) since the pool started, all together, on the wall clock, counted as
 * each thread leaves a job: the stage's occupancy (NOTE [pool clocks] in pool.c). */
uint64_t rc_pool_busy_ns(rc_pool *p);
/* The threads' CPU time in those jobs (busy less the time the OS ran other threads): the work. */
uint64_t rc_pool_cpu_ns(rc_pool *p);
/* Runs fn(ctx, state, i) for i in [0, n) on the pool's threads and waits for all of them
 * (a job queued behind those submitted before it). Returns -1 if the pool is shut down, or
 * shut down before every item ran. */
int rc_pool_run(rc_pool *p, rc_task_fn fn, void *ctx, size_t n);
/* Prepares a job for rc_pool_submit; rc_job_destroy it once finished (or never submitted). */
void rc_job_init(rc_job *j, rc_task_fn fn, void *ctx, size_t n);
void rc_job_destroy(rc_job *j);
/* Queues j and returns at once; -1 (j not queued) if the pool is shut down. A job of no items
 * is finished at once. */
int rc_pool_submit(rc_pool *p, rc_job *j);
/* Waits until j is finished, at most timeout seconds (negative: no limit). 1: finished (the
 * pool's threads no longer touch j or ctx), 0: not yet. */
int rc_job_wait(rc_job *j, double timeout);
/* Whether a finished job had items skipped because the pool shut down first. */
int rc_job_cancelled(rc_job *j);
/* Stops and joins the threads, frees the states. Idempotent. The running items end; the
 * queued jobs' items left are skipped (those jobs finish, cancelled). */
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
