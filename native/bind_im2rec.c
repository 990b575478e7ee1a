/* Python binding of the pool's encoder methods, what recio.im2rec.encoder uses: JPEG -> JPEG
 * (transcode_batch), RGB -> JPEG (resize_encode) and whole im2rec records (im2rec_batch), on
 * the pool's threads and budget.
 */
#include "bind.h"

#include "im2rec_core.h"

/* The memory an output image of px pixels costs the transcode beside the decode: the RGB
 * scratch image (CMYK sources) and the JPEG encoder's growing output buffer. */
static uint64_t output_bytes(int64_t px) {
  return (uint64_t)px * 7;
}

typedef struct {
  const rc_span *images;
  const int32_t *crops; /* [n][4] or NULL */
  const int32_t *sizes; /* [n][2]: output width, height */
  int32_t *status;
  char *errors;   /* [n][RC_ERRLEN] */
  uint8_t **outs; /* [n]: malloc'd JPEGs, freed by the caller */
  size_t *lens;
  int quality, gray, restart;
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
  rc_encoder_set_restart(s->enc, c->restart);
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
  int quality, restart, status;
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
  rc_encoder_set_restart(s->enc, c->restart);
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

RC_DOC(transcode_batch_doc,
       "transcode_batch(buffers, status, crops, sizes, quality, gray, interp, dct_mode, "
       "max_pixels, restart=0) -> list[bytes | str]\n\n"
       "Decodes every JPEG in buffers, crops it (crops: int32 [n][4] or None), resizes it "
       "to sizes[i] (int32 [n][2], width and height) and encodes it again as a JPEG at "
       "quality (4:2:0, or one grey channel when gray). Writes status[i] (int32) and "
       "returns per image the new JPEG's bytes, or the error text where status is not 0 "
       "(an output size that is not positive or over 2**28 pixels is such an error). "
       "restart: restart markers as lossless_batch takes them (0: none). "
       "Use recio.im2rec, which checks the arguments.");

static PyObject *transcoded_jpeg(void *vctx, Py_ssize_t i) {
  transcode_ctx *c = vctx;
  return PyBytes_FromStringAndSize((const char *)c->outs[i], (Py_ssize_t)c->lens[i]);
}

PyObject *Pool_transcode_batch(PoolObject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"buffers", "status",   "crops",      "sizes",   "quality", "gray",
                           "interp",  "dct_mode", "max_pixels", "restart", NULL};
  PyObject *buffers, *status_obj, *crops_obj, *sizes_obj;
  int quality, gray, interp, dct_mode, restart = 0;
  unsigned long long max_pixels;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOiiiiK|i:transcode_batch", kwlist, &buffers,
                                   &status_obj, &crops_obj, &sizes_obj, &quality, &gray, &interp,
                                   &dct_mode, &max_pixels, &restart))
    return NULL;
  if (check_open(self) < 0) return NULL;
  if (quality < 1 || quality > 100 || interp < 0 || interp > RC_INTERP_NEAREST || dct_mode < 0 ||
      dct_mode > RC_DCT_ALL || restart < -65535 || restart > 65535) {
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
      .restart = restart,
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

RC_DOC(resize_encode_doc,
       "resize_encode(pixels, width, height, crop, out_w, out_h, quality, interp, "
       "restart=0) -> bytes"
       "\n\n"
       "Packed RGB pixels (height rows of width * 3 bytes, C-contiguous) decoded elsewhere: "
       "crops to crop (x, y, w, h, inside the image), resizes to out_w x out_h as "
       "Pillow's resize(box=) does and encodes a 4:2:0 JPEG at quality (restart markers as "
       "lossless_batch takes them), with the GIL "
       "released. Raises ValueError with the reason on failure.");

PyObject *Pool_resize_encode(PoolObject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"pixels", "width",   "height", "crop",    "out_w",
                           "out_h",  "quality", "interp", "restart", NULL};
  PyObject *pixels;
  resize_encode_ctx ctx = {0};
  int interp;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "Oii(iiii)iiii|i:resize_encode", kwlist, &pixels,
                                   &ctx.width, &ctx.height, &ctx.crop[0], &ctx.crop[1],
                                   &ctx.crop[2], &ctx.crop[3], &ctx.opts.out_w, &ctx.opts.out_h,
                                   &ctx.quality, &interp, &ctx.restart))
    return NULL;
  if (check_open(self) < 0) return NULL;
  if (ctx.width < 1 || ctx.height < 1 || ctx.quality < 1 || ctx.quality > 100 || interp < 0 ||
      interp > RC_INTERP_NEAREST || ctx.restart < -65535 || ctx.restart > 65535) {
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

RC_DOC(im2rec_batch_doc,
       "im2rec_batch(paths, prefixes, status, lengths, crcs, resize, center_crop, color, quality, "
       "max_output_bytes, dct_mode, max_pixels, restart=0) -> bytes\n\n"
       "im2rec's work on list entries whose files are plain JPEGs: reads file paths[i] (bytes), "
       "transcodes it as recio.im2rec's EncodeOptions say, puts prefixes[i] (bytes: the IRHeader "
       "and labels) before it and frames the record as encode_record does. Writes status[i] "
       "(int32: 0, or STATUS_UNSUPPORTED where the entry is left to the Python path, whatever "
       "the reason), lengths[i] (int64: its frames' bytes, padding included, 0 if not made) and "
       "crcs[i] (uint32: the record's checksum, as the checksum sidecar keeps it); returns the "
       "frames of the records made, one after another in entry order. With the GIL released.");

PyObject *Pool_im2rec_batch(PoolObject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"paths",    "prefixes",    "status",  "lengths", "crcs",
                           "resize",   "center_crop", "color",   "quality", "max_output_bytes",
                           "dct_mode", "max_pixels",  "restart", NULL};
  PyObject *paths_obj, *prefixes_obj, *status_obj, *lengths_obj, *crcs_obj;
  im2rec_ctx ctx = {0};
  unsigned long long max_out, max_pixels;
  int dct_mode;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOiiiiKiK|i:im2rec_batch", kwlist, &paths_obj,
                                   &prefixes_obj, &status_obj, &lengths_obj, &crcs_obj,
                                   &ctx.o.resize, &ctx.o.center_crop, &ctx.o.color, &ctx.o.quality,
                                   &max_out, &dct_mode, &max_pixels, &ctx.o.restart))
    return NULL;
  if (check_open(self) < 0) return NULL;
  if (ctx.o.quality < 1 || ctx.o.quality > 100 || ctx.o.color < -1 || ctx.o.color > 1 ||
      ctx.o.resize < 0 || dct_mode < 0 || dct_mode > RC_DCT_ALL || ctx.o.restart < -65535 ||
      ctx.o.restart > 65535) {
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
  if (!ctx.paths) { /* embedded NUL: every entry to Python, which raises */
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

typedef struct {
  const rc_span *images;
  int32_t *status;
  char *errors;   /* [n][RC_ERRLEN] */
  uint8_t **outs; /* [n]: malloc'd JPEGs, freed by the caller */
  size_t *lens;
  int restart;
  rc_opts opts;
} lossless_ctx;

static void lossless_task(void *vctx, void *vstate, size_t i) {
  lossless_ctx *c = vctx;
  thread_state *s = vstate;
  char *err = c->errors + i * RC_ERRLEN;
  if (!s->ll && !(s->ll = rc_lossless_new())) {
    c->status[i] = RC_NOMEM;
    snprintf(err, RC_ERRLEN, "out of memory (JPEG transcoder)");
    return;
  }
  c->status[i] = rc_lossless_transcode(s->ll, s->dec, &c->opts, c->images[i].buf, c->images[i].len,
                                       c->restart, &c->outs[i], &c->lens[i], err);
  rc_worker_release(s->dec);
}

RC_DOC(lossless_batch_doc,
       "lossless_batch(buffers, status, restart, max_pixels) -> list[bytes | str]\n\n"
       "Transcodes every JPEG in buffers losslessly (its DCT coefficients as they are) to a "
       "sequential JPEG with optimised Huffman tables and a restart marker every restart "
       "MCUs (restart > 0) or every -restart MCU rows (restart < 0; 0: none), keeping its "
       "APPn and COM segments: it decodes to the same pixels. Writes status[i] (int32) and "
       "returns per image the new JPEG's bytes, or the error text where status is not 0 "
       "(STATUS_UNSUPPORTED: not a JPEG; STATUS_CORRUPT or STATUS_TRUNCATED: a JPEG libjpeg "
       "warns about). Use recio.im2rec's JpegEncoder.optimize_jpeg.");

static PyObject *lossless_jpeg(void *vctx, Py_ssize_t i) {
  lossless_ctx *c = vctx;
  return PyBytes_FromStringAndSize((const char *)c->outs[i], (Py_ssize_t)c->lens[i]);
}

PyObject *Pool_lossless_batch(PoolObject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"buffers", "status", "restart", "max_pixels", NULL};
  PyObject *buffers, *status_obj;
  int restart;
  unsigned long long max_pixels;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOiK:lossless_batch", kwlist, &buffers, &status_obj,
                                   &restart, &max_pixels))
    return NULL;
  if (check_open(self) < 0) return NULL;
  if (restart > 65535 || restart < -65535) {
    PyErr_SetString(PyExc_ValueError, "restart must be in -65535..65535");
    return NULL;
  }
  batch_images im;
  if (get_listed(buffers, &im) < 0) return NULL;
  const Py_ssize_t n = im.n;
  PyObject *result = NULL;
  const size_t m = n ? (size_t)n : 1;
  char *errors = PyMem_Calloc(m, RC_ERRLEN);
  uint8_t **outs = PyMem_Calloc(m, sizeof *outs);
  size_t *lens = PyMem_Calloc(m, sizeof *lens);
  Py_buffer status = {0};
  if (!errors || !outs || !lens) {
    PyErr_NoMemory();
    goto done;
  }
  if (get_param(status_obj, &status, n * 4, 1, "status") < 0) goto done;
  if (!status.buf) {
    PyErr_SetString(PyExc_ValueError, "status is required");
    goto done;
  }
  lossless_ctx ctx = {
      .images = im.refs,
      .status = status.buf,
      .errors = errors,
      .outs = outs,
      .lens = lens,
      .restart = restart,
      .opts = {.max_pixels = max_pixels, .budget = &self->budget},
  };
  if (run_released(self, lossless_task, &ctx, n) < 0) goto done;
  result = per_image(status.buf, errors, n, lossless_jpeg, &ctx);
done:
  if (outs)
    for (Py_ssize_t i = 0; i < n; i++) free(outs[i]);
  PyMem_Free(outs);
  PyMem_Free(lens);
  PyMem_Free(errors);
  release_param(&status);
  release_images(&im);
  return result;
}
