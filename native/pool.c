/* recio thread pool (see pool.h).
 *
 * NOTE [pool handshake]: rc_pool_run publishes (fn, ctx, n), bumps `generation` and broadcasts;
 * each thread wakes on a new generation, claims items with an atomic fetch-add until they run
 * out, then decrements `active`; the last one signals `done`. `run_mu` serialises batches and
 * shutdown, so a batch is never torn down while threads still use it.
 */
#define _GNU_SOURCE
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
  rc_pool *pool;
  void *state;
  pthread_t thread;
  int started;
} rc_thread;

struct rc_pool {
  pthread_mutex_t run_mu; /* one batch (or shutdown) at a time */
  pthread_mutex_t mu;
  pthread_cond_t wake, done;
  uint64_t generation;
  int stopping, stopped;
  int active;
  rc_task_fn fn;
  void *ctx;
  size_t n;
  atomic_size_t next;
  int nthreads;
  rc_thread *threads;
  rc_state_free_fn state_free;
};

static void *thread_main(void *arg) {
  rc_thread *t = arg;
  rc_pool *p = t->pool;
  uint64_t seen = 0;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    while (!p->stopping && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
    if (p->stopping) {
      pthread_mutex_unlock(&p->mu);
      return NULL;
    }
    seen = p->generation;
    rc_task_fn fn = p->fn;
    void *ctx = p->ctx;
    size_t n = p->n;
    pthread_mutex_unlock(&p->mu);
    for (;;) {
      size_t i = atomic_fetch_add(&p->next, 1);
      if (i >= n) break;
      fn(ctx, t->state, i);
    }
    pthread_mutex_lock(&p->mu);
    if (--p->active == 0) pthread_cond_signal(&p->done);
    pthread_mutex_unlock(&p->mu);
  }
}

static void stop_threads(rc_pool *p) {
  pthread_mutex_lock(&p->mu);
  p->stopping = 1;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->nthreads; i++)
    if (p->threads[i].started) pthread_join(p->threads[i].thread, NULL);
}

static void free_states(rc_pool *p) {
  for (int i = 0; i < p->nthreads; i++) {
    if (p->threads[i].state) p->state_free(p->threads[i].state);
    p->threads[i].state = NULL;
  }
}

rc_pool *rc_pool_new(int n, rc_state_new_fn state_new, rc_state_free_fn state_free) {
  if (n < 1) return NULL;
  rc_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->threads = calloc((size_t)n, sizeof *p->threads);
  if (!p->threads) {
    free(p);
    return NULL;
  }
  pthread_mutex_init(&p->run_mu, NULL);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  atomic_init(&p->next, 0);
  p->nthreads = n;
  p->state_free = state_free;
  int ok = 1;
  for (int i = 0; i < n && ok; i++) {
    p->threads[i].pool = p;
    p->threads[i].state = state_new();
    ok = p->threads[i].state != NULL;
  }
  for (int i = 0; i < n && ok; i++) {
    ok = pthread_create(&p->threads[i].thread, NULL, thread_main, &p->threads[i]) == 0;
    p->threads[i].started = ok;
  }
  if (!ok) {
    stop_threads(p);
    free_states(p);
    p->stopped = 1;
    rc_pool_free(p);
    return NULL;
  }
  return p;
}

int rc_pool_size(const rc_pool *p) {
  return p->nthreads;
}

int rc_pool_run(rc_pool *p, rc_task_fn fn, void *ctx, size_t n) {
  pthread_mutex_lock(&p->run_mu);
  if (p->stopped) {
    pthread_mutex_unlock(&p->run_mu);
    return -1;
  }
  if (n == 1) {
    /* One item: run it here with the first worker's state (idle: run_mu is ours), saving the
     * two thread hand-offs a one-image call (im2rec, image_sizes of one) would cost. */
    fn(ctx, p->threads[0].state, 0);
  } else if (n > 1) {
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store(&p->next, 0);
    p->active = p->nthreads;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    while (p->active > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
  }
  pthread_mutex_unlock(&p->run_mu);
  return 0;
}

void rc_pool_shutdown(rc_pool *p) {
  pthread_mutex_lock(&p->run_mu);
  if (!p->stopped) {
    stop_threads(p);
    free_states(p);
    p->stopped = 1;
  }
  pthread_mutex_unlock(&p->run_mu);
}

void rc_pool_forget(rc_pool *p) {
  /* The threads live only in the parent; the child keeps its copies of the states' memory. */
  p->stopped = 1;
  pthread_mutex_init(&p->run_mu, NULL);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
}

void rc_pool_free(rc_pool *p) {
  if (!p) return;
  pthread_mutex_destroy(&p->run_mu);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  free(p->threads);
  free(p);
}

/* ---- the byte budget ---- */

void rc_budget_init(rc_budget *b, uint64_t limit) {
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->freed, NULL);
  b->limit = limit;
  b->used = 0;
}

void rc_budget_destroy(rc_budget *b) {
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->freed);
}

int rc_budget_take(rc_budget *b, uint64_t n) {
  if (!b->limit || !n) return 0;
  if (n > b->limit) return -1;
  pthread_mutex_lock(&b->mu);
  while (b->used + n > b->limit) pthread_cond_wait(&b->freed, &b->mu);
  b->used += n;
  pthread_mutex_unlock(&b->mu);
  return 0;
}

void rc_budget_give(rc_budget *b, uint64_t n) {
  if (!b->limit || !n) return;
  pthread_mutex_lock(&b->mu);
  b->used -= n < b->used ? n : b->used;
  pthread_cond_broadcast(&b->freed);
  pthread_mutex_unlock(&b->mu);
}
