/* Python binding of rc_resample_window (decode_core.h): decoded pixels resampled and stored
 * as a crop decode stores them, for measuring the resampler alone (tools/bench_resample.py)
 * and testing it against a reference.
 */
#include "bind.h"

PyDoc_STRVAR(resample_windows_doc,
             "resample_windows(images, sizes, windows, flips, out, options) -> None\n\n"
             "Resamples image i (a bytes-like object: sizes[i] = (width, height), int32, packed "
             "RGB rows of width * 3 bytes) over windows[i] = (x0, y0, x1, y1) (float64, "
             "fractional, inside the image) into out[i] as a crop decode with options (a "
             "JobOptions) stores it, mirrored where flips[i] (uint8) is non-zero. One thread "
             "(the caller's, the GIL released), one worker for the batch. A bad size or window "
             "is a ValueError naming the image.");

static PyObject *resample_windows(PyObject *module, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"images", "sizes", "windows", "flips", "out", "options", NULL};
  PyObject *images, *sizes, *windows, *flips, *out, *options;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOO:resample_windows", kwlist, &images, &sizes,
                                   &windows, &flips, &out, &options))
    return NULL;
  if (!PyObject_TypeCheck(options, &JobOptionsType)) {
    PyErr_Format(PyExc_TypeError, "options must be a recio._native.JobOptions, not %s",
                 Py_TYPE(options)->tp_name);
    return NULL;
  }
  const rc_opts *o = &((const JobOptionsObject *)options)->opts;
  batch_images im;
  if (get_listed(images, &im) < 0) return NULL;
  const Py_ssize_t n = im.n;
  const size_t stride = (size_t)o->out_h * o->out_w * 3 * o->itemsize;
  Py_buffer vs = {0}, vw = {0}, vf = {0}, vo = {0};
  PyObject *result = NULL;
  rc_worker *w = NULL;
  if (get_param(sizes, &vs, n * 8, 0, "sizes") < 0 ||
      get_param(windows, &vw, n * 32, 0, "windows") < 0 ||
      get_param(flips, &vf, n, 0, "flips") < 0 ||
      get_param(out, &vo, (Py_ssize_t)stride * n, 1, "out") < 0)
    goto done;
  if (!vs.buf || !vw.buf || !vf.buf || !vo.buf) {
    PyErr_SetString(PyExc_ValueError, "sizes, windows, flips and out are required");
    goto done;
  }
  const int32_t *wh = vs.buf;
  for (Py_ssize_t i = 0; i < n; i++)
    if (wh[2 * i] < 1 || wh[2 * i + 1] < 1 ||
        im.refs[i].len / 3 / (size_t)wh[2 * i] < (size_t)wh[2 * i + 1]) {
      PyErr_Format(PyExc_ValueError, "image %zd: %zu bytes do not hold %dx%d RGB pixels", i,
                   im.refs[i].len, wh[2 * i], wh[2 * i + 1]);
      goto done;
    }
  if (!(w = rc_worker_new())) {
    PyErr_NoMemory();
    goto done;
  }
  int status = RC_OK;
  Py_ssize_t i = 0;
  char err[RC_ERRLEN];
  Py_BEGIN_ALLOW_THREADS
  for (; i < n && status == RC_OK; i++)
    status = rc_resample_window(w, im.refs[i].buf, wh[2 * i], wh[2 * i + 1], (size_t)wh[2 * i] * 3,
                                (const double *)vw.buf + 4 * i, ((const uint8_t *)vf.buf)[i], o,
                                (uint8_t *)vo.buf + stride * i, err);
  Py_END_ALLOW_THREADS
  if (status == RC_NOMEM)
    PyErr_NoMemory();
  else if (status != RC_OK)
    PyErr_Format(PyExc_ValueError, "image %zd: %s", i - 1, err);
  else
    result = Py_NewRef(Py_None);
done:
  rc_worker_free(w);
  release_param(&vs);
  release_param(&vw);
  release_param(&vf);
  release_param(&vo);
  release_images(&im);
  return result;
}

PyMethodDef rc_resample_functions[] = {
    {"resample_windows", (PyCFunction)(void (*)(void))resample_windows,
     METH_VARARGS | METH_KEYWORDS, resample_windows_doc},
    {NULL, NULL, 0, NULL},
};
