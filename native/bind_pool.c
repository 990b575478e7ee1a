/* Python binding of recio's native decode pool: the Pool object.
 *
 * Pool.decode_batch holds a buffer view of every input (or of the one buffer that spans of
 * it are the inputs of) and of the output for the whole batch, releases the GIL once while
 * the pool decodes, and turns the per-image C statuses and messages into Python objects only
 * after the GIL is back, and only where an image failed. Argument checking with readable
 * messages lives in recio/decode/; this layer re-checks sizes and spans so it is memory-safe
 * alone.
 */
#include "bind.h"

#include "crc32c.h"

static void *worker_new(void) {
  thread_state *s = calloc(1, sizeof *s);
  if (s && !(s->dec = rc_worker_new())) {
    free(s);
    return NULL;
  }
  return s;
}

static void worker_free(void *vs) {
  thread_state *s = vs;
  if (!s) return;
  rc_worker_free(s->dec);
  rc_encoder_free(s->enc);
  rc_lossless_free(s->ll);
  free(s);
}

/* NOTE [one pass per record]: where a local file has a checksum sidecar, two checks read each
 * record's bytes: the consumer's, its frames against the sidecar (NOTE [checksum sidecar] in
 * recio/records/checksum.py), and the pool's, the JPEG's whole-stream key (NOTE [whole-stream
 * check] in streamcheck.h). A CRC32C pass for each takes about 2.3 % of the iterator's CPU time on
 * 70 KB photos, one pass 1.2 % (perf, BENCHMARKS.md: the first pass over a record waits on
 * memory). So a decode_records batch given `crcs` has its decode threads take one pass over each
 * parsed record (one plain frame: the frame header and IRHeader, then the JPEG up to the frame's
 * end), just before its decode: the JPEG's CRC32C, which is its key as every other decode computes
 * it (the set means the same whoever filled it: these exact bytes were read whole and clean; two
 * records with the same JPEG under different headers share it), and the frame's, for the sidecar,
 * from the header's (a few dozen bytes) and the JPEG's by CRC algebra (rc_crc32c_combine: four
 * products, no second pass). The consumer compares the frame CRCs with the sidecar's table and
 * takes no pass of its own; a record that does not match is a bad slot (the image was decoded from
 * those bytes; the set holds only their own key, never a checksum from the sidecar). The checksum
 * is of the bytes the thread read just before the decode: a file written over while it is read may
 * change in between, as it may between any read and check. Records left to the exact parse (status
 * RECORD), and every other entry point (decode_batch, the DALI stage, stream_checked), compute the
 * key from the bytes themselves when a crop needs it. */
static uint64_t one_pass(const batch_ctx *c, size_t i, rc_span image) {
  const size_t head = (size_t)(c->records->starts[i] - c->records->offsets[i]);
  const uint32_t jpeg = rc_crc32c(0, image.buf, image.len);
  /* (a payload is below 2^29 bytes: the length fits) */
  c->frame_crcs[i] =
      rc_crc32c_combine(rc_crc32c(0, image.buf - head, head), jpeg, (uint32_t)image.len);
  return rc_checked_key_of(jpeg, image.len);
}

void decode_task(void *vctx, void *state, size_t i) {
  batch_ctx *c = vctx;
  rc_worker *w = ((thread_state *)state)->dec;
  rc_span image;
  c->errors[i * RC_ERRLEN] = 0; /* the text stays empty where no step writes one */
  if (!c->records) {
    image = c->images[i];
  } else if ((c->status[i] = rc_parse_record(c->records, i, &image)) != RC_OK) {
    return;
  } else if (c->frame_crcs) {
    rc_worker_key(w, one_pass(c, i, image));
  }
  uint8_t *out = c->out + i * c->out_stride;
  char *err = c->errors + i * RC_ERRLEN;
  if (c->draw)
    c->status[i] = rc_decode_drawn(w, image.buf, image.len, c->draw, c->draw_records[i],
                                   c->crops + 4 * i, c->flips + i, &c->opts, out, err);
  else
    c->status[i] = rc_decode(w, image.buf, image.len, c->crops ? c->crops + 4 * i : NULL,
                             c->flips ? c->flips[i] != 0 : 0, &c->opts, out, err);
  rc_worker_key(w, 0);
  rc_worker_release(w);
}

typedef struct {
  const rc_span *images;
  int32_t *sizes; /* [n][2] */
} sizes_ctx;

static void sizes_task(void *vctx, void *state, size_t i) {
  sizes_ctx *c = vctx;
  char err[RC_ERRLEN];
  int w = -1, h = -1;
  int st =
      rc_image_size(((thread_state *)state)->dec, c->images[i].buf, c->images[i].len, &w, &h, err);
  c->sizes[2 * i] = st == RC_OK ? w : st == RC_UNSUPPORTED ? -2 : -1;
  c->sizes[2 * i + 1] = st == RC_OK ? h : st == RC_UNSUPPORTED ? -2 : -1;
}

static PyObject *Pool_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  PoolObject *self = (PoolObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  pthread_mutex_init(&self->mu, NULL);
  pthread_cond_init(&self->idle, NULL);
  rc_budget_init(&self->budget, 0);
  self->checked = rc_checked_process();
  return (PyObject *)self;
}

/* NOTE [close vs batch]: a batch runs on the rc_pool with the GIL released, so another
 * thread's close() can run meanwhile. `mu` guards pool, closed, busy and
 * tearing_down. A batch marks the pool busy (enter_pool) before it releases the GIL and
 * unmarks it (leave_pool) after taking the GIL back; close sets `closed` first, so that no
 * new batch enters, then waits with the GIL released until `busy` is 0, and only then shuts
 * the rc_pool down and frees it. A second close() waits until the first one's teardown is
 * over. `mu` is never held while waiting for the GIL or running a batch: it only guards these
 * few fields, so taking it with the GIL held cannot deadlock. Pool_init counts as busy too.
 * Dealloc cannot meet a running batch: a method call holds a reference to its Pool. */

/* Whether this is a forked child of the process that made the pool. There the parent's pool
 * threads (and batches) do not exist and `mu` may be the copy of a locked mutex, so it is not
 * taken: the fields are read and written under the GIL alone (no thread of the child can be
 * in a batch on this pool, enter_pool refuses it). pid is only written by Pool_init with the
 * GIL held, and this module runs with the GIL (see PyInit__native). */
int forked(const PoolObject *self) {
  return self->pid && self->pid != getpid();
}

/* The pool, marked busy, for a caller holding the GIL; NULL with ValueError when it is closed
 * (or not initialised) and RuntimeError in a forked child. Pair with leave_pool. */
rc_pool *enter_pool(PoolObject *self) {
  if (forked(self)) {
    PyErr_SetString(PyExc_RuntimeError, "decode pool was created in another process (fork)");
    return NULL;
  }
  pthread_mutex_lock(&self->mu);
  rc_pool *p = self->closed ? NULL : self->pool;
  if (p) self->busy++;
  pthread_mutex_unlock(&self->mu);
  if (!p) PyErr_SetString(PyExc_ValueError, "decode pool is closed");
  return p;
}

void leave_pool(PoolObject *self) {
  pthread_mutex_lock(&self->mu);
  if (--self->busy == 0) pthread_cond_broadcast(&self->idle);
  pthread_mutex_unlock(&self->mu);
}

static int Pool_init(PoolObject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"num_threads", "max_decode_bytes", NULL};
  int n;
  unsigned long long budget = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "i|K", kwlist, &n, &budget)) return -1;
  if (n < 1 || n > 1024) {
    PyErr_Format(PyExc_ValueError, "num_threads must be in 1..1024, got %d", n);
    return -1;
  }
  if (forked(self)) {
    PyErr_SetString(PyExc_RuntimeError, "Pool already initialised (in the parent process)");
    return -1;
  }
  pthread_mutex_lock(&self->mu);
  const char *refuse = self->closed               ? "Pool is closed"
                       : self->pool || self->busy ? "Pool already initialised"
                                                  : NULL;
  if (!refuse) self->busy++; /* a close() meanwhile waits for the threads to exist */
  pthread_mutex_unlock(&self->mu);
  if (refuse) {
    PyErr_SetString(PyExc_RuntimeError, refuse);
    return -1;
  }
  rc_pool *p;
  Py_BEGIN_ALLOW_THREADS
  p = rc_pool_new(n, worker_new, worker_free);
  Py_END_ALLOW_THREADS
  pthread_mutex_lock(&self->mu);
  if (p) {
    self->pool = p;
    self->nthreads = n;
    self->pid = getpid();
    self->budget.limit = budget; /* before any batch: only this init can be in one */
  }
  pthread_mutex_unlock(&self->mu);
  leave_pool(self);
  if (!p) {
    PyErr_SetString(PyExc_RuntimeError, "could not start the decode threads");
    return -1;
  }
  return 0;
}

#if PY_VERSION_HEX >= 0x030D0000
#define interpreter_exiting() Py_IsFinalizing()
#else
#define interpreter_exiting() _Py_IsFinalizing()
#endif

/* Refuses new batches, waits for the running ones and shuts the threads down. Idempotent; a
 * concurrent second call returns once the first one's teardown is done. */
static void pool_close(PoolObject *self) {
  if (forked(self)) {
    /* The parent's threads are forgotten unjoined, its batches (counted in busy) not waited
     * for; the GIL is kept throughout, so this runs alone. */
    rc_pool *p = self->pool;
    self->pool = NULL;
    self->closed = 1;
    self->busy = self->tearing_down = 0;
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->idle, NULL);
    const uint64_t limit = self->budget.limit; /* its mutex too may be a locked copy */
    rc_budget_init(&self->budget, limit);
    self->checked = rc_checked_process(); /* the parent's may be a locked copy */
    if (p) {
      rc_pool_forget(p);
      rc_pool_free(p);
    }
    return;
  }
  if (interpreter_exiting()) {
    /* Daemon threads never take the GIL back now, so a batch one of them runs never leaves
     * the pool: waiting would hang the exit. Such a pool is refused to new batches and left
     * as it is (its threads end with the process). */
    pthread_mutex_lock(&self->mu);
    self->closed = 1;
    const int busy = self->busy > 0;
    pthread_mutex_unlock(&self->mu);
    if (busy) return;
  }
  Py_BEGIN_ALLOW_THREADS
  pthread_mutex_lock(&self->mu);
  self->closed = 1;
  while (self->busy > 0 || self->tearing_down) pthread_cond_wait(&self->idle, &self->mu);
  rc_pool *p = self->pool;
  self->pool = NULL;
  self->tearing_down = p != NULL;
  pthread_mutex_unlock(&self->mu);
  if (p) {
    rc_pool_shutdown(p);
    rc_pool_free(p);
    pthread_mutex_lock(&self->mu);
    self->tearing_down = 0;
    pthread_cond_broadcast(&self->idle);
    pthread_mutex_unlock(&self->mu);
  }
  Py_END_ALLOW_THREADS
}

static void Pool_dealloc(PoolObject *self) {
  /* busy is 0 here: every batch and init call holds a reference to self */
  pool_close(self);
  pthread_cond_destroy(&self->idle);
  pthread_mutex_destroy(&self->mu);
  rc_budget_destroy(&self->budget);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Pool_close(PoolObject *self, PyObject *unused) {
  pool_close(self);
  Py_RETURN_NONE;
}

/* An early check, before a batch's arguments are read (enter_pool checks again). */
int check_open(PoolObject *self) {
  if (!enter_pool(self)) return -1;
  leave_pool(self);
  return 0;
}

void job_release(job_views *v) {
  PyMem_Free(v->errors);
  v->errors = NULL;
  release_param(&v->out);
  release_param(&v->status);
  release_param(&v->crops);
  release_param(&v->flips);
  release_param(&v->draw_records);
  release_param(&v->crcs);
  Py_CLEAR(v->options);
}

/* A batch's arrays (as its call gives them) and its JobOptions. */
typedef struct {
  PyObject *out, *status, *options, *crops, *flips, *draw_records, *crcs;
} job_args;

/* Takes a's buffers for n images into v, and ctx's fields from them and the options; on
 * failure, an exception and nothing held. */
static int job_open(PoolObject *self, const job_args *a, Py_ssize_t n, job_views *v,
                    batch_ctx *ctx) {
  memset(v, 0, sizeof *v);
  if (!PyObject_TypeCheck(a->options, &JobOptionsType)) {
    PyErr_Format(PyExc_TypeError, "options must be a recio._native.JobOptions, not %s",
                 Py_TYPE(a->options)->tp_name);
    return -1;
  }
  const JobOptionsObject *o = (const JobOptionsObject *)a->options;
  const int drawn = o->draw != NULL;
  if (drawn && (a->crops == Py_None || a->flips == Py_None)) {
    PyErr_SetString(PyExc_ValueError, "keyed draws need crops and flips to write to");
    return -1;
  }
  const size_t stride = (size_t)o->opts.out_h * o->opts.out_w * 3 * o->opts.itemsize;
  if (get_param(a->out, &v->out, (Py_ssize_t)(stride * n), 1, "out") < 0 ||
      get_param(a->status, &v->status, n * 4, 1, "status") < 0 ||
      get_param(a->crops, &v->crops, n * 16, drawn, "crops") < 0 ||
      get_param(a->flips, &v->flips, n, drawn, "flips") < 0 ||
      get_param(drawn ? a->draw_records : Py_None, &v->draw_records, n * 8, 0, "draw_records") <
          0 ||
      get_param(a->crcs, &v->crcs, n * 4, 1, "crcs") < 0)
    goto fail;
  if (!v->out.buf || !v->status.buf || (drawn && !v->draw_records.buf)) {
    PyErr_SetString(PyExc_ValueError, "out and status (and draw_records, to draw) are required");
    goto fail;
  }
  /* not zeroed (a batch's 32 KB would sweep the cache): decode_task ends each text */
  v->errors = PyMem_Malloc((n ? (size_t)n : 1) * RC_ERRLEN);
  if (!v->errors) {
    PyErr_NoMemory();
    goto fail;
  }
  v->options = Py_NewRef(a->options);
  *ctx = (batch_ctx){
      .crops = v->crops.buf,
      .flips = v->flips.buf,
      .draw = drawn ? &((DrawObject *)o->draw)->draw : NULL,
      .draw_records = v->draw_records.buf,
      .status = v->status.buf,
      .errors = v->errors,
      .out = v->out.buf,
      .out_stride = stride,
      .frame_crcs = v->crcs.buf,
      .opts = o->opts,
  };
  ctx->opts.budget = &self->budget;
  ctx->opts.checked = self->checked;
  return 0;
fail:
  job_release(v);
  return -1;
}

/* Runs a decode job and gives its result: None when every status is 0 (the common case makes
 * no per-image objects), else the error text per image (None where it is 0). */
static PyObject *job_run(PoolObject *self, batch_ctx *ctx, Py_ssize_t n) {
  if (run_released(self, decode_task, ctx, n) < 0) return NULL;
  return all_ok(ctx->status, n) ? Py_NewRef(Py_None)
                                : per_image(ctx->status, ctx->errors, n, no_result, NULL);
}

PyDoc_STRVAR(decode_batch_doc,
             "decode_batch(buffers, out, status, options, crops=None, flips=None, starts=None, "
             "lengths=None, draw_records=None) -> list[str | None] | None\n\n"
             "Decodes every JPEG in buffers into out[i] (C-contiguous, writable) and its status "
             "into status[i] (int32), as options (a JobOptions) say. buffers: a sequence of "
             "bytes-like objects, or, with starts and lengths (int64 [n] each), one bytes-like "
             "object whose bytes [starts[i], starts[i] + lengths[i]) are image i (a span outside "
             "it is a ValueError). crops: int32 [n][4] buffer or None; flips: uint8 [n] or None. "
             "With the options' draw and draw_records (int64 [n]), image i's window and flip "
             "are drawn for record draw_records[i] once its header is read, and written to "
             "crops and flips (and its colour drawn and applied). Returns the error text per "
             "image (None where status is 0), or None when every status is 0. Use "
             "recio.decode.DecodePool, which checks the arguments.");

static PyObject *Pool_decode_batch(PoolObject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"buffers", "out",    "status",  "options",      "crops",
                           "flips",   "starts", "lengths", "draw_records", NULL};
  PyObject *buffers, *starts = Py_None, *lengths = Py_None;
  job_args a = {.crops = Py_None, .flips = Py_None, .draw_records = Py_None, .crcs = Py_None};
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO|OOOOO:decode_batch", kwlist, &buffers, &a.out,
                                   &a.status, &a.options, &a.crops, &a.flips, &starts, &lengths,
                                   &a.draw_records))
    return NULL;
  if (check_open(self) < 0) return NULL;
  batch_images im;
  if (get_images(buffers, starts, lengths, &im) < 0) return NULL;
  job_views v;
  batch_ctx ctx;
  PyObject *result = NULL;
  if (job_open(self, &a, im.n, &v, &ctx) == 0) {
    ctx.images = im.refs;
    result = job_run(self, &ctx, im.n);
    job_release(&v);
  }
  release_images(&im);
  return result;
}
PyDoc_STRVAR(decode_records_doc,
             "decode_records(base, offsets, labels, ids, starts, lengths, out, status, options, "
             "crops=None, flips=None, draw_records=None) -> list[str | None] | None\n\n"
             "As decode_batch, for the records at byte offsets (int64 [n]) of base (a "
             "bytes-like object: a map of the .rec; or a list of n of them, record i at "
             "offsets[i] of base[i], its spans inside it): each decode thread parses its records' "
             "headers into labels (float32 [n][label_width]; flag 0 gives the label in every "
             "column), ids (int64 [n]) and the image spans (starts, lengths: int64 [n]), and "
             "decodes the image. A record that is not plainly one frame with its IRHeader "
             "inside base gets status STATUS_RECORD and is not decoded: the caller parses it "
             "the exact way. crcs (uint32 [n], or None): each parsed record's frame CRC32C, "
             "the checksum sidecar's, taken in the pass that gives the JPEG's whole-stream key "
             "(NOTE [one pass per record] in native/bind_pool.c); left as it was for a record "
             "with status STATUS_RECORD.");

/* decode_records, run now (submit 0) or queued as a Pending (submit 1). */
static PyObject *records_call(PoolObject *self, PyObject *args, PyObject *kwds, int submit) {
  static char *kwlist[] = {"base",   "offsets", "labels", "ids",   "starts",       "lengths", "out",
                           "status", "options", "crops",  "flips", "draw_records", "crcs",    NULL};
  PyObject *base_obj, *offsets_obj, *labels_obj, *ids_obj, *starts_obj, *lengths_obj;
  job_args a = {.crops = Py_None, .flips = Py_None, .draw_records = Py_None, .crcs = Py_None};
  if (!PyArg_ParseTupleAndKeywords(
          args, kwds, submit ? "OOOOOOOOO|OOOO:submit_records" : "OOOOOOOOO|OOOO:decode_records",
          kwlist, &base_obj, &offsets_obj, &labels_obj, &ids_obj, &starts_obj, &lengths_obj, &a.out,
          &a.status, &a.options, &a.crops, &a.flips, &a.draw_records, &a.crcs))
    return NULL;
  if (check_open(self) < 0) return NULL;
  Py_buffer base = {0}, offsets = {0}, labels = {0}, ids = {0}, starts = {0}, lengths = {0};
  batch_images extents = {0};
  PyObject *result = NULL;
  const int listed = PyList_Check(base_obj) || PyTuple_Check(base_obj);
  if (listed ? get_listed(base_obj, &extents) < 0
             : PyObject_GetBuffer(base_obj, &base, PyBUF_SIMPLE) < 0)
    return NULL;
  if (get_int64s(offsets_obj, &offsets, "offsets") < 0) goto done;
  const Py_ssize_t n = offsets.shape[0];
  if (listed && extents.n != n) {
    PyErr_Format(PyExc_ValueError, "%zd extents for %zd offsets", extents.n, n);
    goto done;
  }
  if (PyObject_GetBuffer(labels_obj, &labels, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0 ||
      get_param(ids_obj, &ids, n * 8, 1, "ids") < 0 ||
      get_param(starts_obj, &starts, n * 8, 1, "starts") < 0 ||
      get_param(lengths_obj, &lengths, n * 8, 1, "lengths") < 0)
    goto done;
  if (!ids.buf || !starts.buf || !lengths.buf) {
    PyErr_SetString(PyExc_ValueError, "ids, starts and lengths are required");
    goto done;
  }
  if (n && (labels.len < n * 4 || labels.len % (n * 4))) {
    PyErr_SetString(PyExc_ValueError, "labels must be float32 [n][label_width]");
    goto done;
  }
  rc_records records = {
      .base = base.buf,
      .size = base.len,
      .extents = listed ? extents.refs : NULL,
      .offsets = offsets.buf,
      .label_width = n ? (int)(labels.len / (n * 4)) : 1,
      .labels = labels.buf,
      .ids = ids.buf,
      .starts = starts.buf,
      .lengths = lengths.buf,
  };
  job_views v;
  batch_ctx ctx;
  if (job_open(self, &a, n, &v, &ctx) == 0) {
    ctx.records = &records;
    if (submit) /* the Pending takes the views over: those below are left empty */
      result =
          pending_new(self, &ctx, &v, &records, &extents,
                      (Py_buffer *const[6]){&base, &offsets, &labels, &ids, &starts, &lengths}, n);
    else
      result = job_run(self, &ctx, n);
    job_release(&v);
  }
done:
  release_param(&lengths);
  release_param(&starts);
  release_param(&ids);
  if (labels.obj) PyBuffer_Release(&labels);
  if (offsets.obj) PyBuffer_Release(&offsets);
  if (base.obj) PyBuffer_Release(&base);
  release_images(&extents);
  return result;
}

static PyObject *Pool_decode_records(PoolObject *self, PyObject *args, PyObject *kwds) {
  return records_call(self, args, kwds, 0);
}

PyDoc_STRVAR(submit_records_doc,
             "submit_records(...) -> Pending\n\n"
             "decode_records' arguments, the job queued on the pool instead of run: returns at "
             "once a Pending whose result() is what decode_records returns. The pool's threads go "
             "from one queued job to the next without waiting for the caller. Every buffer "
             "passed is held, and written to, until the job is finished.");

static PyObject *Pool_submit_records(PoolObject *self, PyObject *args, PyObject *kwds) {
  return records_call(self, args, kwds, 1);
}

PyDoc_STRVAR(image_sizes_doc,
             "image_sizes(buffers, sizes, starts=None, lengths=None) -> None\n\n"
             "Writes [width, height] of every JPEG header into sizes (int32 [n][2]): -1 where "
             "unreadable, -2 where the buffer is not a JPEG. buffers: as in decode_batch, a "
             "sequence of bytes-like objects or, with starts and lengths, spans of one buffer.");

static PyObject *Pool_image_sizes(PoolObject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"buffers", "sizes", "starts", "lengths", NULL};
  PyObject *buffers, *sizes_obj, *starts = Py_None, *lengths = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OO:image_sizes", kwlist, &buffers, &sizes_obj,
                                   &starts, &lengths))
    return NULL;
  if (check_open(self) < 0) return NULL;
  batch_images im;
  if (get_images(buffers, starts, lengths, &im) < 0) return NULL;
  const Py_ssize_t n = im.n;
  PyObject *result = NULL;
  Py_buffer sizes = {0};
  if (get_param(sizes_obj, &sizes, n * 8, 1, "sizes") < 0) goto done;
  if (!sizes.buf) {
    PyErr_SetString(PyExc_ValueError, "sizes is required");
    goto done;
  }
  sizes_ctx ctx = {.images = im.refs, .sizes = sizes.buf};
  if (run_released(self, sizes_task, &ctx, n) < 0) goto done;
  result = Py_NewRef(Py_None);
done:
  release_param(&sizes);
  release_images(&im);
  return result;
}

PyDoc_STRVAR(reserve_doc,
             "reserve(nbytes) -> bool\n\n"
             "Takes nbytes of the pool's decode budget (max_decode_bytes) for an image decoded "
             "elsewhere (recio.decode's Pillow path), waiting with the GIL released while the "
             "pool's decodes and other reservations hold too much. False, at once, when nbytes "
             "alone is over the limit. Give it back with release(nbytes). Works on a closed "
             "pool too.");

static PyObject *Pool_reserve(PoolObject *self, PyObject *arg) {
  const unsigned long long n = PyLong_AsUnsignedLongLong(arg);
  if (n == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  if (forked(self)) {
    PyErr_SetString(PyExc_RuntimeError, "decode pool was created in another process (fork)");
    return NULL;
  }
  if (self->budget.limit && n > self->budget.limit) Py_RETURN_FALSE;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = rc_budget_take(&self->budget, n);
  Py_END_ALLOW_THREADS
  return PyBool_FromLong(rc == 0);
}

static PyObject *Pool_release(PoolObject *self, PyObject *arg) {
  const unsigned long long n = PyLong_AsUnsignedLongLong(arg);
  if (n == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  if (!forked(self)) rc_budget_give(&self->budget, n);
  Py_RETURN_NONE;
}

static PyObject *Pool_get_max_decode_bytes(PoolObject *self, void *closure) {
  return PyLong_FromUnsignedLongLong(self->budget.limit);
}

static PyObject *Pool_get_num_threads(PoolObject *self, void *closure) {
  const int lock = !forked(self);
  if (lock) pthread_mutex_lock(&self->mu);
  long n = self->pool && !self->closed ? self->nthreads : 0;
  if (lock) pthread_mutex_unlock(&self->mu);
  return PyLong_FromLong(n);
}

static PyObject *Pool_set_active(PoolObject *self, PyObject *arg) {
  const long k = PyLong_AsLong(arg);
  if (k == -1 && PyErr_Occurred()) return NULL;
  if (k < 1 || k > self->nthreads) {
    PyErr_Format(PyExc_ValueError, "active threads must be in 1..%d, not %ld", self->nthreads, k);
    return NULL;
  }
  rc_pool *p = enter_pool(self);
  if (!p) return NULL;
  const int set = rc_pool_set_active(p, (int)k);
  leave_pool(self);
  return PyLong_FromLong(set);
}

/* (active threads, busy seconds, CPU seconds of all threads together); zeros once closed. */
static PyObject *Pool_activity(PoolObject *self, PyObject *unused) {
  if (forked(self)) return Py_BuildValue("(idd)", 0, 0.0, 0.0);
  pthread_mutex_lock(&self->mu);
  rc_pool *p = self->closed ? NULL : self->pool;
  if (p) self->busy++;
  pthread_mutex_unlock(&self->mu);
  if (!p) return Py_BuildValue("(idd)", 0, 0.0, 0.0);
  const int k = rc_pool_active(p);
  const double busy = (double)rc_pool_busy_ns(p) * 1e-9, cpu = (double)rc_pool_cpu_ns(p) * 1e-9;
  leave_pool(self);
  return Py_BuildValue("(idd)", k, busy, cpu);
}

static PyObject *Pool_get_closed(PoolObject *self, void *closure) {
  const int lock = !forked(self);
  if (lock) pthread_mutex_lock(&self->mu);
  int closed = self->pool == NULL || self->closed;
  if (lock) pthread_mutex_unlock(&self->mu);
  return PyBool_FromLong(closed);
}

/* A method whose every argument may be named (NOTE [named parameters] in bind_options.c). */
#define KEYWORDS(fn) (PyCFunction)(void (*)(void))(fn), METH_VARARGS | METH_KEYWORDS

static PyMethodDef Pool_methods[] = {
    {"decode_batch", KEYWORDS(Pool_decode_batch), decode_batch_doc},
    {"decode_records", KEYWORDS(Pool_decode_records), decode_records_doc},
    {"submit_records", KEYWORDS(Pool_submit_records), submit_records_doc},
    {"image_sizes", KEYWORDS(Pool_image_sizes), image_sizes_doc},
    {"transcode_batch", KEYWORDS(Pool_transcode_batch), transcode_batch_doc},
    {"resize_encode", KEYWORDS(Pool_resize_encode), resize_encode_doc},
    {"im2rec_batch", KEYWORDS(Pool_im2rec_batch), im2rec_batch_doc},
    {"lossless_batch", KEYWORDS(Pool_lossless_batch), lossless_batch_doc},
    {"reserve", (PyCFunction)Pool_reserve, METH_O, reserve_doc},
    {"release", (PyCFunction)Pool_release, METH_O, "release(nbytes): gives back a reserve()."},
    {"close", (PyCFunction)Pool_close, METH_NOARGS, "Stops and joins the threads."},
    {"set_active", (PyCFunction)Pool_set_active, METH_O,
     "set_active(k): threads 0..k-1 work, the others park (NOTE [parked threads]); returns k."},
    {"activity", (PyCFunction)Pool_activity, METH_NOARGS,
     "activity(): (active threads, busy seconds, CPU seconds of all threads); zeros closed."},
    {NULL},
};

static PyGetSetDef Pool_getset[] = {
    {"num_threads", (getter)Pool_get_num_threads, NULL, "number of decode threads", NULL},
    {"closed", (getter)Pool_get_closed, NULL, "whether close() was called", NULL},
    {"max_decode_bytes", (getter)Pool_get_max_decode_bytes, NULL,
     "the decode budget in bytes (0: none)", NULL},
    {NULL},
};

PyTypeObject PoolType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recio._native.Pool",
    .tp_doc = PyDoc_STR("Pool(num_threads, max_decode_bytes=0): persistent libjpeg-turbo "
                        "decode threads sharing a decode budget of max_decode_bytes (0: none; "
                        "see NOTE [decode budget] in native/decode_core.h)."),
    .tp_basicsize = sizeof(PoolObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Pool_new,
    .tp_init = (initproc)Pool_init,
    .tp_dealloc = (destructor)Pool_dealloc,
    .tp_methods = Pool_methods,
    .tp_getset = Pool_getset,
};

PyDoc_STRVAR(own_entropy_doc,
             "own_entropy(jpeg) -> bool: whether recio's own Huffman decoder takes this JPEG's\n"
             "scan (one baseline scan, its framing intact: NOTE [entropy decode] in\n"
             "native/entropy.h); libjpeg's decodes every other.");

static PyObject *own_entropy(PyObject *module, PyObject *arg) {
  Py_buffer view;
  if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
  rc_worker *w = rc_worker_new();
  int taken = 0;
  if (w) {
    taken = rc_own_entropy(w, view.buf, (size_t)view.len);
    rc_worker_free(w);
  }
  PyBuffer_Release(&view);
  if (!w) return PyErr_NoMemory();
  return PyBool_FromLong(taken);
}

PyDoc_STRVAR(stream_checked_doc,
             "stream_checked(jpeg) -> bool: whether this process has read these bytes' whole\n"
             "stream without damage, so that crop decodes of them may leave data unread\n"
             "(NOTE [whole-stream check] in native/streamcheck.h).");

static PyObject *stream_checked(PyObject *module, PyObject *arg) {
  Py_buffer view;
  if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
  const uint64_t key = rc_checked_key(view.buf, (size_t)view.len);
  PyBuffer_Release(&view);
  return PyBool_FromLong(rc_checked_has(rc_checked_process(), key));
}

PyDoc_STRVAR(second_decodes_doc,
             "second_decodes() -> int: how many decodes in this process were run again with\n"
             "libjpeg's Huffman decoder after recio's stopped or did not take the scan\n"
             "(damaged data, or framing it leaves to libjpeg: NOTE [entropy decode] in\n"
             "native/entropy.h). An intact one-scan baseline JPEG without 0xFF fill bytes\n"
             "never adds to it.");

static PyObject *second_decodes(PyObject *module, PyObject *unused) {
  return PyLong_FromUnsignedLongLong((unsigned long long)rc_second_decodes());
}

PyMethodDef rc_decode_functions[] = {
    {"own_entropy", own_entropy, METH_O, own_entropy_doc},
    {"second_decodes", second_decodes, METH_NOARGS, second_decodes_doc},
    {"stream_checked", stream_checked, METH_O, stream_checked_doc},
    {NULL},
};
