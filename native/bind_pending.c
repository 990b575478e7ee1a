/* Python binding of a decode job queued on the pool: the Pending object (Pool.submit_records). */
#include "bind.h"

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
  rc_records records;
  batch_images extents; /* the records' own buffers, where they were given so */
  Py_buffer views[6];
} PendingObject;

static void pending_release(PendingObject *self) {
  if (self->released) return;
  self->released = 1;
  job_release(&self->v);
  release_images(&self->extents);
  for (int i = 0; i < 6; i++)
    if (self->views[i].obj) PyBuffer_Release(&self->views[i]);
}

PyObject *pending_new(PoolObject *pool, batch_ctx *ctx, job_views *v, const rc_records *records,
                      batch_images *extents, Py_buffer *const views[6], Py_ssize_t n) {
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

PyTypeObject PendingType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recio._native.Pending",
    .tp_doc = PyDoc_STR("A decode job queued on the pool (Pool.submit_records)."),
    .tp_basicsize = sizeof(PendingObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)Pending_dealloc,
    .tp_methods = Pending_methods,
    .tp_getset = Pending_getset,
};
