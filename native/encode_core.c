/* recio encode core: libjpeg compression into a growing malloc'd buffer (jpeg_glue.h's
 * destination), never exiting (its error manager); im2rec's plane decode (a decode pass of the
 * worker's, decode_worker.h: libjpeg's raw Y/Cb/Cr planes, each cropped and resampled alone)
 * feeding the raw-data encode.
 */
#include "encode_core.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "decode_worker.h"
#include "jpeg_glue.h"

struct rc_encoder {
  struct jpeg_compress_struct cinfo;
  rc_jpeg_err err;
  rc_jpeg_dest dest;
  uint8_t *rgb; /* transcode scratch: the decoded, resized image */
  size_t rgb_cap;
  int restart; /* rc_encoder_set_restart */
};

static int create_compressor(rc_encoder *e) {
  e->cinfo.err = rc_jpeg_err_init(&e->err, NULL);
  if (setjmp(e->err.jb)) return -1;
  jpeg_create_compress(&e->cinfo);
  rc_jpeg_dest_attach(&e->dest, &e->cinfo);
  return 0;
}

rc_encoder *rc_encoder_new(void) {
  rc_encoder *e = calloc(1, sizeof *e);
  if (e && create_compressor(e)) {
    free(e);
    return NULL;
  }
  return e;
}

void rc_encoder_free(rc_encoder *e) {
  if (!e) return;
  jpeg_destroy_compress(&e->cinfo);
  free(e->rgb);
  free(e);
}

void rc_encoder_set_restart(rc_encoder *e, int restart) {
  e->restart = restart;
}

void rc_encoder_trim(rc_encoder *e) {
  if (e && e->rgb_cap > RC_KEEP_BYTES) {
    free(e->rgb);
    e->rgb = NULL;
    e->rgb_cap = 0;
  }
}

/* Encodes packed RGB rows (rgb, converted by libjpeg) or, when planes is set, YCbCr/grey planes
 * through the raw-data interface (no colour conversion or downsampling). */
static int encode(rc_encoder *e, int w, int h, int quality, const uint8_t *rgb, int gray,
                  const rc_planes *planes, uint8_t **out, size_t *outlen, char *err) {
  struct jpeg_compress_struct *ci = &e->cinfo;
  const int ncomp = planes ? planes->nplanes : 3;
  *out = NULL;
  *outlen = 0;
  if (w <= 0 || h <= 0 || quality < 1 || quality > 100 || (ncomp != 1 && ncomp != 3))
    return snprintf(err, RC_ERRLEN, "bad encode parameters"), RC_BAD_PARAM;
  /* A first guess of the size (about a third of the pixels' bytes at high quality); the
   * destination doubles it when needed. */
  if (rc_jpeg_dest_open(&e->dest, (size_t)w * h * (gray || ncomp == 1 ? 1 : 3) / 3 + 1024))
    return snprintf(err, RC_ERRLEN, "out of memory (JPEG output)"), RC_NOMEM;
  rc_jpeg_err_reset(&e->err);
  if (setjmp(e->err.jb)) {
    jpeg_abort_compress(ci);
    rc_jpeg_dest_drop(&e->dest);
    snprintf(err, RC_ERRLEN, "JPEG encode: %s", e->err.msg);
    return e->err.pub.msg_code == JERR_OUT_OF_MEMORY ? RC_NOMEM : RC_CORRUPT;
  }
  ci->image_width = (JDIMENSION)w;
  ci->image_height = (JDIMENSION)h;
  ci->input_components = ncomp;
  ci->in_color_space = !planes ? JCS_RGB : ncomp == 1 ? JCS_GRAYSCALE : JCS_YCbCr;
  jpeg_set_defaults(ci); /* YCbCr with 4:2:0 chroma (luma 2x2), standard tables, islow DCT */
  if (gray && !planes) jpeg_set_colorspace(ci, JCS_GRAYSCALE);
  jpeg_set_quality(ci, quality, TRUE);
  ci->restart_interval = e->restart > 0 ? (unsigned)e->restart : 0; /* after set_defaults */
  ci->restart_in_rows = e->restart < 0 ? -e->restart : 0;
  ci->raw_data_in = planes != NULL;
  jpeg_start_compress(ci, TRUE);
  if (planes) {
    const int lines = ci->max_v_samp_factor * DCTSIZE; /* one iMCU row: 16 or 8 luma rows */
    while (ci->next_scanline < ci->image_height) {
      JSAMPROW rows[RC_MAX_PLANES][2 * DCTSIZE];
      JSAMPARRAY arrays[RC_MAX_PLANES];
      for (int c = 0; c < ncomp; c++) {
        const int n = ci->comp_info[c].v_samp_factor * DCTSIZE;
        const size_t first = (size_t)ci->next_scanline / (size_t)(lines / n);
        for (int i = 0; i < n; i++) rows[c][i] = planes->data[c] + (first + i) * planes->stride[c];
        arrays[c] = rows[c];
      }
      jpeg_write_raw_data(ci, arrays, (JDIMENSION)lines);
    }
  } else {
    const size_t stride = (size_t)w * 3;
    while (ci->next_scanline < ci->image_height) {
      JSAMPROW rows[16];
      JDIMENSION n = ci->image_height - ci->next_scanline;
      if (n > 16) n = 16;
      for (JDIMENSION i = 0; i < n; i++)
        rows[i] = (JSAMPROW)(rgb + (size_t)(ci->next_scanline + i) * stride);
      jpeg_write_scanlines(ci, rows, n);
    }
  }
  jpeg_finish_compress(ci);
  *out = rc_jpeg_dest_take(&e->dest, outlen);
  return RC_OK;
}

int rc_encode_jpeg(rc_encoder *e, const uint8_t *rgb, int w, int h, int quality, int gray,
                   uint8_t **out, size_t *outlen, char *err) {
  return encode(e, w, h, quality, rgb, gray, NULL, out, outlen, err);
}

int rc_encode_planes(rc_encoder *e, const rc_planes *p, int w, int h, int quality, uint8_t **out,
                     size_t *outlen, char *err) {
  return encode(e, w, h, quality, NULL, 0, p, out, outlen, err);
}

/* ---- YCbCr planes: decode without colour conversion or upsampling, resample each plane ---- */

static int round_up(int v, int m) {
  return (v + m - 1) / m * m;
}

/* Copies the last valid column and row into the padding, as libjpeg pads its own input. */
static void pad_plane(uint8_t *p, size_t stride, int w, int h, int pw, int ph) {
  for (int y = 0; y < h; y++)
    memset(p + (size_t)y * stride + w, p[(size_t)y * stride + w - 1], pw - w);
  for (int y = h; y < ph; y++) memcpy(p + (size_t)y * stride, p + (size_t)(h - 1) * stride, pw);
}

/* The plane way's plan of one image, filled in by planes_pass's steps in order. */
typedef struct {
  int64_t x0, y0, x1, y1; /* the crop in source pixels */
  int ncomp;              /* the JPEG's components */
  int nsrc;               /* the source planes that are resampled */
  int pw, ph;             /* the output's luma size padded to whole MCUs */
  uint64_t out_bytes;     /* the output planes' */
  /* Per source plane: its size, its scale against the image, its rows per iMCU row. (Copied:
   * jpeg_abort_decompress frees comp_info before the planes are resampled.) */
  int sw[RC_MAX_PLANES], sh[RC_MAX_PLANES], imcu_rows[RC_MAX_PLANES];
  double sx[RC_MAX_PLANES], sy[RC_MAX_PLANES];
  size_t sstride[RC_MAX_PLANES];
  int need_imcu; /* the iMCU rows decoded: down to the last one the filters use */
} plane_pass;

/* Output planes: 4:2:0 for colour (OpenCV's default, hence MXNet's), padded to whole MCUs. */
static void layout_output(const rc_opts *o, int gray, rc_planes *out, plane_pass *p) {
  const int nout = gray ? 1 : 3, mcu = gray ? 8 : 16;
  p->pw = round_up(o->out_w, mcu), p->ph = round_up(o->out_h, mcu);
  out->nplanes = nout;
  p->out_bytes = 0;
  for (int c = 0; c < nout; c++) {
    const int sub = c ? 2 : 1;
    out->width[c] = (o->out_w + sub - 1) / sub;
    out->height[c] = (o->out_h + sub - 1) / sub;
    out->stride[c] = (size_t)(p->pw / sub);
    p->out_bytes += (uint64_t)out->stride[c] * (p->ph / sub);
  }
}

/* After jpeg_calc_output_dimensions: each source plane's geometry, and the iMCU rows the
 * filters need. */
static void plan_source(struct jpeg_decompress_struct *ci, const rc_opts *o, const rc_planes *out,
                        plane_pass *p) {
  for (int c = 0; c < p->ncomp; c++) {
    jpeg_component_info *cp = &ci->comp_info[c];
    p->imcu_rows[c] = cp->v_samp_factor * cp->DCT_scaled_size;
    p->sstride[c] = (size_t)cp->width_in_blocks * cp->DCT_scaled_size;
    p->sw[c] = (int)cp->downsampled_width;
    p->sh[c] = (int)cp->downsampled_height;
    p->sx[c] = (double)cp->h_samp_factor * cp->DCT_scaled_size / (ci->max_h_samp_factor * DCTSIZE);
    p->sy[c] = (double)cp->v_samp_factor * cp->DCT_scaled_size / (ci->max_v_samp_factor * DCTSIZE);
  }
  p->need_imcu = 0;
  for (int c = 0; c < p->nsrc; c++) {
    const double oy = c ? 0.5 : 1.0, in0 = p->y0 * p->sy[c];
    const double in1 = in0 + (p->y1 - p->y0) * p->sy[c] * out->height[c] / (o->out_h * oy);
    const int last_row = rc_end_row(in0, in1, out->height[c], p->sh[c], o->interp);
    int n = (last_row + p->imcu_rows[c] - 1) / p->imcu_rows[c];
    if (n > p->need_imcu) p->need_imcu = n;
  }
  if (p->need_imcu > (int)ci->total_iMCU_rows) p->need_imcu = (int)ci->total_iMCU_rows;
}

/* What this image allocates, taken from the budget (NOTE [decode budget]): the source planes
 * hold the iMCU rows down to the last one the filters use, no more. */
static int reserve_planes(rc_worker *w, const rc_opts *o, size_t len, const plane_pass *p,
                          char *err) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  uint64_t src_bytes = 0;
  for (int c = 0; c < p->ncomp; c++)
    src_bytes += (uint64_t)p->sstride[c] * p->need_imcu * p->imcu_rows[c] + RC_SLACK;
  const uint64_t coef = rc_coef_buffer_bytes(ci);
  return rc_reserve_decode(w, o, coef,
                           coef + rc_libjpeg_rows_bytes(ci) + src_bytes + p->out_bytes + len +
                               rc_resample_plane_bytes(p->sw[0], o->out_w, o->out_h),
                           err);
}

/* After jpeg_start_decompress: the planes' buffers, then the iMCU rows decoded into them. */
static int read_planes(rc_worker *w, rc_planes *out, const plane_pass *p, char *err) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  for (int c = 0; c < out->nplanes; c++) {
    if (rc_grow((void **)&w->out_plane[c], &w->out_cap[c], out->stride[c] * (p->ph / (c ? 2 : 1))))
      return rc_fail(ci, err, RC_NOMEM, "out of memory (planes)");
    out->data[c] = w->out_plane[c];
  }
  for (int c = 0; c < p->ncomp; c++) {
    const size_t rows = (size_t)p->need_imcu * p->imcu_rows[c];
    if (rc_grow((void **)&w->src_plane[c], &w->src_cap[c], p->sstride[c] * rows + RC_SLACK))
      return rc_fail(ci, err, RC_NOMEM, "out of memory (source planes)");
  }
  const JDIMENSION step = (JDIMENSION)(ci->max_v_samp_factor * ci->min_DCT_scaled_size);
  for (int r = 0; r < p->need_imcu; r++) {
    JSAMPROW rows[RC_MAX_PLANES][4 * DCTSIZE];
    JSAMPARRAY planes[RC_MAX_PLANES];
    for (int c = 0; c < p->ncomp; c++) {
      for (int i = 0; i < p->imcu_rows[c]; i++)
        rows[c][i] = w->src_plane[c] + ((size_t)r * p->imcu_rows[c] + i) * p->sstride[c];
      planes[c] = rows[c];
    }
    if (jpeg_read_raw_data(ci, planes, step) < 1)
      return rc_fail(ci, err, RC_CORRUPT, "JPEG: no rows");
  }
  jpeg_abort_decompress(ci);
  return RC_OK;
}

/* Each source plane resampled to its output plane (the vertical pass over the columns in use,
 * then the horizontal pass), neutral chroma for colour from grey, the padding filled. */
static int resample_planes(rc_worker *w, const rc_opts *o, rc_planes *out, const plane_pass *p,
                           char *err) {
  for (int c = 0; c < p->nsrc; c++) {
    const double of = c ? 0.5 : 1.0;
    const int ow = out->width[c], oh = out->height[c];
    const double ix0 = p->x0 * p->sx[c];
    const double ix1 = ix0 + (p->x1 - p->x0) * p->sx[c] * ow / (o->out_w * of);
    const double iy0 = p->y0 * p->sy[c];
    const double iy1 = iy0 + (p->y1 - p->y0) * p->sy[c] * oh / (o->out_h * of);
    if (rc_precompute(&w->ch, p->sw[c], ix0, ix1, ow, o->interp) ||
        rc_precompute(&w->cv, p->sh[c], iy0, iy1, oh, o->interp))
      return snprintf(err, RC_ERRLEN, "out of memory (coefficients)"), RC_NOMEM;
    const rc_buf mid = {&w->tmp, &w->tmp_cap}, midt = {&w->line, &w->line_cap};
    const rc_buf outt = {&w->hline, &w->hline_cap};
    if (rc_resample_plane(w->src_plane[c], p->sstride[c], &w->ch, &w->cv, out->data[c],
                          out->stride[c], ow, oh, mid, midt, outt))
      return snprintf(err, RC_ERRLEN, "out of memory (resample buffers)"), RC_NOMEM;
  }
  for (int c = p->nsrc; c < out->nplanes; c++) /* colour from a greyscale JPEG: neutral chroma */
    memset(out->data[c], 128, out->stride[c] * (p->ph / 2));
  for (int c = 0; c < p->nsrc; c++) {
    const int sub = c ? 2 : 1;
    pad_plane(out->data[c], out->stride[c], out->width[c], out->height[c], p->pw / sub,
              p->ph / sub);
  }
  return RC_OK;
}

/* One decode pass of the plane way: the steps above, in order, after the header. */
static int planes_pass(rc_worker *w, const uint8_t *data, size_t len, const int32_t *crop,
                       const rc_opts *o, int gray, rc_planes *out, char *err) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  const int bad = rc_check_input(data, len, o, err);
  if (bad) return bad;
  const int fresh = rc_fresh_decompressor(w, err); /* NOTE [fresh tables] */
  if (fresh) return fresh;
  rc_jpeg_err_reset(&w->err);
  w->entropy_on = 0;
  if (setjmp(w->err.jb)) return rc_pass_failed(w, err);
  jpeg_mem_src(ci, data, (unsigned long)len);
  jpeg_read_header(ci, TRUE);
  plane_pass p;
  int st = rc_crop_window(ci, crop, o, &p.x0, &p.y0, &p.x1, &p.y1, err);
  if (st) return st;
  p.ncomp = ci->num_components;
  const int ycc = ci->jpeg_color_space == JCS_YCbCr && p.ncomp == 3;
  if (!ycc && !(ci->jpeg_color_space == JCS_GRAYSCALE && p.ncomp == 1))
    return rc_fail(ci, err, RC_UNSUPPORTED, "not a YCbCr or greyscale JPEG");
  ci->scale_num = (unsigned)rc_dct_scale_num((int)(p.x1 - p.x0), (int)(p.y1 - p.y0), o->out_w,
                                             o->out_h, o->dct_mode);
  ci->scale_denom = 8;
  ci->raw_data_out = TRUE;
  jpeg_calc_output_dimensions(ci); /* what jpeg_start_decompress will compute */
  layout_output(o, gray, out, &p);
  p.nsrc = ycc && !gray ? 3 : 1;
  plan_source(ci, o, out, &p);
  if ((st = reserve_planes(w, o, len, &p, err))) return st;
  rc_start_decompress(w);
  if ((st = read_planes(w, out, &p, err))) return st;
  if ((st = rc_warned(&w->err, err))) return st; /* an error here (im2rec): not worth resampling */
  return resample_planes(w, o, out, &p, err);
}

int rc_decode_planes(rc_worker *w, const uint8_t *data, size_t len, const int32_t *crop,
                     const rc_opts *o, int gray, rc_planes *out, char *err) {
  w->own_entropy = !w->stock_entropy;
  const int status = planes_pass(w, data, len, crop, o, gray, out, err);
  if (status != RC_DECODE_AGAIN) return status;
  rc_count_second_decode();
  w->own_entropy = 0;
  return planes_pass(w, data, len, crop, o, gray, out, err);
}

/* e->rgb holds at least `need` bytes; RC_NOMEM otherwise. */
static int grow_rgb(rc_encoder *e, size_t need, char *err) {
  if (need <= e->rgb_cap) return RC_OK;
  uint8_t *p = realloc(e->rgb, need);
  if (!p) return snprintf(err, RC_ERRLEN, "out of memory (%zu bytes)", need), RC_NOMEM;
  e->rgb = p;
  e->rgb_cap = need;
  return RC_OK;
}

int rc_resize_encode(rc_worker *w, rc_encoder *e, const uint8_t *rgb, int width, int height,
                     size_t stride, const int32_t *crop, const rc_opts *o, int quality,
                     uint8_t **out, size_t *outlen, char *err) {
  *out = NULL;
  *outlen = 0;
  if (o->out_w < 1 || o->out_h < 1 || (int64_t)o->out_w * o->out_h > (1 << 28))
    return snprintf(err, RC_ERRLEN, "%dx%d is not a valid output size", o->out_w, o->out_h),
           RC_BAD_PARAM;
  int st = grow_rgb(e, (size_t)o->out_w * o->out_h * 3, err);
  if (st == RC_OK) st = rc_resize_rgb(w, rgb, width, height, stride, crop, o, e->rgb, err);
  if (st != RC_OK) return st;
  return rc_encode_jpeg(e, e->rgb, o->out_w, o->out_h, quality, 0, out, outlen, err);
}

int rc_transcode(rc_worker *w, rc_encoder *e, const uint8_t *data, size_t len, const int32_t *crop,
                 const rc_opts *o, int quality, int gray, uint8_t **out, size_t *outlen,
                 char *err) {
  *out = NULL;
  *outlen = 0;
  if (o->layout != RC_LAYOUT_NHWC || o->itemsize != 1 || o->bgr || o->out_w <= 0 || o->out_h <= 0)
    return snprintf(err, RC_ERRLEN, "transcode needs uint8 NHWC RGB options"), RC_BAD_PARAM;
  /* YCbCr and grey JPEGs stay in planes: no colour conversion either way, and the chroma
   * planes (a quarter of the luma's samples each) are resampled at their own size. */
  rc_planes planes;
  int st = rc_decode_planes(w, data, len, crop, o, gray, &planes, err);
  if (st == RC_OK)
    return rc_encode_planes(e, &planes, o->out_w, o->out_h, quality, out, outlen, err);
  if (st != RC_UNSUPPORTED || len < 3 || data[0] != 0xFF || data[1] != 0xD8) return st;
  st = grow_rgb(e, (size_t)o->out_w * o->out_h * 3, err);
  if (st != RC_OK) return st;
  st = rc_decode(w, data, len, crop, 0, o, e->rgb, err);
  if (st != RC_OK) return st;
  return rc_encode_jpeg(e, e->rgb, o->out_w, o->out_h, quality, gray, out, outlen, err);
}
