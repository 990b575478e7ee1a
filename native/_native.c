/* recio._native: the module (its types, functions and constants) and the helpers the binding
 * files share (bind.h): a batch's buffers read into views held while the GIL is released, the
 * batch run on the pool, its per-image result.
 */
#include "bind.h"

#include <jconfig.h>

#include "colour.h"
#include "crc32c.h"
#include "resample.h"

void release_images(batch_images *im) {
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
int get_listed(PyObject *buffers, batch_images *im) {
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
      im->refs[i] = (rc_span){v->buf, (size_t)v->len};
    }
  }
  Py_DECREF(seq); /* each view holds a reference to its object */
  return rc;
}

/* A read view of a 1-D C-contiguous int64 buffer (a numpy int64 array). */
int get_int64s(PyObject *obj, Py_buffer *view, const char *name) {
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
    im->refs[i] = (rc_span){buf + st[i], (size_t)len[i]};
  }
  rc = 0;
done:
  PyBuffer_Release(&starts);
  PyBuffer_Release(&lengths);
  return rc;
}

/* A batch's images from buffers (a sequence of bytes-like objects), or, with starts and
 * lengths (not None), from spans of the one buffer `buffers`. */
int get_images(PyObject *buffers, PyObject *starts, PyObject *lengths, batch_images *im) {
  if (starts == Py_None && lengths == Py_None) return get_listed(buffers, im);
  if (starts == Py_None || lengths == Py_None) {
    PyErr_SetString(PyExc_ValueError, "spans need both starts and lengths");
    return -1;
  }
  return get_spans(buffers, starts, lengths, im);
}

/* Gets an optional buffer of at least `need` bytes; None gives buf = NULL. */
int get_param(PyObject *obj, Py_buffer *view, Py_ssize_t need, int writable, const char *name) {
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

void release_param(Py_buffer *view) {
  if (view->obj) PyBuffer_Release(view);
}

/* Runs a batch on the pool with the GIL released, the pool marked busy throughout (see NOTE
 * [close vs batch]); -1 with an exception if the pool is closed. */
int run_released(PoolObject *self, rc_task_fn fn, void *ctx, Py_ssize_t n) {
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
PyObject *per_image(const int32_t *status, const char *errors, Py_ssize_t n,
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

PyObject *no_result(void *ctx, Py_ssize_t i) {
  (void)ctx, (void)i;
  return Py_NewRef(Py_None);
}

int all_ok(const int32_t *status, Py_ssize_t n) {
  for (Py_ssize_t i = 0; i < n; i++)
    if (status[i] != RC_OK) return 0;
  return 1;
}

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "recio._native",
    .m_doc = "recio's native JPEG decode pool.",
    .m_size = -1,
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
      PyModule_AddFunctions(m, rc_draw_functions) < 0 ||
      PyModule_AddFunctions(m, rc_crc_functions) < 0 ||
      PyModule_AddFunctions(m, rc_decode_functions) < 0 ||
      PyModule_AddFunctions(m, rc_guard_functions) < 0 ||
      PyModule_AddFunctions(m, rc_restart_functions) < 0 ||
      PyModule_AddFunctions(m, rc_unstuff_functions) < 0 ||
      PyModule_AddFunctions(m, rc_resample_functions) < 0 ||
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
