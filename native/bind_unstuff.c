/* Python binding of the unstuffed copy (unstuff.h), a piece at a time as a decode makes it:
 * for tests of where the pieces end (tests/decode/test_unstuff.py).
 */
#include "bind.h"

#include <stdint.h>
#include <stdlib.h>

#include "unstuff.h"

PyDoc_STRVAR(unstuff_doc,
             "unstuff(scan, nseg, wants, window=None) -> (steps, copy, segments, eoi)\n\n"
             "The entropy-coded data scan (from just after a JPEG's SOS) of nseg segments "
             "copied without its 0xFF00 stuffing as a decode copies it (native/unstuff.h): "
             "asked for wants[0] bytes, then wants[1], ..., then the rest. steps: (bytes "
             "copied, segments found, state) after each want, state 0 more to copy, 1 done, 2 "
             "framed otherwise. copy: the bytes copied in the end; segments: where the "
             "segments found start in it (and, all found, where the data ends); eoi: the "
             "EOI's offset in scan, or -1 where the scan is not framed as the decoder reads it. "
             "window: (cols, rows, interval, c0, c1, r0, r1), the segments of a restart cut's "
             "window alone (rc_unstuff_window; nseg is then the window's own count, and eoi -1: "
             "the copy ends with the window's last segment).");

static PyObject *unstuff_fn(PyObject *mod, PyObject *args) {
  Py_buffer scan;
  Py_ssize_t nseg;
  PyObject *wants, *window = Py_None;
  if (!PyArg_ParseTuple(args, "y*nO|O:unstuff", &scan, &nseg, &wants, &window)) return NULL;
  rc_unstuff_window win;
  if (window != Py_None && !PyArg_ParseTuple(window, "nnnnnnn", &win.cols, &win.rows, &win.interval,
                                             &win.c0, &win.c1, &win.r0, &win.r1)) {
    PyBuffer_Release(&scan);
    return NULL;
  }
  PyObject *seq = nseg >= 1 ? PySequence_Fast(wants, "wants must be a sequence") : NULL;
  if (!seq) {
    if (nseg < 1) PyErr_SetString(PyExc_ValueError, "nseg must be 1 or more");
    PyBuffer_Release(&scan);
    return NULL;
  }
  rc_unstuff u = {0};
  PyObject *steps = NULL, *result = NULL;
  size_t count = (size_t)nseg;
  if (window != Py_None ? rc_unstuff_begin_window(&u, scan.buf, (size_t)scan.len, &win, &count)
                        : rc_unstuff_begin(&u, scan.buf, (size_t)scan.len, count)) {
    PyErr_SetString(PyExc_ValueError, "no memory, or not a window");
    goto done;
  }
  if (window != Py_None && count != (size_t)nseg) {
    PyErr_Format(PyExc_ValueError, "the window has %zu segments", count);
    goto done;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (!(steps = PyList_New(n))) goto done;
  for (Py_ssize_t i = 0; i < n; i++) {
    const Py_ssize_t want = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i), NULL);
    if (want < 0) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "wants must not be negative");
      goto done;
    }
    const int state = rc_unstuff_to(&u, (size_t)want);
    PyObject *step = Py_BuildValue("(nni)", (Py_ssize_t)u.len, (Py_ssize_t)u.found, state);
    if (!step) goto done;
    PyList_SET_ITEM(steps, i, step);
  }
  const int state = rc_unstuff_to(&u, SIZE_MAX);
  PyObject *segments = PyList_New(0);
  for (size_t s = 0; segments && s <= u.found && s <= u.nseg; s++) {
    PyObject *v = PyLong_FromSize_t(u.seg[s]);
    if (!v || PyList_Append(segments, v) < 0) Py_CLEAR(segments);
    Py_XDECREF(v);
  }
  if (segments)
    result =
        Py_BuildValue("(Oy#Nn)", steps, (const char *)u.data, (Py_ssize_t)u.len, segments,
                      state == RC_UNSTUFF_DONE && !u.windowed ? (Py_ssize_t)u.eoi : (Py_ssize_t)-1);
done:
  Py_XDECREF(steps);
  Py_DECREF(seq);
  rc_unstuff_free(&u);
  PyBuffer_Release(&scan);
  return result;
}

PyMethodDef rc_unstuff_functions[] = {
    {"unstuff", unstuff_fn, METH_VARARGS, unstuff_doc},
    {NULL, NULL, 0, NULL},
};
