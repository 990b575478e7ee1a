/* Python binding of the restart cut (restart.h, NOTE [restart cut]): a crop's segments of a
 * restart-marked JPEG as a JPEG of their own, for decoders outside recio (recio.gpu).
 */
#include "bind.h"

#include <setjmp.h>
#include <stdlib.h>

#include "restart.h"

typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
} cut_error;

static void cut_error_exit(j_common_ptr ci) {
  longjmp(((cut_error *)ci->err)->jb, 1);
}

static void cut_quiet(j_common_ptr ci, int level) {
  (void)ci, (void)level; /* warnings are the whole decode's to report, not the cut's */
}

/* The cut, its origin and the header's facts, with the GIL released; 0 where the header
 * cannot be read. */
typedef struct {
  int width, height, components, colorspace, ox, oy;
  uint8_t *buf;
  size_t cap, len;
} cut_result;

static int cut_jpeg(const uint8_t *data, size_t len, int x0, int y0, int x1, int y1,
                    cut_result *r) {
  struct jpeg_decompress_struct ci;
  cut_error err;
  ci.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = cut_error_exit;
  err.pub.emit_message = cut_quiet;
  jpeg_create_decompress(&ci);
  if (setjmp(err.jb)) {
    jpeg_destroy_decompress(&ci);
    return 0;
  }
  jpeg_mem_src(&ci, data, (unsigned long)len);
  jpeg_read_header(&ci, TRUE);
  r->width = (int)ci.image_width, r->height = (int)ci.image_height;
  r->components = ci.num_components, r->colorspace = (int)ci.jpeg_color_space;
  ci.scale_num = 8, ci.scale_denom = 8; /* full size: the window is in source pixels */
  jpeg_calc_output_dimensions(&ci);
  rc_cut cut;
  if (ci.restart_interval && rc_restart_plan(&ci, x0, x1, y0, y1, &cut)) {
    r->len = rc_restart_cut(&ci, data, len, &cut, &r->buf, &r->cap);
    r->ox = cut.c0 * ci.max_h_samp_factor * DCTSIZE;
    r->oy = cut.r0 * ci.max_v_samp_factor * DCTSIZE;
  }
  jpeg_destroy_decompress(&ci);
  return 1;
}

PyDoc_STRVAR(restart_cut_doc,
             "restart_cut(data, x0, y0, x1, y1) -> (cut, ox, oy, width, height, components, "
             "colorspace) | None\n\n"
             "The segments of a restart-marked JPEG that cover source pixels x0..x1, y0..y1 "
             "(ends excluded) as a JPEG of their own (NOTE [restart cut]): cut is its bytes, "
             "whose pixel (0, 0) is the image's (ox, oy); its whole decode holds the window "
             "exactly as the image's whole decode does. cut is None where no cut applies "
             "(no markers, progressive, nothing left out): the image is decoded whole. width, "
             "height, components and colorspace (libjpeg's J_COLOR_SPACE) are the header's. "
             "None where libjpeg cannot read the header. The GIL is released while it runs.");

static PyObject *restart_cut_fn(PyObject *mod, PyObject *args) {
  Py_buffer data;
  int x0, y0, x1, y1;
  if (!PyArg_ParseTuple(args, "y*iiii:restart_cut", &data, &x0, &y0, &x1, &y1)) return NULL;
  cut_result r = {0};
  int ok;
  Py_BEGIN_ALLOW_THREADS
  ok = cut_jpeg(data.buf, (size_t)data.len, x0, y0, x1, y1, &r);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&data);
  PyObject *result;
  if (!ok) {
    result = Py_NewRef(Py_None);
  } else {
    PyObject *cut = r.len ? PyBytes_FromStringAndSize((const char *)r.buf, (Py_ssize_t)r.len)
                          : Py_NewRef(Py_None);
    result = cut ? Py_BuildValue("(Niiiiii)", cut, r.ox, r.oy, r.width, r.height, r.components,
                                 r.colorspace)
                 : NULL;
  }
  free(r.buf);
  return result;
}

PyMethodDef rc_restart_functions[] = {
    {"restart_cut", restart_cut_fn, METH_VARARGS, restart_cut_doc},
    {NULL, NULL, 0, NULL},
};
