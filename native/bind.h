/* The Python bindings' shared parts, internal to recio._native: the Pool object, the batch
 * helpers (_native.c), and what each binding file gives the others. One file per object:
 * bind_pool.c (Pool: decode_batch, decode_records, image_sizes, the budget), bind_pending.c
 * (Pending: a queued decode_records job), bind_options.c (Draw, JobOptions and the draw
 * functions), bind_im2rec.c (the encoder methods im2rec uses), bind_crc.c (CRC32C),
 * bind_restart.c (the restart cut), bind_unstuff.c (the unstuffed copy, for its tests).
 */
#ifndef RECIO_BIND_H
#define RECIO_BIND_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <unistd.h>

#include "decode_core.h"
#include "draw.h"
#include "encode_core.h"
#include "lossless.h"
#include "pool.h"
#include "records_core.h"
#include "streamcheck.h"

/* A doc string another binding file's table refers to. */
#define RC_DOC(name, str) const char name[] = PyDoc_STR(str)

/* A decode pool (bind_pool.c): the rc_pool, its decode budget, and the state that orders
 * close() against running batches (NOTE [close vs batch] in bind_pool.c). */
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
  /* NOTE [whole-stream check] (streamcheck.h): the JPEGs the process's decodes read whole. */
  rc_checked *checked;
} PoolObject;

/* One decode batch as its tasks (decode_task) read it: the images or records, the windows
 * or draws, the outputs and the options. */
typedef struct {
  const rc_span *images; /* or, records not NULL, read from the records */
  const rc_records *records;
  int32_t *crops;              /* [n][4] or NULL; written where draw is set */
  uint8_t *flips;              /* [n] or NULL; written where draw is set */
  const rc_draw *draw;         /* keyed draws, or NULL: the crops and flips given */
  const int64_t *draw_records; /* [n]: each image's record number, the key of its draws */
  int32_t *status;
  char *errors; /* [n][RC_ERRLEN] */
  uint8_t *out;
  size_t out_stride; /* bytes per image */
  /* [n] or NULL (records only): each parsed record's sidecar checksum, its frame's CRC32C
   * (NOTE [one pass per record] in bind_pool.c) */
  uint32_t *frame_crcs;
  rc_opts opts;
} batch_ctx;

/* One per pool thread: the decoder, and the encoder and lossless transcoder made by the
 * first call that needs each. */
typedef struct {
  rc_worker *dec;
  rc_encoder *enc;
  rc_lossless *ll;
} thread_state;

/* The encoded images of one batch: where each one's bytes are (refs), and the buffer views
 * that keep them readable, and in place (a bytearray cannot be resized, an mmap not closed),
 * until release_images, the GIL released in between. From a sequence of bytes-like objects,
 * each image has a view of its own; from spans (one base buffer, int64 starts and lengths),
 * one view of the base serves them all: the starts and lengths are read, and checked against
 * the base, before any work, so a change to them afterwards cannot reach the pool. */
typedef struct {
  Py_ssize_t n;
  rc_span *refs;     /* [n] */
  Py_buffer *views;  /* [nviews]: one per image, or the base */
  Py_ssize_t nviews; /* views taken so far */
} batch_images;

/* _native.c: reading a batch's arguments, running it, its result. */
void release_images(batch_images *im);
int get_listed(PyObject *buffers, batch_images *im);
int get_int64s(PyObject *obj, Py_buffer *view, const char *name);
int get_images(PyObject *buffers, PyObject *starts, PyObject *lengths, batch_images *im);
int get_param(PyObject *obj, Py_buffer *view, Py_ssize_t need, int writable, const char *name);
void release_param(Py_buffer *view);
int run_released(PoolObject *self, rc_task_fn fn, void *ctx, Py_ssize_t n);
PyObject *per_image(const int32_t *status, const char *errors, Py_ssize_t n,
                    PyObject *(*ok)(void *ctx, Py_ssize_t i), void *ctx);
PyObject *no_result(void *ctx, Py_ssize_t i);
int all_ok(const int32_t *status, Py_ssize_t n);

/* bind_pool.c */
extern PyTypeObject PoolType;
int forked(const PoolObject *self);
rc_pool *enter_pool(PoolObject *self);
void leave_pool(PoolObject *self);
int check_open(PoolObject *self);
void decode_task(void *vctx, void *state, size_t i);

/* The buffers a decode holds while it runs, its options and its error texts. */
typedef struct {
  Py_buffer out, status, crops, flips, draw_records, crcs;
  PyObject *options; /* the JobOptions: its views and Draw stay alive with it */
  char *errors;
} job_views;
void job_release(job_views *v);

/* bind_pending.c */
extern PyTypeObject PendingType;
PyObject *pending_new(PoolObject *pool, batch_ctx *ctx, job_views *v, const rc_records *records,
                      batch_images *extents, Py_buffer *const views[6], Py_ssize_t n);

/* bind_options.c */
typedef struct {
  PyObject_HEAD
  rc_draw draw;
} DrawObject;

/* A decode's options (NOTE [named parameters]): rc_opts less the budget (the pool's), with the
 * views of its lookup table, gain and mean image held while it lives, and its Draw. */
typedef struct {
  PyObject_HEAD
  rc_opts opts;
  PyObject *draw; /* a Draw, or NULL */
  Py_buffer lut, lut_line, gain, mean_img;
} JobOptionsObject;

extern PyTypeObject DrawType, JobOptionsType;
const rc_draw *draw_of(PyObject *obj);
extern PyMethodDef rc_draw_functions[];

/* bind_im2rec.c: Pool methods */
PyObject *Pool_transcode_batch(PoolObject *self, PyObject *args, PyObject *kwds);
PyObject *Pool_resize_encode(PoolObject *self, PyObject *args, PyObject *kwds);
PyObject *Pool_im2rec_batch(PoolObject *self, PyObject *args, PyObject *kwds);
PyObject *Pool_lossless_batch(PoolObject *self, PyObject *args, PyObject *kwds);
extern const char transcode_batch_doc[], resize_encode_doc[], im2rec_batch_doc[],
    lossless_batch_doc[];

/* bind_crc.c */
extern PyMethodDef rc_crc_functions[];
extern PyMethodDef rc_decode_functions[];   /* bind_pool.c */
extern PyMethodDef rc_guard_functions[];    /* mapguard.c */
extern PyMethodDef rc_restart_functions[];  /* bind_restart.c */
extern PyMethodDef rc_unstuff_functions[];  /* bind_unstuff.c */
extern PyMethodDef rc_resample_functions[]; /* bind_resample.c */

#endif
