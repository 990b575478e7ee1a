/* Python binding of what a decode is asked to do, by name: the Draw and JobOptions objects,
 * and the module functions that draw what the decode threads draw (draw_windows,
 * draw_colours, draw_warp).
 */
#include "bind.h"

#include <stdarg.h>

#include "resample.h"

/* NOTE [named parameters]: what a decode is asked to do reaches C by name, never by position.
 * A Draw is made from keywords that name rc_draw's fields (its colour and geometry from dicts
 * that name rc_colour's and rc_geom's), a JobOptions from keywords that name rc_opts' fields:
 * each is parsed and checked once, when it is made (a pipeline makes them once per iterator),
 * and a batch only copies the parsed struct. A missing or unknown name is a TypeError, so a
 * change on either side cannot remap one parameter onto another. The per-batch arrays (out,
 * status, crops, flips, the records' keys) are the call's own arguments. */

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
  static char *kwlist[] = {
      "affine",       "max_rotate_angle", "rotate",           "max_shear_ratio",
      "min_ratio",    "max_ratio",        "min_random_scale", "max_random_scale",
      "min_img_size", "max_img_size",     "min_crop_size",    "max_crop_size",
      "pad",          "fill_value",       "inter_method",     NULL};
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
  static char *kwlist[] = {"random_h",
                           "random_s",
                           "random_l",
                           "brightness",
                           "contrast",
                           "saturation",
                           "pca_noise",
                           "max_random_contrast",
                           "max_random_illumination",
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
  static char *kwlist[] = {"out_w",       "out_h",    "resize",   "rand_crop",  "rrc",
                           "rand_mirror", "min_area", "max_area", "min_aspect", "max_aspect",
                           "epoch_key",   "mirror",   "colour",   "geometry",   NULL};
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

PyTypeObject DrawType = {
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
const rc_draw *draw_of(PyObject *obj) {
  if (PyObject_TypeCheck(obj, &DrawType)) return &((DrawObject *)obj)->draw;
  PyErr_Format(PyExc_TypeError, "draw must be a recio._native.Draw, not %s", Py_TYPE(obj)->tp_name);
  return NULL;
}

static void JobOptions_dealloc(JobOptionsObject *self) {
  release_param(&self->lut);
  release_param(&self->lut_line);
  release_param(&self->gain);
  release_param(&self->mean_img);
  Py_XDECREF(self->draw);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *JobOptions_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"out_h", "out_w",    "layout",   "itemsize",   "interp",
                           "bgr",   "dct_mode", "roi",      "max_pixels", "lut",
                           "draw",  "gain",     "mean_img", "lut_line",   NULL};
  if (refuse_positional(args, "JobOptions") < 0) return NULL;
  rc_opts o = {0};
  PyObject *lut = Py_None, *draw = Py_None, *gain = Py_None, *mean_img = Py_None;
  PyObject *lut_line = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "iiiiiiiiK|OOOOO:JobOptions", kwlist, &o.out_h,
                                   &o.out_w, &o.layout, &o.itemsize, &o.interp, &o.bgr, &o.dct_mode,
                                   &o.roi, &o.max_pixels, &lut, &draw, &gain, &mean_img, &lut_line))
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
  if (o.itemsize == 4 && get_param(lut_line, &self->lut_line, 3 * 2 * 8, 0, "lut_line") < 0)
    goto fail;
  o.lut = self->lut.buf;
  if (self->lut_line.buf) { /* used only where it gives the table's bits (NOTE [float store]) */
    const double *ab = self->lut_line.buf;
    int exact = 1;
    for (int c = 0; c < 3; c++) exact &= rc_line_exact((const float *)o.lut + 256 * c, ab + 2 * c);
    o.lut_line = exact ? ab : NULL;
  }
  o.gain = self->gain.buf;
  o.mean_img = self->mean_img.buf;
  self->opts = o;
  self->draw = draw == Py_None ? NULL : Py_NewRef(draw);
  return (PyObject *)self;
fail:
  Py_DECREF(self);
  return NULL;
}

PyTypeObject JobOptionsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recio._native.JobOptions",
    .tp_doc = PyDoc_STR(
        "JobOptions(*, out_h, out_w, layout, itemsize, interp, bgr, dct_mode, roi, max_pixels, "
        "lut=None, draw=None, gain=None, mean_img=None, lut_line=None): what every image of a "
        "decode gets, "
        "rc_opts' fields by name, checked once (NOTE [named parameters]). lut: [3][256] values "
        "of itemsize bytes, float outputs only; draw: a Draw (each image's window, flip and "
        "colour drawn for its record); gain (float32 [3]: scale / std) and mean_img (float32 "
        "[3][out_h][out_w], times gain), float32 outputs only: out = lut * contrast + "
        "illumination * gain - contrast * mean_img, with the drawn contrast factor and "
        "illumination; lut_line (float64 [3][2], float32 outputs): each channel's table as "
        "level * a + b, computed so where that gives the table's bits (NOTE [float store] in "
        "native/resample.h), else ignored. recio.decode makes it once per job."),
    .tp_basicsize = sizeof(JobOptionsObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = JobOptions_new,
    .tp_dealloc = (destructor)JobOptions_dealloc,
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
             "geometry (recio.augment.geometry.plan is its reference): m the 2x3 map (6 "
             "floats), the crop (x, y, w, h) the source pixels its taps read.");

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

static PyObject *epoch_key(PyObject *mod, PyObject *args) {
  unsigned long long seed, epoch;
  if (!PyArg_ParseTuple(args, "KK:epoch_key", &seed, &epoch)) return NULL;
  return PyLong_FromUnsignedLongLong(rc_epoch_key(seed, epoch));
}

PyMethodDef rc_draw_functions[] = {
    {"draw_windows", draw_windows, METH_VARARGS, draw_windows_doc},
    {"draw_colours", draw_colours, METH_VARARGS, draw_colours_doc},
    {"draw_warp", draw_warp, METH_VARARGS, draw_warp_doc},
    {"epoch_key", epoch_key, METH_VARARGS,
     "epoch_key(seed, epoch) -> the key of an epoch's keyed draws (both taken mod 2**64)."},
    {"dct_scale_num", dct_scale_num, METH_VARARGS,
     "dct_scale_num(crop_w, crop_h, out_w, out_h, dct_mode) -> the libjpeg scale numerator "
     "(over 8) the decoder uses for that crop and output size."},
    {NULL},
};
