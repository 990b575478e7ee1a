/* Python binding of CRC32C: of a buffer, and of records' frames in place (the checksum
 * sidecar's), with the GIL released.
 */
#include "bind.h"

#include "crc32c.h"
#include "records_core.h" /* rc_frames_end: where a record's frames end */

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

PyMethodDef rc_crc_functions[] = {
    {"crc32c", crc32c_fn, METH_VARARGS, crc32c_doc},
    {"record_crcs", record_crcs, METH_VARARGS, record_crcs_doc},
    {"extent_crcs", extent_crcs, METH_VARARGS, extent_crcs_doc},
    {NULL},
};
