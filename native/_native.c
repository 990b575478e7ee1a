/* Python binding of recio's native decode pool.
 *
 * Pool.decode_batch holds a buffer view of every input (or of the one buffer that spans of
 * it are the inputs of) and of the output for the whole batch, releases the GIL once while
 * the pool decodes, and turns the per-image C statuses and messages into Python objects only
 * after the GIL is back, and only where an image failed. Argument checking with readable
 * messages lives in recio/decode/pool.py; this layer re-checks sizes and spans so it is
 * memory-safe alone.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <jconfig.h>
#include <pthread.h>
#include <stdarg.h>
#include <unistd.h>

#include "colour.h"
#include "crc32c.h"
#include "decode_core.h"
#include "encode_core.h"
#include "im2rec_core.h"
#include "pool.h"
#include "resample.h"

/* NOTE [close vs batch]: a batch runs on the rc_pool with the GIL released, so another
 * thread's close() can run meanwhile. `mu` guards pool, closed, busy and
 * tearing_down. A batch marks the pool busy (enter_pool) before it releases the GIL and
 * unmarks it (leave_pool) after taking the GIL back; close sets `closed` first, so that no
 * new batch enters, then waits with the GIL released until `busy` is 0, and only then shuts
 * the rc_pool down and frees it. A second close() waits until the first one's teardown is
 * over. `mu` is never held while waiting for the GIL or running a batch: it only guards these
 * few fields, so taking it with the GIL held cannot deadlock. Pool_init counts as busy too.
 * Dealloc cannot meet a running batch: a method call holds a reference to its Pool. */
typedef struct {
  PyObject_HEAD
  rc_pool *pool;
  pid_t pid;
  int nthreads;
  pthread_mutex_t mu;
  pthread_cond_t idle; /* signalled when busy drops to 0 and when teardown ends */
  int busy;            /* batches (and an init) between enter_pool and leave_pool */
  int closed;          /* close() began: new batches are refused */
  int tearing_down;    /* a close() is shutting the rc_pool down */
  /* NOTE [decode budget]: shared by the pool threads' decodes and, through reserve() and
   * release(), by recio.decode's Pillow path; it outlives the rc_pool (a Pillow decode may
   * still hold a share when close() frees the threads). Its limit is set once, by init. */
  rc_budget budget;
} PoolObject;

/* Where one encoded image's bytes are, inside a buffer view the batch holds (see images). */
typedef struct {
  const uint8_t *buf;
  size_t len;
} image_ref;

/* Where decode_records finds a batch's records: record i starts at base[offsets[i]], or, with
 * extents (one buffer per record: a remote batch as fetched, never joined into one), at
 * extents[i][offsets[i]]. Each decode thread parses its records' headers itself, into labels,
 * ids and the image spans (then inside the record's own buffer). */
typedef struct {
  const uint8_t *base;
  int64_t size;
  const image_ref *extents; /* [n], or NULL: every record in base */
  const int64_t *offsets;   /* [n] */
  int label_width;
  float *labels;    /* [n][label_width] */
  int64_t *ids;     /* [n] */
  int64_t *starts;  /* [n]: the image, base[starts[i] : starts[i] + lengths[i]] */
  int64_t *lengths; /* [n] */
} records_in;

typedef struct {
  const image_ref *images; /* or, records not NULL, read from the records */
  const records_in *records;
  int32_t *crops;              /* [n][4] or NULL; written where draw is set */
  uint8_t *flips;              /* [n] or NULL; written where draw is set */
  const rc_draw *draw;         /* keyed draws, or NULL: the crops and flips given */
  const int64_t *draw_records; /* [n]: each image's record number, the key of its draws */
  int32_t *status;
  char *errors; /* [n][RC_ERRLEN] */
  uint8_t *out;
  size_t out_stride; /* bytes per image */
  rc_opts opts;
} batch_ctx;

typedef struct {
  const image_ref *images;
  int32_t *sizes; /* [n][2] */
} sizes_ctx;

/* One per pool thread: the decoder, and an encoder made by the first transcode. */
typedef struct {
  rc_worker *dec;
  rc_encoder *enc;
} thread_state;

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
  free(s);
}

#define RECORD_MAGIC 0xCED7230Au
#define FRAME_HEADER 8 /* magic, lrec */
#define IR_HEADER 24   /* flag, label, id, id2 */

static uint32_t word_at(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* NOTE [batch parse] in recio/reader.py, in C: a record that is plainly fine (aligned, one
 * frame with the magic, inside the base, room for the IRHeader and its labels, an id below
 * 2**63) is parsed here; any other gets RC_RECORD, for the reader's exact parse. */
static int parse_record(const records_in *r, size_t i, image_ref *image) {
  const int64_t off = r->offsets[i];
  const uint8_t *base = r->extents ? r->extents[i].buf : r->base;
  const int64_t size = r->extents ? (int64_t)r->extents[i].len : r->size;
  r->ids[i] = -1;
  r->starts[i] = r->lengths[i] = 0;
  float *labels = r->labels + i * (size_t)r->label_width;
  if (off < 0 || (off & 3) || off > size - (FRAME_HEADER + IR_HEADER)) return RC_RECORD;
  const uint8_t *p = base + off;
  const uint32_t lrec = word_at(p + 4), flag = word_at(p + 8);
  const int64_t end = off + FRAME_HEADER + (int64_t)lrec; /* cflag 0: lrec is the length */
  const int64_t start = off + FRAME_HEADER + IR_HEADER + 4 * (int64_t)flag;
  int64_t id;
  memcpy(&id, p + 16, 8);
  if (word_at(p) != RECORD_MAGIC || (lrec >> 29) || end > size || start > end || id < 0)
    return RC_RECORD;
  for (int k = 0; k < r->label_width; k++) {
    if (flag == 0) /* the one label, in every column */
      memcpy(labels + k, p + 12, 4);
    else if ((uint32_t)k < flag) /* inside the record: start <= end checked above */
      memcpy(labels + k, p + FRAME_HEADER + IR_HEADER + 4 * k, 4);
    else
      labels[k] = 0;
  }
  r->ids[i] = id;
  r->starts[i] = start;
  r->lengths[i] = end - start;
  *image = (image_ref){p + (start - off), (size_t)(end - start)};
  return RC_OK;
}

static void decode_task(void *vctx, void *state, size_t i) {
  batch_ctx *c = vctx;
  rc_worker *w = ((thread_state *)state)->dec;
  image_ref image;
  c->errors[i * RC_ERRLEN] = 0; /* the text stays empty where no step writes one */
  if (!c->records) {
    image = c->images[i];
  } else if ((c->status[i] = parse_record(c->records, i, &image)) != RC_OK) {
    return;
  }
  uint8_t *out = c->out + i * c->out_stride;
  char *err = c->errors + i * RC_ERRLEN;
  if (c->draw)
    c->status[i] = rc_decode_drawn(w, image.buf, image.len, c->draw, c->draw_records[i],
                                   c->crops + 4 * i, c->flips + i, &c->opts, out, err);
  else
    c->status[i] = rc_decode(w, image.buf, image.len, c->crops ? c->crops + 4 * i : NULL,
                             c->flips ? c->flips[i] != 0 : 0, &c->opts, out, err);
  rc_worker_release(w);
}

/* The memory an output image of px pixels costs the transcode beside the decode: the RGB
 * scratch image (CMYK sources) and the JPEG encoder's growing output buffer. */
static uint64_t output_bytes(int64_t px) {
  return (uint64_t)px * 7;
}

static void sizes_task(void *vctx, void *state, size_t i) {
  sizes_ctx *c = vctx;
  char err[RC_ERRLEN];
  int w = -1, h = -1;
  int st =
      rc_image_size(((thread_state *)state)->dec, c->images[i].buf, c->images[i].len, &w, &h, err);
  c->sizes[2 * i] = st == RC_OK ? w : st == RC_UNSUPPORTED ? -2 : -1;
  c->sizes[2 * i + 1] = st == RC_OK ? h : st == RC_UNSUPPORTED ? -2 : -1;
}

typedef struct {
  const image_ref *images;
  const int32_t *crops; /* [n][4] or NULL */
  const int32_t *sizes; /* [n][2]: output width, height */
  int32_t *status;
  char *errors;   /* [n][RC_ERRLEN] */
  uint8_t **outs; /* [n]: malloc'd JPEGs, freed by the caller */
  size_t *lens;
  int quality, gray;
  rc_opts opts;
} transcode_ctx;

static void transcode_task(void *vctx, void *vstate, size_t i) {
  transcode_ctx *c = vctx;
  thread_state *s = vstate;
  char *err = c->errors + i * RC_ERRLEN;
  if (!s->enc && !(s->enc = rc_encoder_new())) {
    c->status[i] = RC_NOMEM;
    snprintf(err, RC_ERRLEN, "out of memory (JPEG encoder)");
    return;
  }
  rc_opts o = c->opts;
  o.out_w = c->sizes[2 * i];
  o.out_h = c->sizes[2 * i + 1];
  if (o.out_w < 1 || o.out_h < 1 || (int64_t)o.out_w * o.out_h > (1 << 28)) {
    /* this image's problem, not the batch's: the others are still transcoded */
    c->status[i] = RC_BAD_PARAM;
    snprintf(err, RC_ERRLEN, "%dx%d is not a valid output size", o.out_w, o.out_h);
    return;
  }
  o.extra_bytes = output_bytes((int64_t)o.out_w * o.out_h);
  c->status[i] = rc_transcode(s->dec, s->enc, c->images[i].buf, c->images[i].len,
                              c->crops ? c->crops + 4 * i : NULL, &o, c->quality, c->gray,
                              &c->outs[i], &c->lens[i], err);
  rc_encoder_trim(s->enc);
  rc_worker_release(s->dec);
}

typedef struct {
  const uint8_t *rgb;
  int width, height;
  size_t stride;
  int32_t crop[4];
  rc_opts opts;
  int quality, status;
  uint8_t *out;
  size_t len;
  char err[RC_ERRLEN];
} resize_encode_ctx;

static void resize_encode_task(void *vctx, void *vstate, size_t i) {
  resize_encode_ctx *c = vctx;
  thread_state *s = vstate;
  (void)i;
  if (!s->enc && !(s->enc = rc_encoder_new())) {
    c->status = RC_NOMEM;
    snprintf(c->err, RC_ERRLEN, "out of memory (JPEG encoder)");
    return;
  }
  char what[64];
  snprintf(what, sizeof what, "a %dx%d output", c->opts.out_w, c->opts.out_h);
  c->status = rc_worker_reserve(s->dec, &c->opts,
                                output_bytes((int64_t)c->opts.out_w * c->opts.out_h), what, c->err);
  if (c->status == RC_OK)
    c->status = rc_resize_encode(s->dec, s->enc, c->rgb, c->width, c->height, c->stride, c->crop,
                                 &c->opts, c->quality, &c->out, &c->len, c->err);
  rc_encoder_trim(s->enc);
  rc_worker_release(s->dec);
}

typedef struct {
  PyObject *const *paths;    /* bytes, NUL-free */
  PyObject *const *prefixes; /* bytes */
  int32_t *status;
  uint8_t **frames;
  int64_t *lengths;
  uint32_t *crcs;
  rc_im2rec_opts o;
  rc_opts opts;
} im2rec_ctx;

static void im2rec_task(void *vctx, void *vstate, size_t i) {
  im2rec_ctx *c = vctx;
  thread_state *s = vstate;
  size_t n = 0;
  c->status[i] = RC_UNSUPPORTED;
  if (!s->enc && !(s->enc = rc_encoder_new())) return; /* Python's path says it */
  c->status[i] = rc_im2rec_record(s->dec, s->enc, PyBytes_AS_STRING(c->paths[i]),
                                  (const uint8_t *)PyBytes_AS_STRING(c->prefixes[i]),
                                  (size_t)PyBytes_GET_SIZE(c->prefixes[i]), &c->o, &c->opts,
                                  &c->frames[i], &n, &c->crcs[i]);
  c->lengths[i] = (int64_t)n;
}

static PyObject *Pool_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  PoolObject *self = (PoolObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  pthread_mutex_init(&self->mu, NULL);
  pthread_cond_init(&self->idle, NULL);
  rc_budget_init(&self->budget, 0);
  return (PyObject *)self;
}

/* Whether this is a forked child of the process that made the pool. There the parent's pool
 * threads (and batches) do not exist and `mu` may be the copy of a locked mutex, so it is not
 * taken: the fields are read and written under the GIL alone (no thread of the child can be
 * in a batch on this pool, enter_pool refuses it). pid is only written by Pool_init with the
 * GIL held, and this module runs with the GIL (see PyInit__native). */
static int forked(const PoolObject *self) {
  return self->pid && self->pid != getpid();
}

/* The pool, marked busy, for a caller holding the GIL; NULL with ValueError when it is closed
 * (or not initialised) and RuntimeError in a forked child. Pair with leave_pool. */
static rc_pool *enter_pool(PoolObject *self) {
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

static void leave_pool(PoolObject *self) {
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
static int check_open(PoolObject *self) {
  if (!enter_pool(self)) return -1;
  leave_pool(self);
  return 0;
}

/* The encoded images of one batch: where each one's bytes are (refs), and the buffer views
 * that keep them readable, and in place (a bytearray cannot be resized, an mmap not closed),
 * until release_images, the GIL released in between. From a sequence of bytes-like objects,
 * each image has a view of its own; from spans (one base buffer, int64 starts and lengths),
 * one view of the base serves them all: the starts and lengths are read, and checked against
 * the base, before any work, so a change to them afterwards cannot reach the pool. */
typedef struct {
  Py_ssize_t n;
  image_ref *refs;   /* [n] */
  Py_buffer *views;  /* [nviews]: one per image, or the base */
  Py_ssize_t nviews; /* views taken so far */
} batch_images;

static void release_images(batch_images *im) {
  for (Py_ssize_t i = 0; i < im->nviews; i++) PyBuffer_Release(&im->views[i]);
  PyMem_Free(im->views);
  PyMem_Free(im->refs);
  im->views = NULL;
  im->refs = NULL;
  im->nviews = 0;
}

static int alloc_images(batch_images *im, Py_ssize_t n, Py_ssize_t nviews) {
  im->n = n;
  im->nviews = 0;
  im->refs = PyMem_Calloc(n ? (size_t)n : 1, sizeof *im->refs);
  im->views = PyMem_Calloc(nviews ? (size_t)nviews : 1, sizeof *im->views);
  if (im->refs && im->views) return 0;
  release_images(im);
  PyErr_NoMemory();
  return -1;
}

/* A read view of every item of buffers; on failure releases what it took. */
static int get_listed(PyObject *buffers, batch_images *im) {
  PyObject *seq = PySequence_Fast(buffers, "buffers must be a sequence");
  if (!seq) return -1;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  int rc = alloc_images(im, n, n);
  for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
    Py_buffer *v = &im->views[i];
    if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, i), v, PyBUF_SIMPLE) < 0) {
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      PyErr_Format(PyExc_TypeError, "buffers[%zd] is not a contiguous bytes-like object", i);
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(tb);
      release_images(im);
      rc = -1;
    } else {
      im->nviews = i + 1;
      im->refs[i] = (image_ref){v->buf, (size_t)v->len};
    }
  }
  Py_DECREF(seq); /* each view holds a reference to its object */
  return rc;
}

/* A read view of a 1-D C-contiguous int64 buffer (a numpy int64 array). */
static int get_int64s(PyObject *obj, Py_buffer *view, const char *name) {
  if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
  const char *f = view->format ? view->format : "B";
  if (*f == '@' || *f == '=' || *f == '<') f++; /* this module builds little-endian only */
  if (view->ndim != 1 || view->itemsize != 8 || (strcmp(f, "q") != 0 && strcmp(f, "l") != 0)) {
    PyErr_Format(PyExc_ValueError, "%s must be a 1-D int64 array, got format '%s' (%d-D)", name,
                 view->format ? view->format : "B", view->ndim);
    PyBuffer_Release(view);
    return -1;
  }
  return 0;
}

/* Images i = base[starts[i] : starts[i] + lengths[i]], each inside base (else ValueError). */
static int get_spans(PyObject *base, PyObject *starts_obj, PyObject *lengths_obj,
                     batch_images *im) {
  Py_buffer starts, lengths;
  if (get_int64s(starts_obj, &starts, "starts") < 0) return -1;
  if (get_int64s(lengths_obj, &lengths, "lengths") < 0) {
    PyBuffer_Release(&starts);
    return -1;
  }
  const Py_ssize_t n = starts.shape[0];
  int rc = -1;
  if (lengths.shape[0] != n) {
    PyErr_Format(PyExc_ValueError, "starts has %zd spans, lengths %zd", n, lengths.shape[0]);
    goto done;
  }
  if (alloc_images(im, n, 1) < 0) goto done;
  if (PyObject_GetBuffer(base, &im->views[0], PyBUF_SIMPLE) < 0) {
    /* a closed map or a released view keeps its ValueError */
    if (PyErr_ExceptionMatches(PyExc_TypeError))
      PyErr_SetString(PyExc_TypeError, "the spans' base is not a contiguous bytes-like object");
    release_images(im);
    goto done;
  }
  im->nviews = 1;
  const uint8_t *buf = im->views[0].buf;
  const int64_t size = im->views[0].len, *st = starts.buf, *len = lengths.buf;
  for (Py_ssize_t i = 0; i < n; i++) {
    if (st[i] < 0 || len[i] < 0 || st[i] > size || len[i] > size - st[i]) {
      PyErr_Format(PyExc_ValueError,
                   "span %zd (start %lld, length %lld) is outside the base buffer (%lld bytes)", i,
                   (long long)st[i], (long long)len[i], (long long)size);
      release_images(im);
      goto done;
    }
    im->refs[i] = (image_ref){buf + st[i], (size_t)len[i]};
  }
  rc = 0;
done:
  PyBuffer_Release(&starts);
  PyBuffer_Release(&lengths);
  return rc;
}

/* A batch's images from buffers (a sequence of bytes-like objects), or, with starts and
 * lengths (not None), from spans of the one buffer `buffers`. */
static int get_images(PyObject *buffers, PyObject *starts, PyObject *lengths, batch_images *im) {
  if (starts == Py_None && lengths == Py_None) return get_listed(buffers, im);
  if (starts == Py_None || lengths == Py_None) {
    PyErr_SetString(PyExc_ValueError, "spans need both starts and lengths");
    return -1;
  }
  return get_spans(buffers, starts, lengths, im);
}

/* Gets an optional buffer of at least `need` bytes; None gives buf = NULL. */
static int get_param(PyObject *obj, Py_buffer *view, Py_ssize_t need, int writable,
                     const char *name) {
  view->obj = NULL;
  view->buf = NULL;
  if (obj == Py_None) return 0;
  int flags = (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS;
  if (PyObject_GetBuffer(obj, view, flags) < 0) return -1;
  if (view->len < need) {
    PyErr_Format(PyExc_ValueError, "%s has %zd bytes, needs %zd", name, view->len, need);
    PyBuffer_Release(view);
    view->obj = NULL;
    return -1;
  }
  return 0;
}

static void release_param(Py_buffer *view) {
  if (view->obj) PyBuffer_Release(view);
}

/* Runs a batch on the pool with the GIL released, the pool marked busy throughout (see NOTE
 * [close vs batch]); -1 with an exception if the pool is closed. */
static int run_released(PoolObject *self, rc_task_fn fn, void *ctx, Py_ssize_t n) {
  rc_pool *p = enter_pool(self);
  if (!p) return -1;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = rc_pool_run(p, fn, ctx, (size_t)n);
  Py_END_ALLOW_THREADS
  leave_pool(self);
  if (rc < 0) PyErr_SetString(PyExc_ValueError, "decode pool is closed");
  return rc;
}

/* Image i's error message (errors holds RC_ERRLEN bytes per image) as a str. */
static PyObject *error_text(const char *errors, Py_ssize_t i) {
  const char *msg = errors + i * RC_ERRLEN;
  return PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
}

/* The list a batch returns: per image, ok(ctx, i) where its status is RC_OK, else its error
 * text. NULL with an exception set when a Python object cannot be made. */
static PyObject *per_image(const int32_t *status, const char *errors, Py_ssize_t n,
                           PyObject *(*ok)(void *ctx, Py_ssize_t i), void *ctx) {
  PyObject *result = PyList_New(n);
  for (Py_ssize_t i = 0; result && i < n; i++) {
    PyObject *item = status[i] == RC_OK ? ok(ctx, i) : error_text(errors, i);
    if (!item)
      Py_CLEAR(result);
    else
      PyList_SET_ITEM(result, i, item);
  }
  return result;
}

static PyObject *no_result(void *ctx, Py_ssize_t i) {
  (void)ctx, (void)i;
  return Py_NewRef(Py_None);
}

static int all_ok(const int32_t *status, Py_ssize_t n) {
  for (Py_ssize_t i = 0; i < n; i++)
    if (status[i] != RC_OK) return 0;
  return 1;
}

/* NOTE [named parameters]: what a decode is asked to do reaches C by name, never by position.
 * A Draw is made from keywords that name rc_draw's fields (its colour and geometry from dicts
 * that name rc_colour's and rc_geom's), a JobOptions from keywords that name rc_opts' fields:
 * each is parsed and checked once, when it is made (a pipeline makes them once per iterator),
 * and a batch only copies the parsed struct. A missing or unknown name is a TypeError, so a
 * change on either side cannot remap one parameter onto another. The per-batch arrays (out,
 * status, crops, flips, the records' keys) are the call's own arguments. */
typedef struct {
  PyObject_HEAD
  rc_draw draw;
} DrawObject;

static PyTypeObject DrawType;

/* Parses `mapping` (a dict) as the keyword arguments of `what`: every name of kwlist given. */
static int parse_named(PyObject *mapping, const char *format, char **kwlist, ...) {
  if (!PyDict_Check(mapping)) {
    PyErr_Format(PyExc_TypeError, "%s must be a dict of its parameters by name",
                 strchr(format, ':') + 1);
    return -1;
  }
  PyObject *empty = PyTuple_New(0);
  if (!empty) return -1;
  va_list va;
  va_start(va, kwlist);
  const int ok = PyArg_VaParseTupleAndKeywords(empty, mapping, format, kwlist, va);
  va_end(va);
  Py_DECREF(empty);
  return ok ? 0 : -1;
}

/* geometry: rc_geom's fields by name, as recio.augment.GeometrySpec.native() gives them. */
static int get_geom(PyObject *mapping, rc_geom *g) {
  static char *kwlist[] = {"affine",           "max_rotate_angle", "rotate",
                           "max_shear_ratio",  "min_ratio",        "max_ratio",
                           "min_random_scale", "max_random_scale", "min_img_size",
                           "max_img_size",     "min_crop_size",    "max_crop_size",
                           "pad",              "fill_value",       "inter_method",
                           NULL};
  if (parse_named(mapping, "iiifffffffiiiii:geometry", kwlist, &g->affine, &g->max_rotate_angle,
                  &g->rotate, &g->max_shear_ratio, &g->min_ratio, &g->max_ratio,
                  &g->min_random_scale, &g->max_random_scale, &g->min_img_size, &g->max_img_size,
                  &g->min_crop_size, &g->max_crop_size, &g->pad, &g->fill_value,
                  &g->inter_method) < 0)
    return -1;
  const int im = g->inter_method;
  if (g->max_rotate_angle < 0 || g->max_rotate_angle > 360 || g->pad < 0 || g->pad > 1 << 16 ||
      g->fill_value < 0 || g->fill_value > 255 || !((im >= 0 && im <= 4) || im == 9 || im == 10) ||
      g->min_crop_size > g->max_crop_size || g->max_crop_size > 1 << 20 ||
      (g->max_crop_size > 0 && g->min_crop_size < 1) || !(g->min_ratio > 0) ||
      !(g->min_ratio <= g->max_ratio) || !(g->min_random_scale > 0) ||
      !(g->min_random_scale <= g->max_random_scale) || !(g->min_img_size <= g->max_img_size)) {
    PyErr_SetString(PyExc_ValueError, "bad geometry parameters");
    return -1;
  }
  g->on = 1;
  return 0;
}

/* colour: rc_colour's fields by name, as recio.augment.ColourSpec.native() gives them. */
static int get_colour(PyObject *mapping, rc_colour *c) {
  static char *kwlist[] = {"random_h",   "random_s",   "random_l",
                           "brightness", "contrast",   "saturation",
                           "pca_noise",  "max_random_contrast", "max_random_illumination",
                           NULL};
  if (parse_named(mapping, "iiidddddd:colour", kwlist, &c->random_h, &c->random_s, &c->random_l,
                  &c->brightness, &c->contrast, &c->saturation, &c->pca_noise,
                  &c->max_random_contrast, &c->max_random_illumination) < 0)
    return -1;
  if (!(c->random_h >= 0 && c->random_h <= 180 && c->random_s >= 0 && c->random_s <= 255 &&
        c->random_l >= 0 && c->random_l <= 255 && c->brightness >= 0 && c->contrast >= 0 &&
        c->saturation >= 0 && c->pca_noise >= 0 && c->max_random_contrast >= 0 &&
        c->max_random_contrast < 1 && c->max_random_illumination >= 0)) {
    PyErr_SetString(PyExc_ValueError, "bad colour parameters");
    return -1;
  }
  return 0;
}

static int refuse_positional(PyObject *args, const char *what) {
  if (PyTuple_GET_SIZE(args) == 0) return 0;
  PyErr_Format(PyExc_TypeError, "%s takes keyword arguments only (its fields by name)", what);
  return -1;
}

static PyObject *Draw_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"out_w",      "out_h",      "resize",    "rand_crop", "rrc",
                           "rand_mirror", "min_area",  "max_area",  "min_aspect", "max_aspect",
                           "epoch_key",  "mirror",     "colour",    "geometry",  NULL};
  if (refuse_positional(args, "Draw") < 0) return NULL;
  rc_draw d;
  memset(&d, 0, sizeof d);
  unsigned long long key;
  PyObject *colour, *geom = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "iiiiiiddddKiO|O:Draw", kwlist, &d.out_w, &d.out_h,
                                   &d.resize, &d.rand_crop, &d.rrc, &d.rand_mirror, &d.min_area,
                                   &d.max_area, &d.min_aspect, &d.max_aspect, &key, &d.mirror,
                                   &colour, &geom))
    return NULL;
  if (get_colour(colour, &d.colour) < 0 || (geom != Py_None && get_geom(geom, &d.geom) < 0))
    return NULL;
  if (!(d.min_area > 0 && d.min_area <= d.max_area && d.max_area <= 1 && d.min_aspect > 0 &&
        d.min_aspect <= d.max_aspect && d.out_w > 0 && d.out_h > 0)) {
    PyErr_SetString(PyExc_ValueError, "bad draw parameters");
    return NULL;
  }
  d.epoch_key = key;
  DrawObject *self = (DrawObject *)type->tp_alloc(type, 0);
  if (self) self->draw = d;
  return (PyObject *)self;
}

static PyTypeObject DrawType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recio._native.Draw",
    .tp_doc = PyDoc_STR("Draw(*, out_w, out_h, resize, rand_crop, rrc, rand_mirror, min_area, "
                        "max_area, min_aspect, max_aspect, epoch_key, mirror, colour, "
                        "geometry=None): one epoch's keyed draws, rc_draw's fields by name "
                        "(colour and geometry: dicts of rc_colour's and rc_geom's), checked "
                        "once (NOTE [named parameters]); recio.augment.KeyedDraw.native() "
                        "makes it."),
    .tp_basicsize = sizeof(DrawObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Draw_new,
};

/* The draw of a Draw object; NULL with TypeError for anything else. */
static const rc_draw *draw_of(PyObject *obj) {
  if (PyObject_TypeCheck(obj, &DrawType)) return &((DrawObject *)obj)->draw;
  PyErr_Format(PyExc_TypeError, "draw must be a recio._native.Draw, not %s", Py_TYPE(obj)->tp_name);
  return NULL;
}

/* A decode's options (NOTE [named parameters]): rc_opts less the budget (the pool's), with the
 * views of its lookup table, gain and mean image held while it lives, and its Draw. */
typedef struct {
  PyObject_HEAD
  rc_opts opts;
  PyObject *draw; /* a Draw, or NULL */
  Py_buffer lut, gain, mean_img;
} JobOptionsObject;

static void JobOptions_dealloc(JobOptionsObject *self) {
  release_param(&self->lut);
  release_param(&self->gain);
  release_param(&self->mean_img);
  Py_XDECREF(self->draw);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *JobOptions_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"out_h",      "out_w", "layout", "itemsize", "interp", "bgr",
                           "dct_mode",   "roi",   "max_pixels", "lut",  "draw",   "gain",
                           "mean_img",   NULL};
  if (refuse_positional(args, "JobOptions") < 0) return NULL;
  rc_opts o = {0};
  PyObject *lut = Py_None, *draw = Py_None, *gain = Py_None, *mean_img = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "iiiiiiiiK|OOOO:JobOptions", kwlist, &o.out_h,
                                   &o.out_w, &o.layout, &o.itemsize, &o.interp, &o.bgr,
                                   &o.dct_mode, &o.roi, &o.max_pixels, &lut, &draw, &gain,
                                   &mean_img))
    return NULL;
  if (o.out_h < 1 || o.out_w < 1 || (o.itemsize != 1 && o.itemsize != 2 && o.itemsize != 4) ||
      (o.layout != RC_LAYOUT_NHWC && o.layout != RC_LAYOUT_NCHW) || o.interp < 0 ||
      o.interp > RC_INTERP_NEAREST || o.dct_mode < 0 || o.dct_mode > RC_DCT_ALL) {
    PyErr_SetString(PyExc_ValueError, "bad decode parameters");
    return NULL;
  }
  if (o.itemsize != 1 && lut == Py_None) {
    PyErr_SetString(PyExc_ValueError, "float outputs need a lookup table");
    return NULL;
  }
  if (draw != Py_None && !draw_of(draw)) return NULL;
  JobOptionsObject *self = (JobOptionsObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  if (get_param(o.itemsize == 1 ? Py_None : lut, &self->lut, 3 * 256 * o.itemsize, 0, "lut") < 0 ||
      get_param(gain, &self->gain, 3 * 4, 0, "gain") < 0 ||
      get_param(mean_img, &self->mean_img, (Py_ssize_t)o.out_h * o.out_w * 3 * 4, 0, "mean_img") <
          0)
    goto fail;
  if ((self->gain.buf || self->mean_img.buf) && (o.itemsize != 4 || !self->gain.buf)) {
    PyErr_SetString(PyExc_ValueError,
                    "gain and mean_img need float32 outputs (and mean_img a gain)");
    goto fail;
  }
  o.lut = self->lut.buf;
  o.gain = self->gain.buf;
  o.mean_img = self->mean_img.buf;
  self->opts = o;
  self->draw = draw == Py_None ? NULL : Py_NewRef(draw);
  return (PyObject *)self;
fail:
  Py_DECREF(self);
  return NULL;
}

static PyTypeObject JobOptionsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recio._native.JobOptions",
    .tp_doc = PyDoc_STR(
        "JobOptions(*, out_h, out_w, layout, itemsize, interp, bgr, dct_mode, roi, max_pixels, "
        "lut=None, draw=None, gain=None, mean_img=None): what every image of a decode gets, "
        "rc_opts' fields by name, checked once (NOTE [named parameters]). lut: [3][256] values "
        "of itemsize bytes, float outputs only; draw: a Draw (each image's window, flip and "
        "colour drawn for its record); gain (float32 [3]: scale / std) and mean_img (float32 "
        "[3][out_h][out_w], times gain), float32 outputs only: out = lut * contrast + "
        "illumination * gain - contrast * mean_img, with the drawn contrast factor and "
        "illumination. recio.decode makes it once per job."),
    .tp_basicsize = sizeof(JobOptionsObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = JobOptions_new,
    .tp_dealloc = (destructor)JobOptions_dealloc,
};

/* The buffers a decode holds while it runs, its options and its error texts. */
typedef struct {
  Py_buffer out, status, crops, flips, draw_records;
  PyObject *options; /* the JobOptions: its views and Draw stay alive with it */
  char *errors;
} job_views;

static void job_release(job_views *v) {
  PyMem_Free(v->errors);
  v->errors = NULL;
  release_param(&v->out);
  release_param(&v->status);
  release_param(&v->crops);
  release_param(&v->flips);
  release_param(&v->draw_records);
  Py_CLEAR(v->options);
}

/* A batch's arrays (as its call gives them) and its JobOptions. */
typedef struct {
  PyObject *out, *status, *options, *crops, *flips, *draw_records;
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
      get_param(drawn ? a->draw_records : Py_None, &v->draw_records, n * 8, 0, "draw_records") < 0)
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
      .opts = o->opts,
  };
  ctx->opts.budget = &self->budget;
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
  static char *kwlist[] = {"buffers", "out",     "status",       "options", "crops", "flips",
                           "starts",  "lengths", "draw_records", NULL};
  PyObject *buffers, *starts = Py_None, *lengths = Py_None;
  job_args a = {.crops = Py_None, .flips = Py_None, .draw_records = Py_None};
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
             "the exact way.");

static PyObject *pending_new(PoolObject *self, batch_ctx *ctx, job_views *v,
                             const records_in *records, batch_images *extents,
                             Py_buffer *const views[6], Py_ssize_t n);

/* decode_records, run now (submit 0) or queued as a Pending (submit 1). */
static PyObject *records_call(PoolObject *self, PyObject *args, PyObject *kwds, int submit) {
  static char *kwlist[] = {"base",   "offsets", "labels",  "ids",   "starts", "lengths",
                           "out",    "status",  "options", "crops", "flips",  "draw_records",
                           NULL};
  PyObject *base_obj, *offsets_obj, *labels_obj, *ids_obj, *starts_obj, *lengths_obj;
  job_args a = {.crops = Py_None, .flips = Py_None, .draw_records = Py_None};
  if (!PyArg_ParseTupleAndKeywords(args, kwds,
                                   submit ? "OOOOOOOOO|OOO:submit_records"
                                          : "OOOOOOOOO|OOO:decode_records",
                                   kwlist, &base_obj, &offsets_obj, &labels_obj, &ids_obj,
                                   &starts_obj, &lengths_obj, &a.out, &a.status, &a.options,
                                   &a.crops, &a.flips, &a.draw_records))
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
  records_in records = {
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

/* NOTE [pending jobs]: Pool.submit_records queues a decode_records job (rc_pool_submit) and
 * returns a Pending that owns everything the job uses: the buffer views (the base map, the
 * offsets, every output), the records' and the batch's contexts and the rc_job. The pool's
 * threads touch it only until the job is finished, so the views are released, and the memory
 * freed, only after that: by result(), or by dealloc, which waits for a job still running
 * with the GIL released (close() ends such a wait: rc_pool_shutdown skips the items left).
 * The pool is busy only during submit itself (NOTE [close vs batch]); a Pending holds a
 * reference to its Pool (its budget). In a forked child the job never finishes (no threads):
 * the Pending refuses to wait, and its dealloc releases the views without waiting. */
typedef struct {
  PyObject_HEAD
  PoolObject *pool;
  pid_t pid;
  Py_ssize_t n;
  int submitted; /* the job was queued: finished only once the pool says so */
  int released;  /* the views are released (after the job finished, or never queued) */
  PyObject *result;
  rc_job job;
  batch_ctx ctx;
  job_views v;
  records_in records;
  batch_images extents; /* the records' own buffers, where they were given so */
  Py_buffer views[6];
} PendingObject;

static PyTypeObject PendingType;

static void pending_release(PendingObject *self) {
  if (self->released) return;
  self->released = 1;
  job_release(&self->v);
  release_images(&self->extents);
  for (int i = 0; i < 6; i++)
    if (self->views[i].obj) PyBuffer_Release(&self->views[i]);
}

static PyObject *pending_new(PoolObject *pool, batch_ctx *ctx, job_views *v,
                             const records_in *records, batch_images *extents,
                             Py_buffer *const views[6], Py_ssize_t n) {
  PendingObject *self = PyObject_New(PendingObject, &PendingType);
  if (!self) return NULL;
  self->pool = (PoolObject *)Py_NewRef((PyObject *)pool);
  self->pid = getpid();
  self->n = n;
  self->submitted = self->released = 0;
  self->result = NULL;
  self->v = *v;
  memset(v, 0, sizeof *v);
  self->records = *records;
  self->extents = *extents;
  memset(extents, 0, sizeof *extents);
  for (int i = 0; i < 6; i++) {
    self->views[i] = *views[i];
    views[i]->obj = NULL;
  }
  self->ctx = *ctx;
  self->ctx.records = &self->records;
  rc_job_init(&self->job, decode_task, &self->ctx, (size_t)n);
  rc_pool *p = enter_pool(pool);
  int rc = p ? rc_pool_submit(p, &self->job) : -1;
  if (p) leave_pool(pool);
  self->submitted = rc == 0;
  if (rc < 0) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "decode pool is closed");
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject *)self;
}

static int pending_forked(PendingObject *self) {
  if (self->pid == getpid()) return 0;
  PyErr_SetString(PyExc_RuntimeError, "decode job was submitted in another process (fork)");
  return 1;
}

/* Waits for the job, the GIL released; timeout < 0: without limit. 1: finished. */
static int pending_wait(PendingObject *self, double timeout) {
  if (!self->submitted) return 1;
  int done;
  if (timeout > 1e9) timeout = -1; /* no time_t overflow: that is for ever */
  Py_BEGIN_ALLOW_THREADS
  done = rc_job_wait(&self->job, timeout);
  Py_END_ALLOW_THREADS
  return done;
}

static PyObject *Pending_wait(PendingObject *self, PyObject *args) {
  PyObject *timeout_obj = Py_None;
  if (!PyArg_ParseTuple(args, "|O:wait", &timeout_obj)) return NULL;
  double timeout = -1;
  if (timeout_obj != Py_None) {
    timeout = PyFloat_AsDouble(timeout_obj);
    if (timeout == -1 && PyErr_Occurred()) return NULL;
    if (!(timeout >= 0)) {
      PyErr_SetString(PyExc_ValueError, "timeout must be a non-negative number or None");
      return NULL;
    }
  }
  if (self->released) Py_RETURN_TRUE;
  if (pending_forked(self)) return NULL;
  return PyBool_FromLong(pending_wait(self, timeout));
}

static PyObject *Pending_result(PendingObject *self, PyObject *unused) {
  if (self->result) return Py_NewRef(self->result);
  if (self->released) {
    PyErr_SetString(PyExc_ValueError, "decode pool is closed");
    return NULL;
  }
  if (pending_forked(self)) return NULL;
  pending_wait(self, -1);
  PyObject *result;
  if (rc_job_cancelled(&self->job))
    result = NULL;
  else
    result = all_ok(self->ctx.status, self->n)
                 ? Py_NewRef(Py_None)
                 : per_image(self->ctx.status, self->ctx.errors, self->n, no_result, NULL);
  const int cancelled = result == NULL && !PyErr_Occurred();
  pending_release(self);
  if (cancelled) PyErr_SetString(PyExc_ValueError, "decode pool is closed");
  self->result = result ? Py_NewRef(result) : NULL;
  return result;
}

static PyObject *Pending_get_done(PendingObject *self, void *closure) {
  if (self->released || !self->submitted) Py_RETURN_TRUE;
  if (pending_forked(self)) return NULL;
  return PyBool_FromLong(rc_job_wait(&self->job, 0));
}

static void Pending_dealloc(PendingObject *self) {
  const int here = self->pid == getpid();
  if (here && !self->released) pending_wait(self, -1);
  pending_release(self);
  if (here) rc_job_destroy(&self->job); /* a child's copy may be a locked mutex: left alone */
  Py_XDECREF(self->result);
  Py_XDECREF(self->pool);
  PyObject_Free(self);
}

static PyMethodDef Pending_methods[] = {
    {"wait", (PyCFunction)Pending_wait, METH_VARARGS,
     "wait(timeout=None) -> bool: waits (GIL released) until the job is finished, at most "
     "timeout seconds; whether it is."},
    {"result", (PyCFunction)Pending_result, METH_NOARGS,
     "result() -> list[str | None] | None: waits for the job and gives what decode_records "
     "would have (ValueError if the pool was closed before every image ran); releases the "
     "buffers the job held."},
    {NULL},
};

static PyGetSetDef Pending_getset[] = {
    {"done", (getter)Pending_get_done, NULL, "whether the job is finished", NULL},
    {NULL},
};

static PyTypeObject PendingType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recio._native.Pending",
    .tp_doc = PyDoc_STR("A decode job queued on the pool (Pool.submit_records)."),
    .tp_basicsize = sizeof(PendingObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)Pending_dealloc,
    .tp_methods = Pending_methods,
    .tp_getset = Pending_getset,
};

PyDoc_STRVAR(submit_records_doc,
             "submit_records(...) -> Pending\n\n"
             "decode_records' arguments, the job queued on the pool instead of run: returns at "
             "once a Pending whose result() is what decode_records returns. The pool's threads go "
             "from one queued job to the next without waiting for the caller. Every buffer "
             "passed is held, and written to, until the job is finished.");

static PyObject *Pool_submit_records(PoolObject *self, PyObject *args, PyObject *kwds) {
  return records_call(self, args, kwds, 1);
}

PyDoc_STRVAR(transcode_batch_doc,
             "transcode_batch(buffers, status, crops, sizes, quality, gray, interp, dct_mode, "
             "max_pixels) -> list[bytes | str]\n\n"
             "Decodes every JPEG in buffers, crops it (crops: int32 [n][4] or None), resizes it "
             "to sizes[i] (int32 [n][2], width and height) and encodes it again as a JPEG at "
             "quality (4:2:0, or one grey channel when gray). Writes status[i] (int32) and "
             "returns per image the new JPEG's bytes, or the error text where status is not 0 "
             "(an output size that is not positive or over 2**28 pixels is such an error). "
             "Use recio.im2rec, which checks the arguments.");

static PyObject *transcoded_jpeg(void *vctx, Py_ssize_t i) {
  transcode_ctx *c = vctx;
  return PyBytes_FromStringAndSize((const char *)c->outs[i], (Py_ssize_t)c->lens[i]);
}

static PyObject *Pool_transcode_batch(PoolObject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"buffers", "status", "crops",    "sizes",      "quality",
                           "gray",    "interp", "dct_mode", "max_pixels", NULL};
  PyObject *buffers, *status_obj, *crops_obj, *sizes_obj;
  int quality, gray, interp, dct_mode;
  unsigned long long max_pixels;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOiiiiK:transcode_batch", kwlist, &buffers,
                                   &status_obj, &crops_obj, &sizes_obj, &quality, &gray, &interp,
                                   &dct_mode, &max_pixels))
    return NULL;
  if (check_open(self) < 0) return NULL;
  if (quality < 1 || quality > 100 || interp < 0 || interp > RC_INTERP_NEAREST || dct_mode < 0 ||
      dct_mode > RC_DCT_ALL) {
    PyErr_SetString(PyExc_ValueError, "bad transcode parameters");
    return NULL;
  }
  batch_images im;
  if (get_listed(buffers, &im) < 0) return NULL;
  const Py_ssize_t n = im.n;
  PyObject *result = NULL;
  char *errors = NULL;
  uint8_t **outs = NULL;
  size_t *lens = NULL;
  Py_buffer status = {0}, crops = {0}, sizes = {0};
  if (get_param(status_obj, &status, n * 4, 1, "status") < 0 ||
      get_param(crops_obj, &crops, n * 16, 0, "crops") < 0 ||
      get_param(sizes_obj, &sizes, n * 8, 0, "sizes") < 0)
    goto done;
  if (!status.buf || !sizes.buf) {
    PyErr_SetString(PyExc_ValueError, "status and sizes are required");
    goto done;
  }
  const size_t m = n ? (size_t)n : 1;
  errors = PyMem_Calloc(m, RC_ERRLEN);
  outs = PyMem_Calloc(m, sizeof *outs);
  lens = PyMem_Calloc(m, sizeof *lens);
  if (!errors || !outs || !lens) {
    PyErr_NoMemory();
    goto done;
  }
  transcode_ctx ctx = {
      .images = im.refs,
      .crops = crops.buf,
      .sizes = sizes.buf,
      .status = status.buf,
      .errors = errors,
      .outs = outs,
      .lens = lens,
      .quality = quality,
      .gray = gray != 0,
      .opts = {.layout = RC_LAYOUT_NHWC,
               .itemsize = 1,
               .interp = interp,
               .dct_mode = dct_mode,
               .roi = 1,
               .max_pixels = max_pixels,
               .budget = &self->budget},
  };
  if (run_released(self, transcode_task, &ctx, n) < 0) goto done;
  result = per_image(status.buf, errors, n, transcoded_jpeg, &ctx);
done:
  if (outs)
    for (Py_ssize_t i = 0; i < n; i++) free(outs[i]);
  PyMem_Free(outs);
  PyMem_Free(lens);
  PyMem_Free(errors);
  release_param(&status);
  release_param(&crops);
  release_param(&sizes);
  release_images(&im);
  return result;
}

PyDoc_STRVAR(resize_encode_doc,
             "resize_encode(pixels, width, height, crop, out_w, out_h, quality, interp) -> bytes"
             "\n\n"
             "Packed RGB pixels (height rows of width * 3 bytes, C-contiguous) decoded elsewhere: "
             "crops to crop (x, y, w, h, inside the image), resizes to out_w x out_h as "
             "Pillow's resize(box=) does and encodes a 4:2:0 JPEG at quality, with the GIL "
             "released. Raises ValueError with the reason on failure.");

static PyObject *Pool_resize_encode(PoolObject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"pixels", "width",   "height", "crop", "out_w",
                           "out_h",  "quality", "interp", NULL};
  PyObject *pixels;
  resize_encode_ctx ctx = {0};
  int interp;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "Oii(iiii)iiii:resize_encode", kwlist, &pixels,
                                   &ctx.width, &ctx.height, &ctx.crop[0], &ctx.crop[1],
                                   &ctx.crop[2], &ctx.crop[3], &ctx.opts.out_w, &ctx.opts.out_h,
                                   &ctx.quality, &interp))
    return NULL;
  if (check_open(self) < 0) return NULL;
  if (ctx.width < 1 || ctx.height < 1 || ctx.quality < 1 || ctx.quality > 100 || interp < 0 ||
      interp > RC_INTERP_NEAREST) {
    PyErr_SetString(PyExc_ValueError, "bad resize_encode parameters");
    return NULL;
  }
  Py_buffer view;
  if (get_param(pixels, &view, (Py_ssize_t)ctx.width * ctx.height * 3, 0, "pixels") < 0)
    return NULL;
  if (!view.buf) {
    PyErr_SetString(PyExc_ValueError, "pixels are required");
    return NULL;
  }
  ctx.rgb = view.buf;
  ctx.stride = (size_t)ctx.width * 3;
  ctx.opts.layout = RC_LAYOUT_NHWC;
  ctx.opts.itemsize = 1;
  ctx.opts.interp = interp;
  ctx.opts.budget = &self->budget;
  PyObject *result = NULL;
  if (run_released(self, resize_encode_task, &ctx, 1) == 0) {
    if (ctx.status == RC_OK)
      result = PyBytes_FromStringAndSize((const char *)ctx.out, (Py_ssize_t)ctx.len);
    else
      PyErr_Format(PyExc_ValueError, "resize_encode: %s", ctx.err);
  }
  free(ctx.out);
  release_param(&view);
  return result;
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

static PyObject *Pool_get_closed(PoolObject *self, void *closure) {
  const int lock = !forked(self);
  if (lock) pthread_mutex_lock(&self->mu);
  int closed = self->pool == NULL || self->closed;
  if (lock) pthread_mutex_unlock(&self->mu);
  return PyBool_FromLong(closed);
}

PyDoc_STRVAR(
    im2rec_batch_doc,
    "im2rec_batch(paths, prefixes, status, lengths, crcs, resize, center_crop, color, quality, "
    "max_output_bytes, dct_mode, max_pixels) -> bytes\n\n"
    "im2rec's work on list entries whose files are plain JPEGs: reads file paths[i] (bytes), "
    "transcodes it as recio.im2rec's EncodeOptions say, puts prefixes[i] (bytes: the IRHeader "
    "and labels) before it and frames the record as encode_record does. Writes status[i] "
    "(int32: 0, or STATUS_UNSUPPORTED where the entry is left to the Python path, whatever "
    "the reason), lengths[i] (int64: its frames' bytes, padding included, 0 if not made) and "
    "crcs[i] (uint32: the record's checksum, as the checksum sidecar keeps it); returns the "
    "frames of the records made, one after another in entry order. With the GIL released.");

static PyObject *Pool_im2rec_batch(PoolObject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"paths",   "prefixes",         "status",   "lengths",
                           "crcs",    "resize",           "center_crop", "color",
                           "quality", "max_output_bytes", "dct_mode", "max_pixels",
                           NULL};
  PyObject *paths_obj, *prefixes_obj, *status_obj, *lengths_obj, *crcs_obj;
  im2rec_ctx ctx = {0};
  unsigned long long max_out, max_pixels;
  int dct_mode;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOiiiiKiK:im2rec_batch", kwlist, &paths_obj,
                                   &prefixes_obj, &status_obj, &lengths_obj, &crcs_obj,
                                   &ctx.o.resize, &ctx.o.center_crop, &ctx.o.color,
                                   &ctx.o.quality, &max_out, &dct_mode, &max_pixels))
    return NULL;
  if (check_open(self) < 0) return NULL;
  if (ctx.o.quality < 1 || ctx.o.quality > 100 || ctx.o.color < -1 || ctx.o.color > 1 ||
      ctx.o.resize < 0 || dct_mode < 0 || dct_mode > RC_DCT_ALL) {
    PyErr_SetString(PyExc_ValueError, "bad im2rec_batch parameters");
    return NULL;
  }
  ctx.o.max_output_bytes = max_out;
  /* tuples: the batch keeps its own references while the GIL is released */
  PyObject *paths = PySequence_Tuple(paths_obj), *prefixes = NULL, *result = NULL;
  Py_buffer status = {0}, lengths = {0}, crcs = {0};
  Py_ssize_t n = 0;
  if (!paths || !(prefixes = PySequence_Tuple(prefixes_obj))) goto done;
  n = PyTuple_GET_SIZE(paths);
  if (PyTuple_GET_SIZE(prefixes) != n) {
    PyErr_SetString(PyExc_ValueError, "paths and prefixes differ in length");
    goto done;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *p = PyTuple_GET_ITEM(paths, i), *q = PyTuple_GET_ITEM(prefixes, i);
    if (!PyBytes_Check(p) || !PyBytes_Check(q)) {
      PyErr_Format(PyExc_TypeError, "paths[%zd] and prefixes[%zd] must be bytes", i, i);
      goto done;
    }
  }
  if (get_param(status_obj, &status, n * 4, 1, "status") < 0 ||
      get_param(lengths_obj, &lengths, n * 8, 1, "lengths") < 0 ||
      get_param(crcs_obj, &crcs, n * 4, 1, "crcs") < 0)
    goto done;
  if (!status.buf || !lengths.buf || !crcs.buf) {
    PyErr_SetString(PyExc_ValueError, "status, lengths and crcs are required");
    goto done;
  }
  ctx.frames = PyMem_Calloc(n ? (size_t)n : 1, sizeof *ctx.frames);
  if (!ctx.frames) {
    PyErr_NoMemory();
    goto done;
  }
  ctx.paths = &PyTuple_GET_ITEM(paths, 0);
  ctx.prefixes = &PyTuple_GET_ITEM(prefixes, 0);
  ctx.status = status.buf;
  ctx.lengths = lengths.buf;
  ctx.crcs = crcs.buf;
  ctx.opts = (rc_opts){.layout = RC_LAYOUT_NHWC,
                       .itemsize = 1,
                       .interp = RC_INTERP_BILINEAR,
                       .dct_mode = dct_mode,
                       .roi = 1,
                       .max_pixels = max_pixels,
                       .budget = &self->budget};
  for (Py_ssize_t i = 0; i < n; i++) { /* a path C would read short is Python's to refuse */
    PyObject *p = PyTuple_GET_ITEM(paths, i);
    ctx.status[i] = RC_UNSUPPORTED;
    ctx.lengths[i] = 0;
    ctx.crcs[i] = 0;
    if (memchr(PyBytes_AS_STRING(p), 0, (size_t)PyBytes_GET_SIZE(p))) ctx.paths = NULL;
  }
  if (!ctx.paths) { /* embedded NUL: every entry to Python, which raises as before */
    result = PyBytes_FromStringAndSize(NULL, 0);
    goto done;
  }
  if (run_released(self, im2rec_task, &ctx, n) < 0) goto done;
  Py_ssize_t total = 0;
  for (Py_ssize_t i = 0; i < n; i++) total += (Py_ssize_t)ctx.lengths[i];
  result = PyBytes_FromStringAndSize(NULL, total);
  if (result) {
    char *o = PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < n; i++) {
      if (ctx.lengths[i]) memcpy(o, ctx.frames[i], (size_t)ctx.lengths[i]);
      o += ctx.lengths[i];
    }
  }
done:
  if (ctx.frames)
    for (Py_ssize_t i = 0; i < n; i++) free(ctx.frames[i]);
  PyMem_Free(ctx.frames);
  release_param(&status);
  release_param(&lengths);
  release_param(&crcs);
  Py_XDECREF(paths);
  Py_XDECREF(prefixes);
  return result;
}

static PyMethodDef Pool_methods[] = {
    {"decode_batch", (PyCFunction)(void (*)(void))Pool_decode_batch, METH_VARARGS | METH_KEYWORDS, decode_batch_doc},
    {"decode_records", (PyCFunction)(void (*)(void))Pool_decode_records, METH_VARARGS | METH_KEYWORDS, decode_records_doc},
    {"submit_records", (PyCFunction)(void (*)(void))Pool_submit_records, METH_VARARGS | METH_KEYWORDS, submit_records_doc},
    {"image_sizes", (PyCFunction)(void (*)(void))Pool_image_sizes, METH_VARARGS | METH_KEYWORDS, image_sizes_doc},
    {"transcode_batch", (PyCFunction)(void (*)(void))Pool_transcode_batch, METH_VARARGS | METH_KEYWORDS, transcode_batch_doc},
    {"resize_encode", (PyCFunction)(void (*)(void))Pool_resize_encode, METH_VARARGS | METH_KEYWORDS, resize_encode_doc},
    {"im2rec_batch", (PyCFunction)(void (*)(void))Pool_im2rec_batch, METH_VARARGS | METH_KEYWORDS, im2rec_batch_doc},
    {"reserve", (PyCFunction)Pool_reserve, METH_O, reserve_doc},
    {"release", (PyCFunction)Pool_release, METH_O, "release(nbytes): gives back a reserve()."},
    {"close", (PyCFunction)Pool_close, METH_NOARGS, "Stops and joins the threads."},
    {NULL},
};

static PyGetSetDef Pool_getset[] = {
    {"num_threads", (getter)Pool_get_num_threads, NULL, "number of decode threads", NULL},
    {"closed", (getter)Pool_get_closed, NULL, "whether close() was called", NULL},
    {"max_decode_bytes", (getter)Pool_get_max_decode_bytes, NULL,
     "the decode budget in bytes (0: none)", NULL},
    {NULL},
};

static PyTypeObject PoolType = {
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

static PyObject *dct_scale_num(PyObject *mod, PyObject *args) {
  int cw, ch, ow, oh, mode;
  if (!PyArg_ParseTuple(args, "iiiii:dct_scale_num", &cw, &ch, &ow, &oh, &mode)) return NULL;
  return PyLong_FromLong(rc_dct_scale_num(cw, ch, ow, oh, mode));
}

PyDoc_STRVAR(draw_warp_doc,
             "draw_warp(draw, width, height, record) -> (m, off_x, off_y, interp, border, fill, "
             "crop, flip)\n\n"
             "The warp the decode draws for `record`, an image of width x height, with draw's "
             "geometry (recio.augment.geometry.plan is its reference): m the 2x3 map (6 floats), the "
             "crop (x, y, w, h) the source pixels its taps read.");

static PyObject *draw_warp(PyObject *mod, PyObject *args) {
  PyObject *draw_obj;
  int width, height;
  long long record;
  if (!PyArg_ParseTuple(args, "OiiL:draw_warp", &draw_obj, &width, &height, &record)) return NULL;
  const rc_draw *drawn = draw_of(draw_obj);
  if (!drawn) return NULL;
  const rc_draw d = *drawn;
  if (!d.geom.on) {
    PyErr_SetString(PyExc_ValueError, "draw_warp needs a draw with a geometry");
    return NULL;
  }
  rc_warp wp;
  int32_t crop[4];
  uint8_t flip;
  rc_draw_warp(&d, record, width, height, &wp, crop, &flip);
  return Py_BuildValue("(dddddd)iiiii(iiii)O", wp.m[0], wp.m[1], wp.m[2], wp.m[3], wp.m[4], wp.m[5],
                       wp.off_x, wp.off_y, wp.interp, wp.border, (int)wp.fill, crop[0], crop[1],
                       crop[2], crop[3], flip ? Py_True : Py_False);
}

PyDoc_STRVAR(draw_windows_doc,
             "draw_windows(draw, sizes, records, crops, flips) -> None\n\n"
             "Writes the keyed window (int32 [n][4]: x, y, w, h) and flip (uint8 [n]) of every "
             "record records[i] (int64 [n]) of size sizes[i] (int32 [n][2]: width, height) into "
             "crops and flips: what decode_batch draws for it. draw: a Draw.");

static PyObject *draw_windows(PyObject *mod, PyObject *args) {
  PyObject *draw_obj, *sizes_obj, *records_obj, *crops_obj, *flips_obj;
  if (!PyArg_ParseTuple(args, "OOOOO:draw_windows", &draw_obj, &sizes_obj, &records_obj, &crops_obj,
                        &flips_obj))
    return NULL;
  const rc_draw *drawn = draw_of(draw_obj);
  if (!drawn) return NULL;
  const rc_draw d = *drawn;
  Py_buffer records, sizes = {0}, crops = {0}, flips = {0};
  if (get_int64s(records_obj, &records, "records") < 0) return NULL;
  const Py_ssize_t n = records.shape[0];
  PyObject *result = NULL;
  if (get_param(sizes_obj, &sizes, n * 8, 0, "sizes") < 0 ||
      get_param(crops_obj, &crops, n * 16, 1, "crops") < 0 ||
      get_param(flips_obj, &flips, n, 1, "flips") < 0)
    goto done;
  if (!sizes.buf || !crops.buf || !flips.buf) {
    PyErr_SetString(PyExc_ValueError, "sizes, crops and flips are required");
    goto done;
  }
  const int32_t *sz = sizes.buf;
  const int64_t *rec = records.buf;
  rc_warp wp;
  for (Py_ssize_t i = 0; i < n; i++)
    if (d.geom.on)
      rc_draw_warp(&d, rec[i], sz[2 * i], sz[2 * i + 1], &wp, (int32_t *)crops.buf + 4 * i,
                   (uint8_t *)flips.buf + i);
    else
      rc_draw_window(&d, rec[i], sz[2 * i], sz[2 * i + 1], (int32_t *)crops.buf + 4 * i,
                     (uint8_t *)flips.buf + i);
  result = Py_NewRef(Py_None);
done:
  release_param(&sizes);
  release_param(&crops);
  release_param(&flips);
  PyBuffer_Release(&records);
  return result;
}

PyDoc_STRVAR(draw_colours_doc,
             "draw_colours(draw, records, values) -> None\n\n"
             "Writes the colour draws of every record records[i] (int64 [n]) into values "
             "(float64 [n][11], recio.augment.ColourDraws): what decode_batch applies to it.");

static PyObject *draw_colours(PyObject *mod, PyObject *args) {
  PyObject *draw_obj, *records_obj, *values_obj;
  if (!PyArg_ParseTuple(args, "OOO:draw_colours", &draw_obj, &records_obj, &values_obj))
    return NULL;
  const rc_draw *drawn = draw_of(draw_obj);
  if (!drawn) return NULL;
  const rc_draw d = *drawn;
  Py_buffer records, values = {0};
  if (get_int64s(records_obj, &records, "records") < 0) return NULL;
  const Py_ssize_t n = records.shape[0];
  PyObject *result = NULL;
  if (get_param(values_obj, &values, n * RC_COLOUR_VALUES * 8, 1, "values") < 0) goto done;
  if (!values.buf) {
    PyErr_SetString(PyExc_ValueError, "values is required");
    goto done;
  }
  const int64_t *rec = records.buf;
  for (Py_ssize_t i = 0; i < n; i++)
    rc_draw_colour(&d, rec[i], (double *)values.buf + RC_COLOUR_VALUES * i);
  result = Py_NewRef(Py_None);
done:
  release_param(&values);
  PyBuffer_Release(&records);
  return result;
}

PyDoc_STRVAR(crc32c_doc,
             "crc32c(data, value=0) -> the CRC32C of a bytes-like object, continuing value (as "
             "the crc32c package's crc32c).");

static PyObject *crc32c_fn(PyObject *mod, PyObject *args) {
  Py_buffer data;
  unsigned int value = 0;
  if (!PyArg_ParseTuple(args, "y*|I:crc32c", &data, &value)) return NULL;
  uint32_t crc;
  Py_BEGIN_ALLOW_THREADS
  crc = rc_crc32c(value, data.buf, (size_t)data.len);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&data);
  return PyLong_FromUnsignedLong(crc);
}

PyDoc_STRVAR(record_crcs_doc,
             "record_crcs(base, offsets, crcs, ends): for the record at each offsets[i] (int64 "
             "[n]) of base, where its frames end (ends, int64 [n]; -1 where they do not chain) "
             "and their CRC32C from the offset to there (crcs, uint32 [n]; 0 where they do not "
             "chain). The GIL is released while it runs.");

static PyObject *record_crcs(PyObject *mod, PyObject *args) {
  PyObject *base_obj, *offsets_obj, *crcs_obj, *ends_obj;
  if (!PyArg_ParseTuple(args, "OOOO:record_crcs", &base_obj, &offsets_obj, &crcs_obj, &ends_obj))
    return NULL;
  Py_buffer base = {0}, offsets = {0}, crcs = {0}, ends = {0};
  PyObject *result = NULL;
  if (PyObject_GetBuffer(base_obj, &base, PyBUF_SIMPLE) < 0) return NULL;
  if (get_int64s(offsets_obj, &offsets, "offsets") < 0) goto done;
  const Py_ssize_t n = offsets.shape[0];
  if (get_param(crcs_obj, &crcs, n * 4, 1, "crcs") < 0 ||
      get_param(ends_obj, &ends, n * 8, 1, "ends") < 0)
    goto done;
  if (!crcs.buf || !ends.buf) {
    PyErr_SetString(PyExc_ValueError, "crcs and ends are required");
    goto done;
  }
  const uint8_t *b = base.buf;
  const size_t size = (size_t)base.len;
  const int64_t *off = offsets.buf;
  uint32_t *crc = crcs.buf;
  int64_t *end = ends.buf;
  Py_BEGIN_ALLOW_THREADS
  for (Py_ssize_t i = 0; i < n; i++) {
    const int64_t at = off[i];
    end[i] = at < 0 ? -1 : rc_frames_end(b, size, (size_t)at);
    crc[i] = end[i] < 0 ? 0 : rc_crc32c(0, b + at, (size_t)(end[i] - at));
  }
  Py_END_ALLOW_THREADS
  result = Py_NewRef(Py_None);
done:
  release_param(&crcs);
  release_param(&ends);
  if (offsets.obj) PyBuffer_Release(&offsets);
  PyBuffer_Release(&base);
  return result;
}

PyDoc_STRVAR(extent_crcs_doc,
             "extent_crcs(buffers, crcs, ends): record_crcs of the record at the start of each "
             "buffer (a sequence of n bytes-like objects: remote records' extents as fetched).");

static PyObject *extent_crcs(PyObject *mod, PyObject *args) {
  PyObject *buffers, *crcs_obj, *ends_obj;
  if (!PyArg_ParseTuple(args, "OOO:extent_crcs", &buffers, &crcs_obj, &ends_obj)) return NULL;
  PyObject *seq = PySequence_Fast(buffers, "buffers must be a sequence");
  if (!seq) return NULL;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  Py_buffer crcs = {0}, ends = {0};
  Py_buffer *views = PyMem_Calloc(n ? n : 1, sizeof(Py_buffer));
  Py_ssize_t got = 0;
  PyObject *result = NULL;
  if (!views) {
    PyErr_NoMemory();
    goto done;
  }
  if (get_param(crcs_obj, &crcs, n * 4, 1, "crcs") < 0 ||
      get_param(ends_obj, &ends, n * 8, 1, "ends") < 0)
    goto done;
  if (!crcs.buf || !ends.buf) {
    PyErr_SetString(PyExc_ValueError, "crcs and ends are required");
    goto done;
  }
  for (; got < n; got++)
    if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &views[got], PyBUF_SIMPLE) < 0)
      goto done;
  uint32_t *crc = crcs.buf;
  int64_t *end = ends.buf;
  Py_BEGIN_ALLOW_THREADS
  for (Py_ssize_t i = 0; i < n; i++) {
    const uint8_t *b = views[i].buf;
    end[i] = rc_frames_end(b, (size_t)views[i].len, 0);
    crc[i] = end[i] < 0 ? 0 : rc_crc32c(0, b, (size_t)end[i]);
  }
  Py_END_ALLOW_THREADS
  result = Py_NewRef(Py_None);
done:
  for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
  PyMem_Free(views);
  release_param(&crcs);
  release_param(&ends);
  Py_DECREF(seq);
  return result;
}

static PyObject *epoch_key(PyObject *mod, PyObject *args) {
  unsigned long long seed, epoch;
  if (!PyArg_ParseTuple(args, "KK:epoch_key", &seed, &epoch)) return NULL;
  return PyLong_FromUnsignedLongLong(rc_epoch_key(seed, epoch));
}

static PyMethodDef module_methods[] = {
    {"draw_windows", draw_windows, METH_VARARGS, draw_windows_doc},
    {"draw_colours", draw_colours, METH_VARARGS, draw_colours_doc},
    {"draw_warp", draw_warp, METH_VARARGS, draw_warp_doc},
    {"crc32c", crc32c_fn, METH_VARARGS, crc32c_doc},
    {"record_crcs", record_crcs, METH_VARARGS, record_crcs_doc},
    {"extent_crcs", extent_crcs, METH_VARARGS, extent_crcs_doc},
    {"epoch_key", epoch_key, METH_VARARGS,
     "epoch_key(seed, epoch) -> the key of an epoch's keyed draws (both taken mod 2**64)."},
    {"dct_scale_num", dct_scale_num, METH_VARARGS,
     "dct_scale_num(crop_w, crop_h, out_w, out_h, dct_mode) -> the libjpeg scale numerator "
     "(over 8) the decoder uses for that crop and output size."},
    {NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, .m_name = "recio._native",   .m_doc = "recio's native JPEG decode pool.",
    .m_size = -1,          .m_methods = module_methods,
};

#define STR_(x) #x
#define STR(x) STR_(x)

#define RC_STATUS_ROW_(suffix, value, name) {"STATUS_" #suffix, value, name},
static const struct {
  const char *attr;
  int code;
  const char *name;
} status_codes[] = {RC_STATUS_LIST(RC_STATUS_ROW_)};
#undef RC_STATUS_ROW_

/* STATUS_<suffix> constants and STATUS_NAMES {code: name}, from RC_STATUS_LIST. */
static int add_status_codes(PyObject *m) {
  PyObject *names = PyDict_New();
  int rc = names ? 0 : -1;
  for (size_t i = 0; rc == 0 && i < sizeof status_codes / sizeof status_codes[0]; i++) {
    PyObject *code = PyLong_FromLong(status_codes[i].code);
    PyObject *name = PyUnicode_FromString(status_codes[i].name);
    if (!code || !name || PyDict_SetItem(names, code, name) < 0 ||
        PyModule_AddObjectRef(m, status_codes[i].attr, code) < 0)
      rc = -1;
    Py_XDECREF(code);
    Py_XDECREF(name);
  }
  if (rc == 0) rc = PyModule_AddObjectRef(m, "STATUS_NAMES", names);
  Py_XDECREF(names);
  return rc;
}

PyMODINIT_FUNC PyInit__native(void) {
  if (PyType_Ready(&PoolType) < 0 || PyType_Ready(&PendingType) < 0 ||
      PyType_Ready(&DrawType) < 0 || PyType_Ready(&JobOptionsType) < 0)
    return NULL;
  PyObject *m = PyModule_Create(&native_module);
  if (!m) return NULL;
  /* No Py_MOD_GIL_NOT_USED: a free-threaded build turns the GIL on when it imports this
   * module. Pool's close/batch state is under its own mutex, but the rest relies on the GIL:
   * the buffers sequence is read item by item (PySequence_Fast_GET_ITEM on a list another
   * thread could change), Pool.pid and the fork checks are ordered by the GIL only. */
  if (PyModule_AddObjectRef(m, "Pool", (PyObject *)&PoolType) < 0 ||
      PyModule_AddObjectRef(m, "Draw", (PyObject *)&DrawType) < 0 ||
      PyModule_AddObjectRef(m, "JobOptions", (PyObject *)&JobOptionsType) < 0 ||
      PyModule_AddStringConstant(m, "LIBJPEG_TURBO_VERSION", STR(LIBJPEG_TURBO_VERSION)) < 0 ||
      PyModule_AddIntConstant(m, "ERRLEN", RC_ERRLEN) < 0 ||
      PyModule_AddStringConstant(m, "SIMD", rc_simd_init()) < 0 ||
      PyModule_AddStringConstant(m, "COLOUR_SIMD", rc_colour_init()) < 0 ||
      PyModule_AddStringConstant(m, "CRC32C", rc_crc32c_init()) < 0 || add_status_codes(m) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
