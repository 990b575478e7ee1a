/* recio thread pool (see pool.h).
 *
 * NOTE [job queue]: rc_pool_submit appends a job to the queue and broadcasts `wake`. Every idle
 * thread joins the job at the head (workers++), claims its items with an atomic fetch-add
 * until they run out, then takes the job off the head (if no other thread has yet) and leaves
 * it (workers--); the one that leaves it last marks it finished under the job's own mutex and
 * signals its waiter. Once off the queue no thread joins a job again, so the last to leave is
 * the last to touch it. The threads go straight from one job to the next: a batch queued
 * behind the running one starts without any caller's thread waking up in between. A waiter
 * needs only its job (not the pool), so it may wait after the pool is freed. Shutdown sets
 * `stopping` and `cancel`: the threads skip the items left, finish every queued job
 * (cancelled) and end when the queue is empty.
 */
#define _GNU_SOURCE
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
  rc_pool *pool;
  void *state;
  pthread_t thread;
  int started;
  int index; /* 0..nthreads-1: threads from `active` on are parked */
} rc_thread;

struct rc_pool {
  pthread_mutex_t run_mu; /* one shutdown at a time */
  pthread_mutex_t mu;     /* the queue, stopping */
  pthread_cond_t wake;
  rc_job *head, *tail;
  int stopping, stopped;
  atomic_int cancel;
  int nthreads;
  int active;                   /* NOTE [parked threads] (mu) */
  atomic_uint_fast64_t busy_ns; /* time the threads spent in jobs, all together (wall) */
  atomic_uint_fast64_t cpu_ns;  /* their CPU time in them (NOTE [pool clocks]) */
  rc_thread *threads;
  /* the state of one-item runs, made in the caller's thread (inline_mu) */
  pthread_mutex_t inline_mu;
  void *inline_state;
  rc_state_free_fn state_free;
};

static void job_finish(rc_job *j) {
  pthread_mutex_lock(&j->mu);
  j->finished = 1;
  pthread_cond_broadcast(&j->cv);
  pthread_mutex_unlock(&j->mu);
}

static uint64_t clock_ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* NOTE [pool clocks]: what the threads' work cost is counted on two clocks, read once a job a
 * thread (not an item: a small image decodes in microseconds). cpu_ns, the thread's own CPU
 * time (CLOCK_THREAD_CPUTIME_ID), is the work: what a decode costs, wherever and beside
 * whatever it runs (stats.stages' decode_cpu_s, bench's CPU per image). busy_ns is the
 * monotonic wall clock on purpose: it is the stage's occupancy, set against its capacity
 * (threads x wall seconds, stats.stages' thread_s) for the decode stage's utilisation, and it
 * must count the time a thread holds an item without running it (preempted by other
 * processes, waiting on the decode budget), which the CPU clock leaves out; cpu / busy below
 * 1 is how bench tells contended cores (recio/bench/bottleneck.py). The autotuner decides
 * from the consumer's waits alone (NOTE [thread tuner]). */
typedef struct {
  uint64_t wall, cpu;
} work_clocks;

static work_clocks work_start(void) {
  return (work_clocks){clock_ns(CLOCK_MONOTONIC), clock_ns(CLOCK_THREAD_CPUTIME_ID)};
}

static void work_done(rc_pool *p, work_clocks start) {
  atomic_fetch_add_explicit(&p->cpu_ns, clock_ns(CLOCK_THREAD_CPUTIME_ID) - start.cpu,
                            memory_order_relaxed);
  atomic_fetch_add_explicit(&p->busy_ns, clock_ns(CLOCK_MONOTONIC) - start.wall,
                            memory_order_relaxed);
}

/* NOTE [parked threads]: rc_pool_set_active(p, k) leaves threads 0..k-1 working; the others
 * finish the job they are in and then wait on `wake` like an idle thread, joining no job until
 * `active` grows again (or the pool stops: then every thread drains the queue). Parking, not
 * ending threads, keeps each thread's state (its libjpeg decompressor) and makes a change
 * cheap and reversible; what an item computes never depends on which thread runs it, so the
 * pixels do not depend on the count. */
static void *thread_main(void *arg) {
  rc_thread *t = arg;
  rc_pool *p = t->pool;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stopping && (!p->head || t->index >= p->active)) pthread_cond_wait(&p->wake, &p->mu);
    rc_job *j = p->head;
    if (!j) break; /* stopping, and nothing queued */
    j->workers++;
    pthread_mutex_unlock(&p->mu);
    const work_clocks start = work_start(); /* NOTE [pool clocks] */
    for (;;) {
      size_t i = atomic_fetch_add(&j->next, 1);
      if (i >= j->n) break;
      if (atomic_load_explicit(&p->cancel, memory_order_relaxed))
        atomic_store(&j->cancelled, 1);
      else
        j->fn(j->ctx, t->state, i);
    }
    work_done(p, start);
    pthread_mutex_lock(&p->mu);
    if (p->head == j) {
      p->head = j->queued;
      if (!p->head) p->tail = NULL;
    }
    if (--j->workers == 0) job_finish(j); /* off the queue: nobody joins it again */
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static void stop_threads(rc_pool *p) {
  pthread_mutex_lock(&p->mu);
  p->stopping = 1;
  atomic_store(&p->cancel, 1);
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
  pthread_mutex_lock(&p->inline_mu);
  if (p->inline_state) p->state_free(p->inline_state);
  p->inline_state = NULL;
  pthread_mutex_unlock(&p->inline_mu);
}

static void init_sync(rc_pool *p) {
  pthread_mutex_init(&p->run_mu, NULL);
  pthread_mutex_init(&p->mu, NULL);
  pthread_mutex_init(&p->inline_mu, NULL);
  pthread_cond_init(&p->wake, NULL);
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
  init_sync(p);
  atomic_init(&p->cancel, 0);
  p->nthreads = n;
  p->active = n;
  atomic_init(&p->busy_ns, 0);
  atomic_init(&p->cpu_ns, 0);
  p->state_free = state_free;
  p->inline_state = state_new();
  int ok = p->inline_state != NULL;
  for (int i = 0; i < n && ok; i++) {
    p->threads[i].pool = p;
    p->threads[i].index = i;
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

int rc_pool_set_active(rc_pool *p, int k) {
  if (k < 1) k = 1;
  if (k > p->nthreads) k = p->nthreads;
  pthread_mutex_lock(&p->mu);
  p->active = k;
  pthread_cond_broadcast(&p->wake); /* the unparked ones look at the queue */
  pthread_mutex_unlock(&p->mu);
  return k;
}

int rc_pool_active(rc_pool *p) {
  pthread_mutex_lock(&p->mu);
  const int k = p->active;
  pthread_mutex_unlock(&p->mu);
  return k;
}

uint64_t rc_pool_busy_ns(rc_pool *p) {
  return atomic_load_explicit(&p->busy_ns, memory_order_relaxed);
}

uint64_t rc_pool_cpu_ns(rc_pool *p) {
  return atomic_load_explicit(&p->cpu_ns, memory_order_relaxed);
}

void rc_job_init(rc_job *j, rc_task_fn fn, void *ctx, size_t n) {
  j->fn = fn;
  j->ctx = ctx;
  j->n = n;
  atomic_init(&j->next, 0);
  atomic_init(&j->cancelled, 0);
  j->workers = 0;
  j->queued = NULL;
  j->finished = 0;
  pthread_mutex_init(&j->mu, NULL);
  /* rc_job_wait's timeout on the monotonic clock: a step of the system's clock does not
   * shorten or stretch it */
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&j->cv, &attr);
  pthread_condattr_destroy(&attr);
}

void rc_job_destroy(rc_job *j) {
  pthread_mutex_destroy(&j->mu);
  pthread_cond_destroy(&j->cv);
}

int rc_pool_submit(rc_pool *p, rc_job *j) {
  pthread_mutex_lock(&p->mu);
  if (p->stopping) {
    pthread_mutex_unlock(&p->mu);
    return -1;
  }
  if (j->n == 0) {
    pthread_mutex_unlock(&p->mu);
    job_finish(j);
    return 0;
  }
  if (p->tail)
    p->tail->queued = j;
  else
    p->head = j;
  p->tail = j;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  return 0;
}

int rc_job_wait(rc_job *j, double timeout) {
  pthread_mutex_lock(&j->mu);
  if (timeout < 0) {
    while (!j->finished) pthread_cond_wait(&j->cv, &j->mu);
  } else if (!j->finished) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until); /* the clock of j->cv (rc_job_init) */
    const time_t whole = (time_t)timeout;
    until.tv_sec += whole;
    until.tv_nsec += (long)((timeout - (double)whole) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    while (!j->finished)
      if (pthread_cond_timedwait(&j->cv, &j->mu, &until) == ETIMEDOUT) break;
  }
  const int done = j->finished;
  pthread_mutex_unlock(&j->mu);
  return done;
}

int rc_job_cancelled(rc_job *j) {
  return atomic_load(&j->cancelled);
}

int rc_pool_run(rc_pool *p, rc_task_fn fn, void *ctx, size_t n) {
  if (n == 1) {
    /* One item: run it here with the caller's own state, saving the two thread hand-offs a
     * one-image call (im2rec, image_sizes of one) would cost. */
    pthread_mutex_lock(&p->inline_mu);
    void *state = p->inline_state;
    if (state) {
      const work_clocks start = work_start(); /* the pool's work too (NOTE [pool clocks]) */
      fn(ctx, state, 0);
      work_done(p, start);
    }
    pthread_mutex_unlock(&p->inline_mu);
    return state ? 0 : -1;
  }
  rc_job j;
  rc_job_init(&j, fn, ctx, n);
  int rc = rc_pool_submit(p, &j);
  if (rc == 0) {
    rc_job_wait(&j, -1);
    rc = rc_job_cancelled(&j) ? -1 : 0;
  }
  rc_job_destroy(&j);
  return rc;
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
  /* The threads live only in the parent; the child keeps its copies of the states' memory,
   * and of the queued jobs (never finished here: their waiters must not wait, see
   * NOTE [pending jobs] in bind_pending.c). */
  p->stopped = p->stopping = 1;
  p->head = p->tail = NULL;
  p->inline_state = NULL;
  init_sync(p);
}

void rc_pool_free(rc_pool *p) {
  if (!p) return;
  pthread_mutex_destroy(&p->run_mu);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->inline_mu);
  pthread_cond_destroy(&p->wake);
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
