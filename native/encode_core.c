/* recio encode core: libjpeg compression into a growing malloc'd buffer (jpeg_glue.h's
 * destination), never exiting (its error manager).
 */
#include "encode_core.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

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
