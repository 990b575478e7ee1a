/* recio decode core: libjpeg-turbo decode, crop, Pillow-compatible resample, flip, cast.
 *
 * rc_decode (RGB out): read the header, pick a DCT-domain scale (num/8) that keeps the crop at
 * least as large as the output, decode only the rows (jpeg_skip_scanlines) and iMCU columns
 * (jpeg_crop_scanline) the crop needs, straight into the resample buffer; then per output row
 * the vertical pass, the horizontal pass (flip folded in) and the store (order, layout, dtype).
 * A pass at scale 1 is skipped: no copy vertically, and horizontally the store reads the row
 * (mirrored if flipped) itself, so a whole image at its own size is decode + store alone.
 * (im2rec's plane decode, libjpeg's raw Y/Cb/Cr planes, is encode_core.c's.)
 *
 * The resampler (resample.c) reproduces Pillow's Resample.c, so that without DCT scaling the
 * output equals Pillow's crop().resize() to within one level (14-bit weights for SSE2 pmaddwd
 * instead of Pillow's 22 bits).
 */
#include "decode_core.h"

#include "colour.h"
#include "decode_worker.h"
#include "entropy.h"
#include "jpeg_glue.h"
#include "pool.h"
#include "resample.h"
#include "restart.h"
#include "streamcheck.h"
#include "warp.h"

#include <limits.h>
#include <stdatomic.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#define MAX_SCANS 1000 /* progressive JPEGs with more scans are refused (decode-time bombs) */

/* ---- libjpeg warnings (jpeg_glue.h: errors never exit, never print) ---- */

/* NOTE [libjpeg warnings]: libjpeg decodes on past damaged data, with a warning (level -1)
 * and zero coefficients where data is missing: grey or smeared rows, status 0 if ignored.
 * A file cut short ends with JWRN_JPEG_EOF (jpeg_mem_src inserts a fake EOI); one cut short
 * and padded with an EOI marker (a partial download some tools "repair") has no EOF but
 * JWRN_HIT_MARKER (the marker met inside entropy data is EOI) or, with restart intervals,
 * JWRN_MUST_RESYNC naming EOI: both are truncation. The same warnings naming another marker,
 * and bad Huffman/arithmetic codes or an inconsistent progression, are corruption. The rest
 * (extraneous bytes between markers, unknown JFIF revision or Adobe transform, a bad ICC
 * chunk, ...) leave the pixels as the encoder meant them: status 0, as Pillow and OpenCV. */
static int warning_status(j_common_ptr ci) {
  const struct jpeg_error_mgr *e = ci->err;
  const int eoi = 0xD9;
  switch (e->msg_code) {
    case JWRN_JPEG_EOF:
      return RC_TRUNCATED;
    case JWRN_HIT_MARKER:
      return ci->is_decompressor && ((j_decompress_ptr)ci)->unread_marker == eoi ? RC_TRUNCATED
                                                                                 : RC_CORRUPT;
    case JWRN_MUST_RESYNC: /* "found marker 0x%02x instead of RST%d" */
      return e->msg_parm.i[0] == eoi ? RC_TRUNCATED : RC_CORRUPT;
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
    case JWRN_BOGUS_PROGRESSION:
      return RC_CORRUPT;
    default:
      return RC_OK;
  }
}

/* The status the warnings of the image just decoded give it (NOTE [libjpeg warnings]). */
int rc_warned(const rc_jpeg_err *e, char *err) {
  if (e->warning_status == RC_TRUNCATED)
    snprintf(err, RC_ERRLEN, "JPEG: %s (image incomplete)", e->warning);
  else if (e->warning_status != RC_OK)
    snprintf(err, RC_ERRLEN, "JPEG: %s", e->warning);
  return e->warning_status;
}

static void rc_progress(j_common_ptr ci) {
  j_decompress_ptr d = (j_decompress_ptr)ci;
  if (d->input_scan_number > MAX_SCANS) {
    rc_jpeg_err *e = (rc_jpeg_err *)ci->err;
    snprintf(e->msg, sizeof e->msg, "more than %d progressive scans", MAX_SCANS);
    longjmp(e->jb, 1);
  }
}

static void rc_worker_release_share(rc_worker *w);

static int create_decompressor(rc_worker *w) {
  w->cinfo.err = rc_jpeg_err_init(&w->err, warning_status);
  if (setjmp(w->err.jb)) return -1;
  jpeg_create_decompress(&w->cinfo);
  w->progress.progress_monitor = rc_progress;
  w->cinfo.progress = &w->progress;
  return 0;
}

/* NOTE [fresh tables]: libjpeg keeps a decompressor's quantisation and Huffman tables from
 * one image to the next (they live in its permanent pool), so a JPEG that lacks a DQT or DHT
 * of its own would decode with the previous image's: pixels that depend on what the thread
 * decoded before. Each image gets a new decompressor instead (a few small allocations, a
 * third of a microsecond): a missing quantisation table is the error it is on a fresh
 * decompressor ("Quantization table 0x00 was not defined"), a missing Huffman table gets
 * libjpeg's standard one, as PyTurboJPEG and Pillow decode that file alone. */
int rc_fresh_decompressor(rc_worker *w, char *err) {
  jpeg_destroy_decompress(&w->cinfo);
  if (create_decompressor(w) == 0) return RC_OK;
  if (err) snprintf(err, RC_ERRLEN, "out of memory (JPEG decompressor)");
  return RC_NOMEM;
}

rc_worker *rc_worker_new(void) {
  rc_worker *w = calloc(1, sizeof *w);
  if (w && (!(w->entropy = rc_entropy_new()) || create_decompressor(w))) {
    rc_entropy_free(w->entropy);
    free(w);
    return NULL;
  }
  const char *stock = getenv("RECIO_STOCK_ENTROPY");
  w->stock_entropy = stock && strcmp(stock, "1") == 0;
  return w;
}

void rc_worker_free(rc_worker *w) {
  if (!w) return;
  rc_worker_release_share(w);
  jpeg_destroy_decompress(&w->cinfo);
  free(w->row);
  free(w->tmp);
  free(w->line);
  free(w->hline);
  free(w->image);
  free(w->cut);
  rc_entropy_free(w->entropy);
  free(w->planes);
  rc_coeffs_free(&w->ch);
  rc_coeffs_free(&w->cv);
  for (int c = 0; c < RC_MAX_PLANES; c++) free(w->src_plane[c]), free(w->out_plane[c]);
  free(w);
}

/* ---- the decode budget (NOTE [decode budget]) ---- */

static void rc_worker_release_share(rc_worker *w) {
  if (w->held_from) rc_budget_give(w->held_from, w->held);
  w->held_from = NULL;
  w->held = 0;
}

static uint64_t mib(uint64_t n) {
  return (n + (1 << 20) - 1) >> 20;
}

/* rc_worker_reserve without the message: 0, or -1 (nothing taken) when over the limit. */
static int take_share(rc_worker *w, const rc_opts *o, uint64_t need) {
  rc_worker_release_share(w);
  if (!o->budget) return 0;
  need += o->extra_bytes;
  if (rc_budget_take(o->budget, need) < 0) return -1;
  w->held_from = o->budget;
  w->held = need;
  return 0;
}

static int over_budget(const rc_opts *o, uint64_t need, const char *what, char *err) {
  snprintf(err, RC_ERRLEN, "%s needs about %llu MiB to decode, over the budget of %llu MiB", what,
           (unsigned long long)mib(need + o->extra_bytes),
           (unsigned long long)(o->budget->limit >> 20));
  return RC_TOO_LARGE;
}

int rc_worker_reserve(rc_worker *w, const rc_opts *o, uint64_t need, const char *what, char *err) {
  return take_share(w, o, need) ? over_budget(o, need, what, err) : RC_OK;
}

static void trim(uint8_t **p, size_t *cap) {
  if (*cap > RC_KEEP_BYTES) free(*p), *p = NULL, *cap = 0;
}

/* (NOTE [decode budget]) glibc keeps freed memory in the freeing thread's arena (blocks under
 * its mmap threshold, which grows to 32 MiB), so the next big decode in another thread would
 * allocate afresh: RSS would hold one big image per thread. After a big image the freed memory
 * goes back to the system before the share is given back. */
#define RC_TRIM_BYTES ((uint64_t)32 << 20)

void rc_worker_key(rc_worker *w, uint64_t key) {
  w->stream_key = key;
}

void rc_worker_release(rc_worker *w) {
  const int big = w->held >= RC_TRIM_BYTES;
  trim(&w->row, &w->row_cap);
  trim(&w->tmp, &w->tmp_cap);
  trim(&w->line, &w->line_cap);
  trim(&w->hline, &w->hline_cap);
  trim(&w->image, &w->image_cap);
  trim(&w->cut, &w->cut_cap);
  if (w->planes_cap > RC_KEEP_BYTES) free(w->planes), w->planes = NULL, w->planes_cap = 0;
  for (int c = 0; c < RC_MAX_PLANES; c++) {
    trim(&w->src_plane[c], &w->src_cap[c]);
    trim(&w->out_plane[c], &w->out_cap[c]);
  }
#ifdef __GLIBC__
  if (big) malloc_trim(0);
#endif
  rc_worker_release_share(w);
}

/* Pillow's CMYK -> RGB (Convert.c cmyk2rgb); Adobe JPEGs store inverted CMYK ("CMYK;I"). */
static void cmyk_to_rgb(const uint8_t *in, uint8_t *out, int n, int inverted) {
  for (int x = 0; x < n; x++, in += 4, out += 3) {
    int c = in[0], m = in[1], y = in[2], k = in[3];
    if (inverted) c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
    int nk = 255 - k, t;
    t = c * nk + 128, out[0] = (uint8_t)(nk - (((t >> 8) + t) >> 8));
    t = m * nk + 128, out[1] = (uint8_t)(nk - (((t >> 8) + t) >> 8));
    t = y * nk + 128, out[2] = (uint8_t)(nk - (((t >> 8) + t) >> 8));
  }
}

/* Stores one RGB output row: channel order, layout, dtype (via the lookup table), and the
 * mirror image when `flip` (the row read from its end: at scale 1 no resampling pass runs, so
 * the flip is done here). One pass over the row writes all three channels. */
#define STORE_ROW(T, CONV)                                                               \
  do {                                                                                   \
    T *base = (T *)out;                                                                  \
    const uint8_t *p = flip ? line + (size_t)(W - 1) * 3 : line;                         \
    const ptrdiff_t step = flip ? -3 : 3;                                                \
    if (o->layout == RC_LAYOUT_NHWC) {                                                   \
      T *d = base + (size_t)yy * W * 3;                                                  \
      for (int x = 0; x < W; x++, p += step, d += 3) {                                   \
        d[0] = CONV(0, p[c0]);                                                           \
        d[1] = CONV(1, p[1]);                                                            \
        d[2] = CONV(2, p[c2]);                                                           \
      }                                                                                  \
    } else {                                                                             \
      T *d0 = base + (size_t)yy * W, *d1 = d0 + (size_t)H * W, *d2 = d1 + (size_t)H * W; \
      for (int x = 0; x < W; x++, p += step) {                                           \
        d0[x] = CONV(0, p[c0]);                                                          \
        d1[x] = CONV(1, p[1]);                                                           \
        d2[x] = CONV(2, p[c2]);                                                          \
      }                                                                                  \
    }                                                                                    \
  } while (0)

#define CONV_U8(c, v) (v)
#define CONV_LUT(c, v) (lut[(c) * 256 + (v)])

static void store_row(const rc_opts *o, const uint8_t *line, void *out, int yy, int flip) {
  int W = o->out_w, H = o->out_h;
  int c0 = o->bgr ? 2 : 0, c2 = o->bgr ? 0 : 2;
  if (o->itemsize == 1) {
    if (!flip && !o->bgr && o->layout == RC_LAYOUT_NHWC) {
      memcpy((uint8_t *)out + (size_t)yy * W * 3, line, (size_t)W * 3);
      return;
    }
    if (!flip && o->layout == RC_LAYOUT_NCHW) {
      uint8_t *plane = (uint8_t *)out + (size_t)yy * W;
      const size_t n = (size_t)H * W;
      rc_split3(line, plane + (size_t)c0 * n, plane + n, plane + (size_t)c2 * n, W);
      return;
    }
    STORE_ROW(uint8_t, CONV_U8);
  } else if (o->itemsize == 4 && !flip && o->layout == RC_LAYOUT_NCHW) {
    /* output channel k from byte src[k] (NOTE [float store]) */
    const float *lut = o->lut;
    const double *ab = o->lut_line;
    float *plane = (float *)out + (size_t)yy * W;
    const size_t n = (size_t)H * W;
    const float *const t[3] = {lut + 256 * c0, lut + 256, lut + 256 * c2};
    const double *const lines[3] = {ab + 2 * c0, ab + 2, ab + 2 * c2};
    float *const d[3] = {plane + (size_t)c0 * n, plane + n, plane + (size_t)c2 * n};
    rc_split3_f32(line, t, ab ? lines : NULL, d, W);
  } else if (o->itemsize == 2) {
    const uint16_t *lut = o->lut;
    STORE_ROW(uint16_t, CONV_LUT);
  } else {
    const uint32_t *lut = o->lut;
    STORE_ROW(uint32_t, CONV_LUT);
  }
}

/* The float32 store of an image with a drawn contrast factor or illumination, or a mean
 * image (rc_opts.gain): this image's own table (the batch's times the factor, plus the
 * shift), less the mean image. */
static void store_norm(const rc_opts *o, const float *lut, float contrast, const uint8_t *line,
                       void *out, int yy, int flip) {
  const int W = o->out_w, H = o->out_h;
  const int c0 = o->bgr ? 2 : 0, c2 = o->bgr ? 0 : 2;
  const int src[3] = {c0, 1, c2};
  float *base = out;
  for (int c = 0; c < 3; c++) {
    const float *mean = o->mean_img ? o->mean_img + ((size_t)c * H + yy) * W : NULL;
    const float *t = lut + c * 256;
    const uint8_t *p = (flip ? line + (size_t)(W - 1) * 3 : line) + src[c];
    const ptrdiff_t step = flip ? -3 : 3;
    const size_t stride = o->layout == RC_LAYOUT_NHWC ? 3 : 1;
    float *d = o->layout == RC_LAYOUT_NHWC ? base + (size_t)yy * W * 3 + c
                                           : base + ((size_t)c * H + yy) * W;
    for (int x = 0; x < W; x++, p += step, d += stride)
      *d = mean ? t[*p] - contrast * mean[x] : t[*p];
  }
}

/* This image's table for store_norm: the batch's, times its contrast factor, plus its
 * illumination times the gain. */
static void image_lut(const rc_opts *o, const double *colour, float *lut) {
  const float *batch = o->lut;
  const float contrast = (float)colour[9], shift = (float)colour[10];
  for (int c = 0; c < 3; c++) {
    const float add = shift * o->gain[c];
    for (int v = 0; v < 256; v++) lut[c * 256 + v] = batch[c * 256 + v] * contrast + add;
  }
}

int rc_dct_scale_num(int cw, int ch, int ow, int oh, int dct_mode) {
  if (dct_mode == RC_DCT_OFF) return 8;
  for (int num = 1; num < 8; num++) {
    if (dct_mode == RC_DCT_POW2 && (num & (num - 1))) continue;
    if ((int64_t)cw * num >= (int64_t)ow * 8 && (int64_t)ch * num >= (int64_t)oh * 8) return num;
  }
  return 8;
}

static int is_jpeg(const uint8_t *data, size_t len) {
  return len >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

int rc_check_input(const uint8_t *data, size_t len, const rc_opts *o, char *err) {
  err[0] = 0;
  if (len == 0) return snprintf(err, RC_ERRLEN, "empty buffer"), RC_EMPTY;
  if (!is_jpeg(data, len)) return snprintf(err, RC_ERRLEN, "not a JPEG"), RC_UNSUPPORTED;
  if (o->out_w <= 0 || o->out_h <= 0)
    return snprintf(err, RC_ERRLEN, "output size must be positive"), RC_BAD_PARAM;
  return RC_OK;
}

static uint64_t round_up64(uint64_t v, uint64_t m) {
  return (v + m - 1) / m * m;
}

/* After jpeg_read_header: libjpeg's whole-image coefficient buffer (one 128-byte JBLOCK per
 * 8x8 block of each component, at full resolution whatever the DCT scale or crop), allocated
 * by jpeg_start_decompress for a progressive or multi-scan JPEG; 0 for a single scan. */
uint64_t rc_coef_buffer_bytes(j_decompress_ptr ci) {
  if (!jpeg_has_multiple_scans(ci)) return 0;
  uint64_t n = 0;
  for (int c = 0; c < ci->num_components; c++) {
    const jpeg_component_info *cp = &ci->comp_info[c];
    n += round_up64(cp->width_in_blocks, cp->h_samp_factor) *
         round_up64(cp->height_in_blocks, cp->v_samp_factor) * sizeof(JBLOCK);
  }
  return n;
}

/* After jpeg_calc_output_dimensions: libjpeg's other buffers, a few iMCU rows of every
 * component at full width (main and upsampling buffers), with room to spare. */
uint64_t rc_libjpeg_rows_bytes(j_decompress_ptr ci) {
  uint64_t n = 256 << 10;
  for (int c = 0; c < ci->num_components; c++) {
    const jpeg_component_info *cp = &ci->comp_info[c];
    n += (uint64_t)cp->width_in_blocks * DCTSIZE * cp->v_samp_factor * DCTSIZE * 4;
  }
  return n + (uint64_t)ci->output_width * ci->num_components * ci->max_v_samp_factor * DCTSIZE * 2;
}

/* Takes this image's share of the budget before jpeg_start_decompress allocates; tells libjpeg
 * the same limit for its virtual arrays (a backstop: over it, "Backing store not supported",
 * reported as RC_TOO_LARGE). */
int rc_reserve_decode(rc_worker *w, const rc_opts *o, uint64_t coef, uint64_t need, char *err) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  if (take_share(w, o, need)) { /* the message only now: one snprintf is 1 % of a 16x16 decode */
    char what[96];
    snprintf(what, sizeof what, "%ux%u %sJPEG", ci->image_width, ci->image_height,
             !coef                  ? ""
             : ci->progressive_mode ? "progressive "
                                    : "multi-scan ");
    jpeg_abort_decompress(ci);
    return over_budget(o, need, what, err);
  }
  const uint64_t lim = coef + rc_libjpeg_rows_bytes(ci) + (1 << 20);
  ci->mem->max_memory_to_use =
      o->budget && o->budget->limit && lim < (uint64_t)LONG_MAX ? (long)lim : 0;
  return RC_OK;
}

/* A libjpeg error (the setjmp branch of a decode): its status and message. */
static int jpeg_failed(rc_worker *w, char *err) {
  jpeg_abort_decompress(&w->cinfo);
  if (w->err.pub.msg_code == JERR_NO_BACKING_STORE) { /* the backstop of reserve_decode */
    snprintf(err, RC_ERRLEN, "JPEG: coefficient buffer over the decode budget (%s)", w->err.msg);
    return RC_TOO_LARGE;
  }
  snprintf(err, RC_ERRLEN, "JPEG: %s", w->err.msg[0] ? w->err.msg : "decode error");
  return RC_CORRUPT;
}

/* The setjmp branch of a pass that may have used recio's entropy decoder: RC_DECODE_AGAIN where
 * that decoder stopped at damaged data (NOTE [entropy decode]), else jpeg_failed. */
int rc_pass_failed(rc_worker *w, char *err) {
  if (!w->entropy_on || !rc_entropy_failed(w->entropy)) return jpeg_failed(w, err);
  jpeg_abort_decompress(&w->cinfo);
  return RC_DECODE_AGAIN;
}

/* jpeg_start_decompress, then recio's Huffman decoder for the scan where it takes it. */
void rc_start_decompress(rc_worker *w) {
  jpeg_start_decompress(&w->cinfo);
  if (w->own_entropy) w->entropy_on = rc_entropy_begin(w->entropy, &w->cinfo);
}

/* After jpeg_read_header: refuses an image over the pixel limit (before anything is allocated
 * for it) and intersects the crop {x, y, w, h} (or the whole image) with the image. */
int rc_crop_window(struct jpeg_decompress_struct *ci, const int32_t *crop, const rc_opts *o,
                   int64_t *x0, int64_t *y0, int64_t *x1, int64_t *y1, char *err) {
  const int W = (int)ci->image_width, H = (int)ci->image_height;
  if ((uint64_t)W * (uint64_t)H > o->max_pixels) {
    char msg[RC_ERRLEN];
    snprintf(msg, sizeof msg, "%dx%d image is over the limit of %llu pixels", W, H,
             (unsigned long long)o->max_pixels);
    return rc_fail(ci, err, RC_TOO_LARGE, msg);
  }
  *x0 = 0, *y0 = 0, *x1 = W, *y1 = H;
  if (crop) {
    *x0 = crop[0] > 0 ? crop[0] : 0;
    *y0 = crop[1] > 0 ? crop[1] : 0;
    *x1 = (int64_t)crop[0] + crop[2] < W ? (int64_t)crop[0] + crop[2] : W;
    *y1 = (int64_t)crop[1] + crop[3] < H ? (int64_t)crop[1] + crop[3] : H;
    if (*x1 <= *x0 || *y1 <= *y0)
      return rc_fail(ci, err, RC_BAD_PARAM, "crop window misses the image");
  }
  return RC_OK;
}

int rc_image_size(rc_worker *w, const uint8_t *data, size_t len, int *width, int *height,
                  char *err) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  if (len == 0) return snprintf(err, RC_ERRLEN, "empty buffer"), RC_EMPTY;
  if (!is_jpeg(data, len)) return snprintf(err, RC_ERRLEN, "not a JPEG"), RC_UNSUPPORTED;
  w->err.msg[0] = 0;
  if (setjmp(w->err.jb)) {
    jpeg_abort_decompress(ci);
    snprintf(err, RC_ERRLEN, "JPEG header: %s", w->err.msg);
    return RC_CORRUPT;
  }
  jpeg_mem_src(ci, data, (unsigned long)len);
  jpeg_read_header(ci, TRUE);
  *width = (int)ci->image_width;
  *height = (int)ci->image_height;
  jpeg_abort_decompress(ci);
  return RC_OK;
}

int rc_own_entropy(rc_worker *w, const uint8_t *data, size_t len) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  if (!is_jpeg(data, len) || rc_fresh_decompressor(w, NULL)) return 0;
  if (setjmp(w->err.jb)) {
    jpeg_abort_decompress(ci);
    return 0;
  }
  jpeg_mem_src(ci, data, (unsigned long)len);
  jpeg_read_header(ci, TRUE);
  jpeg_start_decompress(ci);
  const int taken = rc_entropy_begin(w->entropy, ci) && rc_entropy_framed(w->entropy);
  jpeg_abort_decompress(ci);
  return taken;
}

int rc_fail(struct jpeg_decompress_struct *ci, char *err, int status, const char *msg) {
  jpeg_abort_decompress(ci);
  snprintf(err, RC_ERRLEN, "%s", msg);
  return status;
}

/* One output row stored: with this image's own table (store_norm) or the batch's. */
static void store(rc_worker *w, const rc_opts *o, const double *colour, int norm,
                  const uint8_t *line, void *out, int yy, int flip) {
  if (norm)
    store_norm(o, w->lut, (float)colour[9], line, out, yy, flip);
  else
    store_row(o, line, out, yy, flip);
}

/* NOTE [fused colour]: with colour on, an output on AVX2 is coloured and stored in one
 * pass per row (colour.h's rc_colour_plan: the store's table folded into the colour's).
 * Without contrast each row goes out as it is resampled; contrast's mean grey needs every
 * row first, so they are kept (image) and stored after. Without AVX2 the colour runs over
 * the whole image (rc_colour_apply), then the store. */
static int fuse_colour(const rc_opts *o, int recolour) {
  return recolour && rc_colour_fused();
}

/* The table the fused store folds in: what store() would look values up in. */
static void finish_plan(rc_worker *w, const rc_opts *o, int norm, rc_colour_plan *plan,
                        const double sums[3]) {
  const void *lut = o->itemsize == 1 ? NULL : norm ? (const void *)w->lut : o->lut;
  rc_colour_plan_finish(plan, sums, (size_t)o->out_w * o->out_h, lut, o->itemsize);
  plan->nhwc = o->layout == RC_LAYOUT_NHWC;
}

/* One output row coloured and stored by the plan (NOTE [fused colour]). */
static void fused_store(const rc_opts *o, const rc_colour_plan *plan, const double *colour,
                        int norm, const uint8_t *line, void *out, int yy, int flip) {
  const size_t plane = (size_t)o->out_w * o->out_h, at = (size_t)yy * o->out_w;
  const int nhwc = o->layout == RC_LAYOUT_NHWC;
  void *dst[3];
  const float *mean[3];
  for (int k = 0; k < 3; k++) {
    dst[k] = (char *)out + (nhwc ? 3 * at : (size_t)k * plane + at) * o->itemsize;
    mean[k] = norm && o->mean_img ? o->mean_img + (size_t)k * plane + at : NULL;
  }
  rc_colour_store_row(plan, line, o->out_w, flip, dst, mean, (float)colour[9]);
}

/* The colour draws of `record` into colour (identities without a draw); whether they change
 * the 8-bit pixels (the return) and whether the store needs this image's own table (*norm). */
static int draw_colour(const rc_draw *draw, int64_t record, const rc_opts *o,
                       double colour[RC_COLOUR_VALUES], int *norm) {
  static const double identity[RC_COLOUR_VALUES] = {0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0};
  memcpy(colour, identity, sizeof identity);
  const int recolour = draw && rc_colour_pixels(&draw->colour);
  if (draw && (recolour || rc_colour_affine(&draw->colour))) rc_draw_colour(draw, record, colour);
  *norm = o->itemsize == 4 && o->gain && (o->mean_img || colour[9] != 1 || colour[10] != 0);
  return recolour;
}

/* One image's colour: its draws and how they reach the output (NOTE [fused colour]). */
typedef struct {
  double values[RC_COLOUR_VALUES];
  int norm;            /* the store needs this image's own table */
  int recolour;        /* the draws change the 8-bit pixels */
  int fuse;            /* coloured and stored in one pass per row */
  rc_colour_plan plan; /* (fuse) */
} image_colour;

static void begin_colour(const rc_draw *draw, int64_t record, const rc_opts *o, image_colour *c) {
  c->recolour = draw_colour(draw, record, o, c->values, &c->norm);
  c->fuse = fuse_colour(o, c->recolour);
  if (c->fuse) rc_colour_plan_begin(&c->plan, &draw->colour, c->values, o->bgr);
}

/* Before the rows: this image's table, and the fused plan where it needs no row first. */
static void start_store(rc_worker *w, const rc_opts *o, image_colour *c, double sums[3]) {
  if (c->norm) image_lut(o, c->values, w->lut);
  sums[0] = sums[1] = sums[2] = 0;
  if (c->fuse && !c->plan.contrast) finish_plan(w, o, c->norm, &c->plan, sums);
}

/* After the rows: the rows kept in w->image coloured and stored. */
static void finish_store(rc_worker *w, const rc_opts *o, const rc_draw *draw, image_colour *c,
                         const double sums[3], void *out, int flip) {
  const size_t out_stride = (size_t)o->out_w * 3;
  if (c->fuse && c->plan.contrast) {
    finish_plan(w, o, c->norm, &c->plan, sums);
    for (int yy = 0; yy < o->out_h; yy++)
      fused_store(o, &c->plan, c->values, c->norm, w->image + (size_t)yy * out_stride, out, yy,
                  flip);
  } else if (c->recolour && !c->fuse) {
    rc_colour_apply(&draw->colour, c->values, w->image, (size_t)o->out_w * o->out_h, w->planes);
    for (int yy = 0; yy < o->out_h; yy++)
      store(w, o, c->values, c->norm, w->image + (size_t)yy * out_stride, out, yy, flip);
  }
}

/* Sets the output colour space for the JPEG's: 3 (RGB) or 4 (CMYK, converted by us) channels
 * decoded, or 0 for a colour space left to the fallback. */
static int set_out_color(struct jpeg_decompress_struct *ci) {
  switch (ci->jpeg_color_space) {
    case JCS_GRAYSCALE:
    case JCS_YCbCr:
    case JCS_RGB:
      ci->out_color_space = JCS_RGB; /* libjpeg-turbo expands grayscale itself */
      return 3;
    case JCS_CMYK:
    case JCS_YCCK: /* libjpeg cannot give RGB from these: take CMYK and convert */
      ci->out_color_space = JCS_CMYK;
      return 4;
    default:
      return 0;
  }
}

/* Decodes rows r0..r1 of the (scaled, maybe column-cropped) image into tmp, row r at
 * tmp + (r - r0) * row_stride; without roi every row up to `end` is decoded, those outside
 * r0..r1 into the scratch row. 0, or -1 when libjpeg gives no row. */
static int read_rows(rc_worker *w, int r0, int r1, int end, int nch, size_t row_stride) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  const int inverted = nch == 4 && ci->saw_Adobe_marker;
  while ((int)ci->output_scanline < end) {
    const int r = (int)ci->output_scanline;
    JSAMPROW rows[16];
    int n = 1;
    if (r < r0 || r >= r1 || nch == 4) { /* outside the crop (no roi), or CMYK to convert */
      rows[0] = w->row;
    } else {
      n = r1 - r < 16 ? r1 - r : 16;
      for (int i = 0; i < n; i++) rows[i] = w->tmp + (size_t)(r - r0 + i) * row_stride;
    }
    const int got = (int)jpeg_read_scanlines(ci, rows, (JDIMENSION)n);
    if (got < 1) return -1;
    if (nch == 4 && r >= r0 && r < r1)
      cmyk_to_rgb(w->row, w->tmp + (size_t)(r - r0) * row_stride, (int)ci->output_width, inverted);
  }
  return 0;
}

/* jpeg_crop_scanline, and each component's downsampled_width as the upsampler needs it.
 * libjpeg-turbo before 3.0 sets it to the cropped width times h_samp/max_h alone, leaving out
 * the component's own IDCT scale: where libjpeg gives chroma a larger IDCT than luma to spare
 * upsampling (4x2 luma sampling at scale 1/2 or 1/4: chroma 8-point, luma 4 or 2), the
 * upsampler then fills only part of each cropped row, and the rest of its output buffer is
 * read uninitialised. The width set here is 3.0's (the same value where it is right). */
static void crop_scanline(j_decompress_ptr ci, JDIMENSION *xoff, JDIMENSION *xw) {
  jpeg_crop_scanline(ci, xoff, xw);
  for (int c = 0; c < ci->num_components; c++) {
    jpeg_component_info *cp = &ci->comp_info[c];
    const uint64_t num = (uint64_t)ci->output_width * cp->h_samp_factor * cp->DCT_scaled_size;
    const uint64_t den = (uint64_t)ci->max_h_samp_factor * ci->min_DCT_scaled_size;
    cp->downsampled_width = (JDIMENSION)((num + den - 1) / den);
  }
}

/* The columns a crop decode keeps on each side of those it uses, in output pixels, so that
 * those come out as in the whole image's decode: the upsampler takes a cropped row's ends for
 * the image's edges, and its fancy filters read one component sample beyond the one under a
 * pixel. Two output pixels times the upsampling factor, as the restart cut's window keeps
 * (NOTE [restart cut]); a whole iMCU where a component is upsampled by another factor. */
static int upsampling_margin(j_decompress_ptr ci) {
  int fh, fv;
  rc_upsampling(ci, &fh, &fv);
  return fh ? 2 * fh : ci->max_h_samp_factor * ci->min_DCT_scaled_size;
}

/* crop_scanline, then the entropy decoder told the iMCU columns libjpeg IDCTs (the ones it
 * widened to), so that it stores the coefficients of no others (where an MCU is an iMCU, so
 * that both count columns alike). */
static void crop_decoded_columns(rc_worker *w, JDIMENSION *xoff, JDIMENSION *xw) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  crop_scanline(ci, xoff, xw);
  const JDIMENSION align = (JDIMENSION)(ci->max_h_samp_factor * ci->min_DCT_scaled_size);
  if (w->entropy_on && (ci->comps_in_scan > 1 || ci->max_h_samp_factor == 1))
    rc_entropy_columns(w->entropy, *xoff / align, (*xoff + *xw + align - 1) / align - 1);
}

/* NOTE [incomplete progressive]: a progressive JPEG that ends before its last scan (a partial
 * download, cut at a scan boundary: no warning) has coefficients still unknown, and libjpeg
 * smooths its blocks from their neighbours' DC values (do_block_smoothing). With
 * jpeg_crop_scanline libjpeg-turbo 2.1 smooths the kept columns from other neighbours than a
 * whole decode does, so a crop differed from the whole image's pixels by up to 22 levels.
 * Such an image is decoded at full width (its rows are still skipped: those agree), so that
 * every crop is the whole decode's, and the whole decode stays the one libjpeg gives. Called
 * after jpeg_start_decompress, which has read every scan of a multi-scan JPEG. */
static int incomplete_progressive(j_decompress_ptr ci) {
  if (!ci->progressive_mode || !ci->coef_bits) return 0;
  for (int c = 0; c < ci->num_components; c++)
    for (int k = 0; k < DCTSIZE2; k++)
      if (ci->coef_bits[c][k] != 0) return 1;
  return 0;
}

/* Entropy-decodes the rows left below the last one read, so that the warnings cover the whole
 * stream (NOTE [whole-stream check]): whole iMCU rows skipped (no IDCT), the last one read.
 * (Not skipped to the end: libjpeg-turbo 2.1 then returns at once, reading nothing; a skip
 * ending inside the last iMCU row warned of a premature end on a valid 2x4-sampled JPEG.) */
static int read_to_end(rc_worker *w) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  const JDIMENSION end = ci->output_height;
  const JDIMENSION imcu = (JDIMENSION)(ci->max_v_samp_factor * ci->min_DCT_scaled_size);
  const JDIMENSION last = (end - 1) / imcu * imcu; /* the last iMCU row's first */
  if (ci->output_scanline < last) jpeg_skip_scanlines(ci, last - ci->output_scanline);
  JSAMPROW row = w->row;
  while (ci->output_scanline < end)
    if (jpeg_read_scanlines(ci, &row, 1) < 1) return -1;
  return 0;
}

/* A crop decode that would leave entropy data unread (the rows below `R1`, restart segments
 * outside the crop) of a JPEG not yet known whole reads it whole (NOTE [whole-stream check]):
 * 1 and its key in *key (`known`, where the caller gave it), else 0. After jpeg_read_header. */
static int whole_stream(const rc_opts *o, j_decompress_ptr ci, const uint8_t *data, size_t len,
                        uint64_t known, int R1, int SH, uint64_t *key) {
  *key = 0;
  if (!o->roi || !o->checked || jpeg_has_multiple_scans(ci) || (R1 >= SH && !ci->restart_interval))
    return 0;
  *key = known ? known : rc_checked_key(data, len);
  return !rc_checked_has(o->checked, *key);
}

/* The geometry's way (draw->geom.on): after the header, the image's warp drawn (draw.c), the
 * DCT scale picked from the source pixels per output pixel, only the rows and iMCU columns
 * its taps read decoded, then each output row sampled once (warp.c) and stored. */
static int decode_warped(rc_worker *w, const uint8_t *data, size_t len, const rc_draw *draw,
                         int64_t record, int nch, int32_t *crop_out, uint8_t *flip_out,
                         const rc_opts *o, void *out, char *err) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  const int W = (int)ci->image_width, H = (int)ci->image_height;
  rc_warp wp;
  uint8_t mirror;
  rc_draw_warp(draw, record, W, H, &wp, crop_out, &mirror);
  *flip_out = mirror;
  /* source pixels per output pixel along the output's axes */
  const double ex = hypot(wp.m[0], wp.m[3]), ey = hypot(wp.m[1], wp.m[4]);
  const int num =
      rc_dct_scale_num((int)fmin(ceil(o->out_w * ex), 1e9), (int)fmin(ceil(o->out_h * ey), 1e9),
                       o->out_w, o->out_h, o->dct_mode);
  ci->scale_num = (unsigned)num;
  ci->scale_denom = 8;
  jpeg_calc_output_dimensions(ci);
  const int SW = (int)ci->output_width, SH = (int)ci->output_height;
  if (num != 8) rc_warp_scale_source(&wp, (double)SW / W, (double)SH / H);
  int box[4];
  rc_warp_bounds(&wp, o->out_w, o->out_h, SW, SH, box);
  if (!o->roi) box[0] = 0, box[1] = 0, box[2] = SW, box[3] = SH;
  if (box[2] <= box[0] || box[3] <= box[1]) box[0] = 0, box[1] = 0, box[2] = 1, box[3] = 1;
  const int R0 = box[1], R1 = box[3], nrows = R1 - R0, bw = box[2] - box[0];
  const size_t out_stride = (size_t)o->out_w * 3;
  const int align = ci->max_h_samp_factor * ci->min_DCT_scaled_size;
  const uint64_t row_w = o->roi && bw + 4 * align < SW ? (uint64_t)bw + 4 * align : (uint64_t)SW;
  const uint64_t coef = rc_coef_buffer_bytes(ci);
  image_colour c;
  begin_colour(draw, record, o, &c);
  /* the rows kept for the colour (NOTE [fused colour]); the scratch of rc_colour_apply */
  const int keep = c.recolour && (!c.fuse || c.plan.contrast);
  const uint64_t scratch =
      c.recolour && !c.fuse ? RC_COLOUR_SCRATCH((size_t)o->out_w * o->out_h) : 0;
  const uint64_t colour_bytes = (keep ? out_stride * o->out_h : 0) + scratch;
  const uint64_t need = coef + rc_libjpeg_rows_bytes(ci) + row_w * 3 * nrows + row_w * nch +
                        out_stride + rc_warp_scratch_bytes(&wp, o->out_w) + colour_bytes + 4096;
  const int over = rc_reserve_decode(w, o, coef, need, err);
  if (over) return over;
  if (rc_grow((void **)&w->hline, &w->hline_cap, out_stride + RC_SLACK) ||
      rc_grow((void **)&w->line, &w->line_cap, rc_warp_scratch_bytes(&wp, o->out_w)) ||
      /* (rc_warp_row writes a byte past a row: the last row's into the slack) */
      (keep && rc_grow((void **)&w->image, &w->image_cap, out_stride * o->out_h + RC_SLACK)) ||
      (scratch && rc_grow((void **)&w->planes, &w->planes_cap, scratch)))
    return rc_fail(ci, err, RC_NOMEM, "out of memory (resample buffers)");
  rc_warp_prepare(&wp, o->out_w, SW, mirror, w->line); /* (flipped here: a plain store) */
  rc_start_decompress(w);
  JDIMENSION xoff = 0, xw = ci->output_width;
  if (o->roi && bw < SW && !incomplete_progressive(ci)) {
    const int margin = upsampling_margin(ci);
    const int a = box[0] - margin > 0 ? box[0] - margin : 0;
    const int b = box[2] + margin < SW ? box[2] + margin : SW;
    if (b - a < SW) {
      xoff = (JDIMENSION)a;
      xw = (JDIMENSION)(b - a);
      crop_decoded_columns(w, &xoff, &xw);
    }
  }
  const size_t row_stride = (size_t)ci->output_width * 3;
  if (rc_grow((void **)&w->tmp, &w->tmp_cap, row_stride * nrows + RC_SLACK) ||
      rc_grow((void **)&w->row, &w->row_cap, (size_t)ci->output_width * nch + RC_SLACK))
    return rc_fail(ci, err, RC_NOMEM, "out of memory (row buffers)");
  uint64_t key; /* (the rows below the box: read once, NOTE [whole-stream check]) */
  const int whole = whole_stream(o, ci, data, len, w->stream_key, R1, SH, &key);
  if (o->roi && R0 > 0) jpeg_skip_scanlines(ci, (JDIMENSION)R0);
  if (read_rows(w, R0, R1, o->roi ? R1 : SH, nch, row_stride) || (whole && read_to_end(w)))
    return rc_fail(ci, err, RC_CORRUPT, "JPEG: no rows");
  jpeg_abort_decompress(ci);
  /* As the crop way (resample_rows): the colour and store of the (already mirrored) rows. */
  double sums[3];
  start_store(w, o, &c, sums);
  for (int yy = 0; yy < o->out_h; yy++) {
    uint8_t *row = keep ? w->image + (size_t)yy * out_stride : w->hline;
    rc_warp_row(&wp, w->tmp, row_stride, (int)xoff, R0, SW, SH, yy, o->out_w, row);
    if (c.fuse) {
      rc_colour_row_prepare(&c.plan, row, (size_t)o->out_w, sums);
      if (!c.plan.contrast) fused_store(o, &c.plan, c.values, c.norm, row, out, yy, 0);
    } else if (!c.recolour) {
      store(w, o, c.values, c.norm, row, out, yy, 0);
    }
  }
  finish_store(w, o, draw, &c, sums, out, 0);
  const int status = rc_warned(&w->err, err);
  if (whole && status == RC_OK) rc_checked_add(o->checked, key);
  return status;
}

/* The crop way's plan of one image, filled in by decode_pass's steps in order. */
typedef struct {
  const int32_t *window; /* the crop {x, y, w, h} in source pixels, or NULL: the whole image */
  int mirror;
  image_colour colour;
  int nch;                   /* channels decoded: 3, or 4 (CMYK, converted here) */
  int num;                   /* the DCT scale, num/8 */
  int SW, SH;                /* the scaled image */
  double bx0, bx1, by0, by1; /* the crop in scaled pixels */
  int rx0, rx1, ry0, rw, rh; /* the whole scaled pixels that cover it */
  /* the rows the vertical filter touches, from the crop's first (first) and the image's (R0) */
  int first, R0, R1, nrows;
  size_t kept;      /* the rows kept for the colour (NOTE [fused colour]) */
  uint64_t scratch; /* rc_colour_apply's */
  int whole;        /* the whole stream read (NOTE [whole-stream check]); the JPEG's key */
  uint64_t key;
  int ox, oy;              /* the decoded JPEG's pixel (0, 0) in the image's (NOTE [restart cut]) */
  JDIMENSION xoff;         /* the first column decoded */
  size_t row_stride, skip; /* a decoded row's bytes; the crop's first byte in a row */
  /* a cut's header alone: its segments, copied from the source's scan by recio's decoder */
  rc_unstuff_window cut_window;
  const uint8_t *cut_src; /* (NULL: the whole stream, or a cut with its segments) */
  size_t cut_src_len;
} crop_pass;

/* The window and flip: given (crop, flip) or drawn for `record` from the size in the header
 * (draw not NULL: written to crop_out and flip_out too). */
static void choose_window(const rc_draw *draw, int64_t record, int W, int H, const int32_t *crop,
                          int flip, int32_t *crop_out, uint8_t *flip_out, crop_pass *p) {
  p->window = crop;
  p->mirror = flip;
  if (draw) {
    uint8_t drawn_flip;
    rc_draw_window(draw, record, W, H, crop_out, &drawn_flip);
    *flip_out = drawn_flip;
    p->window = crop_out;
    p->mirror = drawn_flip;
  }
}

/* The DCT scale for the crop x0..x1, y0..y1, the whole scaled pixels that cover it, the filters
 * from them to the output, and the rows those filters touch. */
static int plan_crop(rc_worker *w, const rc_opts *o, int64_t x0, int64_t y0, int64_t x1, int64_t y1,
                     crop_pass *p, char *err) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  const int W = (int)ci->image_width, H = (int)ci->image_height;
  p->num = rc_dct_scale_num((int)(x1 - x0), (int)(y1 - y0), o->out_w, o->out_h, o->dct_mode);
  ci->scale_num = (unsigned)p->num;
  ci->scale_denom = 8;
  jpeg_calc_output_dimensions(ci);
  const int SW = p->SW = (int)ci->output_width, SH = p->SH = (int)ci->output_height;

  /* The crop in scaled pixels, and the whole pixels that cover it. */
  const double fx = (double)SW / W, fy = (double)SH / H;
  p->bx0 = x0 * fx, p->bx1 = x1 * fx, p->by0 = y0 * fy, p->by1 = y1 * fy;
  int rx0 = (int)floor(p->bx0), rx1 = (int)ceil(p->bx1);
  int ry0 = (int)floor(p->by0), ry1 = (int)ceil(p->by1);
  if (rx0 > SW - 1) rx0 = SW - 1;
  if (ry0 > SH - 1) ry0 = SH - 1;
  if (rx1 > SW) rx1 = SW;
  if (ry1 > SH) ry1 = SH;
  if (rx1 <= rx0) rx1 = rx0 + 1;
  if (ry1 <= ry0) ry1 = ry0 + 1;
  p->rx0 = rx0, p->rx1 = rx1, p->ry0 = ry0;
  p->rw = rx1 - rx0, p->rh = ry1 - ry0;
  if (rc_precompute(&w->ch, p->rw, p->bx0 - rx0, p->bx1 - rx0, o->out_w, o->interp) ||
      rc_precompute(&w->cv, p->rh, p->by0 - ry0, p->by1 - ry0, o->out_h, o->interp))
    return rc_fail(ci, err, RC_NOMEM, "out of memory (coefficients)");
  /* Only the rows the vertical filter touches are decoded. */
  int first = p->rh, last = 0;
  for (int yy = 0; yy < o->out_h; yy++) {
    int a = w->cv.bounds[2 * yy], b = a + w->cv.bounds[2 * yy + 1];
    if (w->cv.bounds[2 * yy + 1] == 0) continue;
    if (a < first) first = a;
    if (b > last) last = b;
  }
  if (last <= first) first = 0, last = 1;
  /* (cv's bounds count from the crop's first row, tmp's from R0: `first` apart. They are not
   * rebased in place, so that the next image of this size and crop reuses them.) */
  p->first = first;
  p->R0 = ry0 + first, p->R1 = ry0 + last, p->nrows = last - first;
  return RC_OK;
}

/* What this image allocates, taken from the budget (NOTE [decode budget]): the rows the crop
 * needs, as wide as jpeg_crop_scanline leaves them (whole iMCU columns and a margin), or whole
 * rows; then the buffers the resample and the colour use. */
static int reserve_crop(rc_worker *w, const rc_opts *o, size_t len, crop_pass *p, char *err) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  const image_colour *c = &p->colour;
  const size_t out_stride = (size_t)o->out_w * 3;
  const int align = ci->max_h_samp_factor * ci->min_DCT_scaled_size;
  const uint64_t row_w =
      o->roi && p->rw + 4 * align < p->SW ? (uint64_t)p->rw + 4 * align : (uint64_t)p->SW;
  const uint64_t coef = rc_coef_buffer_bytes(ci);
  /* the rows kept for the colour (NOTE [fused colour]): all, or one for the HLS jitter */
  p->kept = !c->recolour                   ? 0
            : !c->fuse || c->plan.contrast ? out_stride * o->out_h
            : c->plan.hls                  ? out_stride
                                           : 0;
  p->scratch = c->recolour && !c->fuse ? RC_COLOUR_SCRATCH((size_t)o->out_w * o->out_h) : 0;
  const uint64_t need = coef + rc_libjpeg_rows_bytes(ci) + row_w * 3 * p->nrows + row_w * p->nch +
                        (uint64_t)p->rw * 3 + out_stride + p->kept + p->scratch + 4096 +
                        /* the unstuffed copy (NOTE [entropy decode]), and the cut */
                        (uint64_t)len + (ci->restart_interval ? (uint64_t)len : 0);
  const int over = rc_reserve_decode(w, o, coef, need, err);
  if (over) return over;
  if (rc_grow((void **)&w->line, &w->line_cap, (size_t)p->rw * 3 + rc_hpass_slack(&w->ch)) ||
      rc_grow((void **)&w->hline, &w->hline_cap, out_stride + RC_SLACK) ||
      (p->kept && rc_grow((void **)&w->image, &w->image_cap, p->kept)) ||
      (p->scratch && rc_grow((void **)&w->planes, &w->planes_cap, p->scratch)))
    return rc_fail(ci, err, RC_NOMEM, "out of memory (resample buffers)");
  return RC_OK;
}

/* With restart markers only the segments that cover the crop are decoded: the decode then
 * reads a JPEG of them, whose pixel (0, 0) is the image's (ox, oy) (NOTE [restart cut]).
 * Where recio's entropy decoder may take the scan, the JPEG is the cut's header alone and the
 * decoder copies the segments from the source (start_decode); else they are in the JPEG. */
static void cut_segments(rc_worker *w, const uint8_t *data, size_t len, const rc_opts *o,
                         crop_pass *p) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  p->ox = p->oy = 0;
  p->cut_src = NULL;
  rc_cut cut;
  if (!o->roi || p->whole || !ci->restart_interval ||
      !rc_restart_plan(ci, p->rx0, p->rx1, p->R0, p->R1, &cut))
    return;
  size_t scan = 0;
  const int bare = w->own_entropy && rc_restart_window(ci, &cut, &p->cut_window);
  const size_t n = bare ? rc_restart_header(ci, data, len, &cut, &w->cut, &w->cut_cap, &scan)
                        : rc_restart_cut(ci, data, len, &cut, &w->cut, &w->cut_cap);
  if (!n) return;
  if (bare) p->cut_src = data + scan, p->cut_src_len = len - scan;
  jpeg_abort_decompress(ci);
  jpeg_mem_src(ci, w->cut, (unsigned long)n);
  jpeg_read_header(ci, TRUE);
  set_out_color(ci); /* (the same colour space: the same frame and colour segments) */
  ci->scale_num = (unsigned)p->num;
  ci->scale_denom = 8;
  p->ox = cut.c0 * ci->max_h_samp_factor * p->num;
  p->oy = cut.r0 * ci->max_v_samp_factor * p->num;
}

/* jpeg_start_decompress and the entropy decoder (rc_start_decompress). A cut's header alone
 * needs recio's decoder, which copies the segments from the source: where it does not take
 * the scan (its first chunk shows the framing wrong), the pass is run again with libjpeg's
 * decoder, whose cut has its segments. */
static int start_decode(rc_worker *w, const crop_pass *p) {
  if (!p->cut_src) {
    rc_start_decompress(w);
    return RC_OK;
  }
  jpeg_start_decompress(&w->cinfo);
  w->entropy_on =
      rc_entropy_begin_window(w->entropy, &w->cinfo, p->cut_src, p->cut_src_len, &p->cut_window);
  if (w->entropy_on) return RC_OK;
  jpeg_abort_decompress(&w->cinfo);
  return RC_DECODE_AGAIN;
}

/* After jpeg_start_decompress: only the iMCU columns the crop needs are decoded. */
static void crop_columns(rc_worker *w, const rc_opts *o, crop_pass *p) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  const int CW = (int)ci->output_width; /* the decoded image's width: SW, or the cut's */
  JDIMENSION xoff = 0, xw = ci->output_width;
  if (o->roi && p->rw < CW && !incomplete_progressive(ci)) {
    const int margin = upsampling_margin(ci);
    const int a = p->rx0 - p->ox - margin > 0 ? p->rx0 - p->ox - margin : 0;
    const int b = p->rx1 - p->ox + margin < CW ? p->rx1 - p->ox + margin : CW;
    if (b - a < CW) {
      xoff = (JDIMENSION)a;
      xw = (JDIMENSION)(b - a);
      crop_decoded_columns(w, &xoff, &xw); /* widens to whole iMCU columns */
    }
  }
  p->xoff = xoff;
}

/* The rows the vertical filter needs, decoded straight into tmp (no copy), a few per call;
 * the vertical pass then runs first, over whole rows (SIMD-friendly), so the costlier
 * per-pixel horizontal pass sees only out_h rows. The rows below the crop are decoded only
 * while the JPEG is not yet known whole (NOTE [whole-stream check]). */
static int read_crop_rows(rc_worker *w, const rc_opts *o, crop_pass *p, char *err) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  p->row_stride = (size_t)ci->output_width * 3;
  p->skip = (size_t)(p->rx0 - p->ox - (int)p->xoff) * 3;
  if (rc_grow((void **)&w->tmp, &w->tmp_cap, p->row_stride * p->nrows + rc_hpass_slack(&w->ch)) ||
      rc_grow((void **)&w->row, &w->row_cap, (size_t)ci->output_width * p->nch + RC_SLACK))
    return rc_fail(ci, err, RC_NOMEM, "out of memory (row buffers)");
  /* The horizontal pass's zero taps read past a row's end (the last row's, in tmp or line):
   * keep those bytes defined, so that no output depends on memory never written. */
  memset(w->tmp + p->row_stride * p->nrows, 0, rc_hpass_slack(&w->ch));
  memset(w->line + (size_t)p->rw * 3, 0, rc_hpass_slack(&w->ch));
  const int r0 = p->R0 - p->oy, r1 = p->R1 - p->oy;
  if (o->roi && r0 > 0) jpeg_skip_scanlines(ci, (JDIMENSION)r0);
  /* without roi the whole image is decoded (for measuring) */
  if (read_rows(w, r0, r1, o->roi ? r1 : p->SH, p->nch, p->row_stride) ||
      (p->whole && read_to_end(w)))
    return rc_fail(ci, err, RC_CORRUPT, "JPEG: no rows");
  jpeg_abort_decompress(ci);
  return RC_OK;
}

/* Per output row: the vertical pass over `rows` (the rows the filter touches, from the crop's
 * `first`, p->row_stride bytes each), the horizontal pass (flip folded in), then the colour and
 * the store (NOTE [fused colour]); at scale 1 a pass is skipped and the store flips the row. */
static void resample_rows(rc_worker *w, const rc_opts *o, const rc_draw *draw, crop_pass *p,
                          const uint8_t *rows, void *out) {
  image_colour *c = &p->colour;
  const size_t out_stride = (size_t)o->out_w * 3;
  const int store_flip = w->ch.identity ? p->mirror : 0;
  double sums[3];
  start_store(w, o, c, sums);
  if (!w->ch.identity) rc_hpass_pack(&w->ch, p->mirror);
  for (int yy = 0; yy < o->out_h; yy++) {
    const int ymin = w->cv.bounds[2 * yy] - p->first, ytaps = w->cv.bounds[2 * yy + 1];
    const uint8_t *vrow = w->line;
    if (w->cv.identity)
      vrow = rows + (size_t)ymin * p->row_stride + p->skip;
    else
      rc_vpass(rows + p->skip, p->row_stride, (size_t)p->rw * 3, ymin, ytaps,
               w->cv.kk + (size_t)yy * w->cv.ksize, w->line);
    const uint8_t *done = vrow + (size_t)w->ch.bounds[0] * 3;
    if (!w->ch.identity) {
      rc_hpass(vrow, w->hline, o->out_w, &w->ch, p->mirror);
      done = w->hline;
    }
    if (c->fuse) { /* (the rows read may be the decoder's: the jitter changes a copy) */
      if (p->kept) {
        uint8_t *row = w->image + (c->plan.contrast ? (size_t)yy * out_stride : 0);
        memcpy(row, done, out_stride);
        rc_colour_row_prepare(&c->plan, row, (size_t)o->out_w, sums);
        done = row;
      }
      if (!c->plan.contrast)
        fused_store(o, &c->plan, c->values, c->norm, done, out, yy, store_flip);
    } else if (c->recolour) { /* kept for the colour pass over the whole image */
      memcpy(w->image + (size_t)yy * out_stride, done, out_stride);
    } else {
      store(w, o, c->values, c->norm, done, out, yy, store_flip);
    }
  }
  finish_store(w, o, draw, c, sums, out, store_flip);
}

/* rc_decode, its window and flip either given (crop, flip) or drawn once the header gives the
 * image's size (draw not NULL: the ones of `record`, written to crop_out and flip_out): the
 * steps above, in order, after the header. */
static int decode_pass(rc_worker *w, const uint8_t *data, size_t len, const int32_t *crop, int flip,
                       const rc_draw *draw, int64_t record, int32_t *crop_out, uint8_t *flip_out,
                       const rc_opts *o, void *out, char *err) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  const int bad = rc_check_input(data, len, o, err);
  if (bad) return bad;
  const int fresh = rc_fresh_decompressor(w, err);
  if (fresh) return fresh;
  rc_jpeg_err_reset(&w->err);
  w->entropy_on = 0;
  if (setjmp(w->err.jb)) return rc_pass_failed(w, err); /* w, err: unchanged since setjmp */
  jpeg_mem_src(ci, data, (unsigned long)len);
  jpeg_read_header(ci, TRUE);
  if (draw && draw->geom.on) {
    int64_t gx0, gy0, gx1, gy1; /* (only the pixel limit is checked: the warp picks the rows) */
    const int refused = rc_crop_window(ci, NULL, o, &gx0, &gy0, &gx1, &gy1, err);
    if (refused) return refused;
    const int nch = set_out_color(ci);
    if (!nch) return rc_fail(ci, err, RC_UNSUPPORTED, "JPEG colour space left to the fallback");
    return decode_warped(w, data, len, draw, record, nch, crop_out, flip_out, o, out, err);
  }
  crop_pass p; /* (the arguments are not changed after setjmp) */
  choose_window(draw, record, (int)ci->image_width, (int)ci->image_height, crop, flip, crop_out,
                flip_out, &p);
  /* Colour: the record's draws, applied to the output pixels before they are stored. */
  begin_colour(draw, record, o, &p.colour);
  int64_t x0, y0, x1, y1;
  int st = rc_crop_window(ci, p.window, o, &x0, &y0, &x1, &y1, err);
  if (st) return st;
  if (!(p.nch = set_out_color(ci)))
    return rc_fail(ci, err, RC_UNSUPPORTED, "JPEG colour space left to the fallback");
  if ((st = plan_crop(w, o, x0, y0, x1, y1, &p, err))) return st;
  if ((st = reserve_crop(w, o, len, &p, err))) return st;
  p.whole = whole_stream(o, ci, data, len, w->stream_key, p.R1, p.SH, &p.key);
  cut_segments(w, data, len, o, &p);
  if ((st = start_decode(w, &p))) return st;
  crop_columns(w, o, &p);
  if ((st = read_crop_rows(w, o, &p, err))) return st;
  resample_rows(w, o, draw, &p, w->tmp, out);
  st = rc_warned(&w->err, err);
  if (p.whole && st == RC_OK) rc_checked_add(o->checked, p.key);
  return st;
}

static atomic_uint_fast64_t second_decodes;

uint64_t rc_second_decodes(void) {
  return atomic_load_explicit(&second_decodes, memory_order_relaxed);
}

void rc_count_second_decode(void) {
  atomic_fetch_add_explicit(&second_decodes, 1, memory_order_relaxed);
}

static int decode(rc_worker *w, const uint8_t *data, size_t len, const int32_t *crop, int flip,
                  const rc_draw *draw, int64_t record, int32_t *crop_out, uint8_t *flip_out,
                  const rc_opts *o, void *out, char *err) {
  w->own_entropy = !w->stock_entropy;
  const int status =
      decode_pass(w, data, len, crop, flip, draw, record, crop_out, flip_out, o, out, err);
  if (status != RC_DECODE_AGAIN) return status;
  rc_count_second_decode();
  w->own_entropy = 0;
  return decode_pass(w, data, len, crop, flip, draw, record, crop_out, flip_out, o, out, err);
}

int rc_decode(rc_worker *w, const uint8_t *data, size_t len, const int32_t *crop, int flip,
              const rc_opts *o, void *out, char *err) {
  return decode(w, data, len, crop, flip, NULL, 0, NULL, NULL, o, out, err);
}

int rc_decode_drawn(rc_worker *w, const uint8_t *data, size_t len, const rc_draw *draw,
                    int64_t record, int32_t crop[4], uint8_t *flip, const rc_opts *o, void *out,
                    char *err) {
  return decode(w, data, len, NULL, 0, draw, record, crop, flip, o, out, err);
}

/* ---- pixels decoded elsewhere (im2rec's PNGs): crop and resample only ---- */

int rc_resize_rgb(rc_worker *w, const uint8_t *rgb, int width, int height, size_t stride,
                  const int32_t *crop, const rc_opts *o, uint8_t *out, char *err) {
  err[0] = 0;
  const int x = crop[0], y = crop[1], cw = crop[2], chh = crop[3];
  /* (cw > width - x, not x + cw > width: the crop comes from the caller and may be huge) */
  if (width < 1 || height < 1 || stride < (size_t)width * 3 || x < 0 || y < 0 || cw < 1 ||
      chh < 1 || x >= width || y >= height || cw > width - x || chh > height - y || o->out_w < 1 ||
      o->out_h < 1)
    return snprintf(err, RC_ERRLEN, "bad resize parameters"), RC_BAD_PARAM;
  if (rc_precompute(&w->ch, width, x, (double)x + cw, o->out_w, o->interp) ||
      rc_precompute(&w->cv, height, y, (double)y + chh, o->out_h, o->interp))
    return snprintf(err, RC_ERRLEN, "out of memory (coefficients)"), RC_NOMEM;
  const size_t row_bytes = (size_t)width * 3, out_stride = (size_t)o->out_w * 3;
  if (rc_grow((void **)&w->line, &w->line_cap, row_bytes + rc_hpass_slack(&w->ch)) ||
      rc_grow((void **)&w->hline, &w->hline_cap, out_stride + RC_SLACK))
    return snprintf(err, RC_ERRLEN, "out of memory (resample buffers)"), RC_NOMEM;
  /* the zero taps at a row's end read past it: keep those bytes defined */
  memset(w->line + row_bytes, 0, rc_hpass_slack(&w->ch));
  for (int yy = 0; yy < o->out_h; yy++) {
    const int ymin = w->cv.bounds[2 * yy], taps = w->cv.bounds[2 * yy + 1];
    if (w->cv.identity)
      memcpy(w->line, rgb + (size_t)ymin * stride, row_bytes);
    else
      rc_vpass(rgb, stride, row_bytes, ymin, taps, w->cv.kk + (size_t)yy * w->cv.ksize, w->line);
    if (w->ch.identity) {
      memcpy(out + yy * out_stride, w->line + (size_t)w->ch.bounds[0] * 3, out_stride);
    } else { /* hpass writes past the row: through hline */
      rc_hpass(w->line, w->hline, o->out_w, &w->ch, 0);
      memcpy(out + yy * out_stride, w->hline, out_stride);
    }
  }
  return RC_OK;
}

/* ---- decoded pixels resampled and stored as a crop decode stores them ---- */

int rc_resample_window(rc_worker *w, const uint8_t *rgb, int width, int height, size_t stride,
                       const double window[4], int flip, const rc_opts *o, void *out, char *err) {
  err[0] = 0;
  const double x0 = window[0], y0 = window[1], x1 = window[2], y1 = window[3];
  /* (negated comparisons: a NaN fails them. A window's end may pass the image's by a
   * rounding, as a decode's scaled crop does: the filters clamp at the edges.) */
  if (width < 1 || height < 1 || stride < (size_t)width * 3 || !(x0 >= 0) || !(y0 >= 0) ||
      !(x1 > x0) || !(y1 > y0) || !(x1 <= width + 1e-6) || !(y1 <= height + 1e-6) || o->out_w < 1 ||
      o->out_h < 1)
    return snprintf(err, RC_ERRLEN, "bad resample parameters"), RC_BAD_PARAM;
  crop_pass p;
  memset(&p, 0, sizeof p);
  p.mirror = flip;
  begin_colour(NULL, 0, o, &p.colour);
  p.rw = width;
  p.row_stride = stride;
  if (rc_precompute(&w->ch, width, x0, x1, o->out_w, o->interp) ||
      rc_precompute(&w->cv, height, y0, y1, o->out_h, o->interp))
    return snprintf(err, RC_ERRLEN, "out of memory (coefficients)"), RC_NOMEM;
  const size_t slack = rc_hpass_slack(&w->ch), row_bytes = (size_t)width * 3;
  if (rc_grow((void **)&w->line, &w->line_cap, row_bytes + slack) ||
      rc_grow((void **)&w->hline, &w->hline_cap, (size_t)o->out_w * 3 + RC_SLACK))
    return snprintf(err, RC_ERRLEN, "out of memory (resample buffers)"), RC_NOMEM;
  memset(w->line + row_bytes, 0, slack); /* read by the horizontal pass's zero taps */
  const uint8_t *rows = rgb;
  if (w->cv.identity) {
    /* The horizontal pass then reads the rows themselves, past a row's end: copied with the
     * padding a decode's rows have. */
    if (rc_grow((void **)&w->tmp, &w->tmp_cap, stride * height + slack))
      return snprintf(err, RC_ERRLEN, "out of memory (row buffers)"), RC_NOMEM;
    memcpy(w->tmp, rgb, stride * height);
    memset(w->tmp + stride * height, 0, slack);
    rows = w->tmp;
  }
  resample_rows(w, o, NULL, &p, rows, out);
  return RC_OK;
}
