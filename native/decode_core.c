/* recio decode core: libjpeg-turbo decode, crop, Pillow-compatible resample, flip, cast.
 *
 * One pass per image: read the header, pick a DCT-domain scale (num/8) that keeps the crop at
 * least as large as the output, decode only the columns (jpeg_crop_scanline) and rows
 * (jpeg_skip_scanlines) the crop needs, resample each decoded row horizontally as it arrives,
 * then resample vertically and store each output row flipped, reordered and cast.
 *
 * The resampler reproduces Pillow's Resample.c (BILINEAR and BOX filters, support scaled by the
 * downscale factor, fixed point, horizontal pass first, uint8 intermediate), so that without DCT
 * scaling the output equals Pillow's crop().resize() to within one level (14-bit weights for
 * SSE2 pmaddwd instead of Pillow's 22 bits).
 */
#include "decode_core.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* 14-bit weights fit int16, so SSE2 pmaddwd does two taps of four channels at once (the
 * Pillow-SIMD approach); Pillow itself uses 22 bits, so results may differ by one level. */
#define PRECISION_BITS 14
#define RC_SLACK 16    /* padding after row buffers: the SIMD passes read/write a little past */
#define MAX_SCANS 1000 /* progressive JPEGs with more scans are refused (decode-time bombs) */

typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
  int eof_warning;
  char msg[JMSG_LENGTH_MAX];
} rc_errmgr;

typedef struct {
  int ksize;
  int identity; /* every output sample is one input sample: a plain copy does */
  int *bounds;  /* [out][2]: first input index, number of taps */
  int16_t *kk;  /* [out][ksize] fixed-point weights, ksize even, zero padded */
  size_t bounds_cap, kk_cap;
} rc_coeffs;

struct rc_worker {
  struct jpeg_decompress_struct cinfo;
  struct jpeg_progress_mgr progress;
  rc_errmgr err;
  uint8_t *row, *tmp, *line, *hline;
  double *prekk;
  size_t row_cap, tmp_cap, line_cap, hline_cap, prekk_cap;
  rc_coeffs ch, cv;
  uint8_t *src_plane[RC_MAX_PLANES], *out_plane[RC_MAX_PLANES]; /* rc_decode_planes */
  size_t src_cap[RC_MAX_PLANES], out_cap[RC_MAX_PLANES];
};

/* ---- libjpeg error handling: never exit, never print ---- */

static void rc_error_exit(j_common_ptr ci) {
  rc_errmgr *e = (rc_errmgr *)ci->err;
  ci->err->format_message(ci, e->msg);
  longjmp(e->jb, 1);
}

static void rc_output_message(j_common_ptr ci) {
  (void)ci;
}

static void rc_emit_message(j_common_ptr ci, int level) {
  if (level < 0) { /* warnings: remember truncation, print nothing */
    if (ci->err->msg_code == JWRN_JPEG_EOF) ((rc_errmgr *)ci->err)->eof_warning = 1;
    ci->err->num_warnings++;
  }
}

static void rc_progress(j_common_ptr ci) {
  j_decompress_ptr d = (j_decompress_ptr)ci;
  if (d->input_scan_number > MAX_SCANS) {
    rc_errmgr *e = (rc_errmgr *)ci->err;
    snprintf(e->msg, sizeof e->msg, "more than %d progressive scans", MAX_SCANS);
    longjmp(e->jb, 1);
  }
}

static int grow(void **p, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  size_t n = need + need / 2;
  void *q = realloc(*p, n);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

static int create_decompressor(rc_worker *w) {
  w->cinfo.err = jpeg_std_error(&w->err.pub);
  w->err.pub.error_exit = rc_error_exit;
  w->err.pub.output_message = rc_output_message;
  w->err.pub.emit_message = rc_emit_message;
  if (setjmp(w->err.jb)) return -1;
  jpeg_create_decompress(&w->cinfo);
  w->progress.progress_monitor = rc_progress;
  w->cinfo.progress = &w->progress;
  return 0;
}

rc_worker *rc_worker_new(void) {
  rc_worker *w = calloc(1, sizeof *w);
  if (w && create_decompressor(w)) {
    free(w);
    return NULL;
  }
  return w;
}

void rc_worker_free(rc_worker *w) {
  if (!w) return;
  jpeg_destroy_decompress(&w->cinfo);
  free(w->row);
  free(w->tmp);
  free(w->line);
  free(w->hline);
  free(w->prekk);
  free(w->ch.bounds);
  free(w->ch.kk);
  free(w->cv.bounds);
  free(w->cv.kk);
  for (int c = 0; c < RC_MAX_PLANES; c++) free(w->src_plane[c]), free(w->out_plane[c]);
  free(w);
}

/* ---- resampling coefficients (Pillow's precompute_coeffs + normalize_coeffs_8bpc) ---- */

static double bilinear_filter(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

static double box_filter(double x) {
  return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0;
}

/* Drops the zero weights at both ends of every kernel (an upscaling bilinear kernel has two
 * live taps of Pillow's window of three or four) and narrows ksize to the widest that is left,
 * so the horizontal pass runs fewer tap pairs. The results are unchanged. */
static void trim_zero_taps(rc_coeffs *c, int out_size) {
  const int ksize = c->ksize;
  int widest = 0;
  for (int xx = 0; xx < out_size; xx++) {
    int16_t *kk = c->kk + (size_t)xx * ksize;
    int n = c->bounds[2 * xx + 1], first = 0;
    while (first < n && kk[first] == 0) first++;
    while (n > first && kk[n - 1] == 0) n--;
    if (n == first) first = n = 0; /* all zero: keep one (zero) tap at xmin */
    memmove(kk, kk + first, sizeof(int16_t) * (size_t)(n - first));
    for (int x = n - first; x < ksize; x++) kk[x] = 0;
    c->bounds[2 * xx] += first;
    c->bounds[2 * xx + 1] = n - first;
    if (n - first > widest) widest = n - first;
  }
  int narrow = (widest + 1) & ~1; /* even: the passes take taps in pairs */
  if (narrow < 2) narrow = 2;
  if (narrow >= ksize) return;
  for (int xx = 1; xx < out_size; xx++) /* repack in place at the narrower stride */
    memmove(c->kk + (size_t)xx * narrow, c->kk + (size_t)xx * ksize, sizeof(int16_t) * narrow);
  c->ksize = narrow;
}

static int precompute(rc_worker *w, rc_coeffs *c, int in_size, double in0, double in1, int out_size,
                      int interp) {
  double scale = (in1 - in0) / out_size;
  c->identity = scale == 1.0 && in0 == floor(in0);
  if (interp == RC_INTERP_NEAREST) { /* Pillow's affine nearest: one tap */
    c->ksize = 2;
    if (grow((void **)&c->bounds, &c->bounds_cap, sizeof(int) * 2 * out_size) ||
        grow((void **)&c->kk, &c->kk_cap, sizeof(int16_t) * 2 * out_size))
      return -1;
    double v = in0 + scale * 0.5; /* accumulated like Pillow's affine_scale */
    for (int xx = 0; xx < out_size; xx++, v += scale) {
      int x = v < 0.0 ? 0 : (int)v;
      if (x > in_size - 1) x = in_size - 1;
      c->bounds[2 * xx] = x;
      c->bounds[2 * xx + 1] = 1;
      c->kk[2 * xx] = 1 << PRECISION_BITS;
      c->kk[2 * xx + 1] = 0;
    }
    return 0;
  }
  double (*filter)(double) = interp == RC_INTERP_AREA ? box_filter : bilinear_filter;
  double support = interp == RC_INTERP_AREA ? 0.5 : 1.0;
  double filterscale = scale < 1.0 ? 1.0 : scale;
  support *= filterscale;
  int ksize = (int)ceil(support) * 2 + 2; /* Pillow's + 1, rounded up to even */
  c->ksize = ksize;
  size_t n = (size_t)out_size * ksize;
  if (grow((void **)&c->bounds, &c->bounds_cap, sizeof(int) * 2 * out_size) ||
      grow((void **)&c->kk, &c->kk_cap, sizeof(int16_t) * (n + 8)) || /* SIMD over-read */
      grow((void **)&w->prekk, &w->prekk_cap, sizeof(double) * ksize))
    return -1;
  double ss = 1.0 / filterscale;
  for (int xx = 0; xx < out_size; xx++) {
    double center = in0 + (xx + 0.5) * scale;
    int xmin = (int)(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = (int)(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    if (xmax < 0) xmax = 0;
    double ww = 0.0, *k = w->prekk;
    for (int x = 0; x < xmax; x++) {
      k[x] = filter((x + xmin - center + 0.5) * ss);
      ww += k[x];
    }
    int16_t *kk = c->kk + (size_t)xx * ksize;
    for (int x = 0; x < ksize; x++) { /* bilinear and box weights are in [0, 1] */
      double v = x < xmax && ww != 0.0 ? k[x] / ww : 0.0;
      kk[x] = (int16_t)(0.5 + v * (1 << PRECISION_BITS));
    }
    c->bounds[2 * xx] = xmin;
    c->bounds[2 * xx + 1] = xmax;
  }
  trim_zero_taps(c, out_size);
  return 0;
}

static inline __attribute__((unused)) uint8_t clip8(int32_t in) {
  if (in >= (1 << PRECISION_BITS << 8)) return 255;
  if (in <= 0) return 0;
  return (uint8_t)(in >> PRECISION_BITS);
}

/* Horizontal pass over one row of 3-channel pixels, mirrored when `flip`. Every output pixel
 * runs all ksize taps (the kernel is zero padded), so the loop has no data-dependent branch:
 * source rows must stay readable ksize pixels past the last one used (callers pad them,
 * see hpass_slack). Writes one byte past the row. */
static inline __attribute__((always_inline)) void hpass_k(const uint8_t *in, uint8_t *out,
                                                          int out_w, const rc_coeffs *c, int flip,
                                                          const int ksize) {
#ifdef __SSE2__
  const __m128i zero = _mm_setzero_si128();
  const __m128i half = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
  for (int d = 0; d < out_w; d++) { /* destinations in order: each 4-byte store is overwritten */
    const int xx = flip ? out_w - 1 - d : d;
    const int16_t *k = c->kk + (size_t)xx * ksize;
    const uint8_t *p = in + (size_t)c->bounds[2 * xx] * 3;
    __m128i acc = half;
    for (int x = 0; x < ksize; x += 2) { /* [r0 r1 g0 g1 b0 b1 _ _] . [k0 k1 ...] */
      int32_t a, b, kp;
      memcpy(&a, p + 3 * x, 4);
      memcpy(&b, p + 3 * x + 3, 4);
      memcpy(&kp, k + x, 4);
      __m128i pix = _mm_unpacklo_epi8(_mm_cvtsi32_si128(a), _mm_cvtsi32_si128(b));
      pix = _mm_unpacklo_epi8(pix, zero);
      acc = _mm_add_epi32(acc, _mm_madd_epi16(pix, _mm_set1_epi32(kp)));
    }
    acc = _mm_srai_epi32(acc, PRECISION_BITS);
    int32_t v = _mm_cvtsi128_si32(_mm_packus_epi16(_mm_packs_epi32(acc, acc), zero));
    memcpy(out + 3 * d, &v, 4);
  }
#else
  for (int xx = 0; xx < out_w; xx++) {
    const int16_t *k = c->kk + (size_t)xx * ksize;
    const uint8_t *p = in + (size_t)c->bounds[2 * xx] * 3;
    int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
    for (int x = 0; x < ksize; x++) {
      s0 += p[3 * x] * k[x];
      s1 += p[3 * x + 1] * k[x];
      s2 += p[3 * x + 2] * k[x];
    }
    uint8_t *d = out + 3 * (flip ? out_w - 1 - xx : xx);
    d[0] = clip8(s0);
    d[1] = clip8(s1);
    d[2] = clip8(s2);
  }
#endif
}

/* The common kernel sizes get their own fully unrolled copy of the loop. */
static void hpass(const uint8_t *in, uint8_t *out, int out_w, const rc_coeffs *c, int flip) {
  switch (c->ksize) {
    case 4:
      hpass_k(in, out, out_w, c, flip, 4);
      break;
    case 6:
      hpass_k(in, out, out_w, c, flip, 6);
      break;
    case 8:
      hpass_k(in, out, out_w, c, flip, 8);
      break;
    default:
      hpass_k(in, out, out_w, c, flip, c->ksize);
  }
}

/* Bytes a row given to hpass must stay readable past its last pixel. */
static size_t hpass_slack(const rc_coeffs *c) {
  return (size_t)c->ksize * 3 + RC_SLACK;
}

/* Vertical pass: one output row from ymax rows of tmp starting at ymin. */
static void vpass(const uint8_t *tmp, size_t stride, size_t width, int ymin, int ymax,
                  const int16_t *k, uint8_t *line) {
  size_t i = 0;
  const uint8_t *base = tmp + (size_t)ymin * stride;
#ifdef __SSE2__
  const __m128i zero = _mm_setzero_si128();
  const __m128i half = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
  for (; i + 16 <= width; i += 16) {
    __m128i a0 = half, a1 = half, a2 = half, a3 = half;
    for (int y = 0; y < ymax; y += 2) { /* ksize is even: k[ymax] exists (zero) */
      const uint8_t *p = base + (size_t)y * stride + i;
      __m128i r0 = _mm_loadu_si128((const __m128i *)p);
      __m128i r1 = y + 1 < ymax ? _mm_loadu_si128((const __m128i *)(p + stride)) : zero;
      int32_t kp;
      memcpy(&kp, k + y, 4);
      __m128i kv = _mm_set1_epi32(y + 1 < ymax ? kp : (uint16_t)k[y]);
      __m128i lo = _mm_unpacklo_epi8(r0, r1), hi = _mm_unpackhi_epi8(r0, r1);
      a0 = _mm_add_epi32(a0, _mm_madd_epi16(_mm_unpacklo_epi8(lo, zero), kv));
      a1 = _mm_add_epi32(a1, _mm_madd_epi16(_mm_unpackhi_epi8(lo, zero), kv));
      a2 = _mm_add_epi32(a2, _mm_madd_epi16(_mm_unpacklo_epi8(hi, zero), kv));
      a3 = _mm_add_epi32(a3, _mm_madd_epi16(_mm_unpackhi_epi8(hi, zero), kv));
    }
    a0 = _mm_srai_epi32(a0, PRECISION_BITS);
    a1 = _mm_srai_epi32(a1, PRECISION_BITS);
    a2 = _mm_srai_epi32(a2, PRECISION_BITS);
    a3 = _mm_srai_epi32(a3, PRECISION_BITS);
    __m128i v = _mm_packus_epi16(_mm_packs_epi32(a0, a1), _mm_packs_epi32(a2, a3));
    _mm_storeu_si128((__m128i *)(line + i), v);
  }
#endif
  for (; i < width; i++) {
    int32_t s = 1 << (PRECISION_BITS - 1);
    for (int y = 0; y < ymax; y++) s += base[(size_t)y * stride + i] * k[y];
    line[i] = clip8(s);
  }
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

/* Stores one RGB output row (already mirrored if flipped): channel order, layout, dtype (via the
 * lookup table). One pass over the row writes all three channels. */
#define STORE_ROW(T, CONV)                                                               \
  do {                                                                                   \
    T *base = (T *)out;                                                                  \
    if (o->layout == RC_LAYOUT_NHWC) {                                                   \
      T *d = base + (size_t)yy * W * 3;                                                  \
      for (int x = 0; x < W; x++, line += 3, d += 3) {                                   \
        d[0] = CONV(0, line[c0]);                                                        \
        d[1] = CONV(1, line[1]);                                                         \
        d[2] = CONV(2, line[c2]);                                                        \
      }                                                                                  \
    } else {                                                                             \
      T *d0 = base + (size_t)yy * W, *d1 = d0 + (size_t)H * W, *d2 = d1 + (size_t)H * W; \
      for (int x = 0; x < W; x++, line += 3) {                                           \
        d0[x] = CONV(0, line[c0]);                                                       \
        d1[x] = CONV(1, line[1]);                                                        \
        d2[x] = CONV(2, line[c2]);                                                       \
      }                                                                                  \
    }                                                                                    \
  } while (0)

#define CONV_U8(c, v) (v)
#define CONV_LUT(c, v) (lut[(c)*256 + (v)])

/* The common uint8 NCHW case: restrict lets the compiler vectorise the de-interleave. */
static void store_planes_u8(const uint8_t *restrict line, uint8_t *restrict d0,
                            uint8_t *restrict d1, uint8_t *restrict d2, int W) {
  for (int x = 0; x < W; x++) {
    d0[x] = line[3 * x];
    d1[x] = line[3 * x + 1];
    d2[x] = line[3 * x + 2];
  }
}

static void store_row(const rc_opts *o, const uint8_t *line, void *out, int yy) {
  int W = o->out_w, H = o->out_h;
  int c0 = o->bgr ? 2 : 0, c2 = o->bgr ? 0 : 2;
  if (o->itemsize == 1) {
    if (!o->bgr && o->layout == RC_LAYOUT_NHWC) {
      memcpy((uint8_t *)out + (size_t)yy * W * 3, line, (size_t)W * 3);
      return;
    }
    if (o->layout == RC_LAYOUT_NCHW) {
      uint8_t *plane = (uint8_t *)out + (size_t)yy * W;
      const size_t n = (size_t)H * W;
      store_planes_u8(line, plane + (size_t)c0 * n, plane + n, plane + (size_t)c2 * n, W);
      return;
    }
    STORE_ROW(uint8_t, CONV_U8);
  } else if (o->itemsize == 2) {
    const uint16_t *lut = o->lut;
    STORE_ROW(uint16_t, CONV_LUT);
  } else {
    const uint32_t *lut = o->lut;
    STORE_ROW(uint32_t, CONV_LUT);
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

static int check_input(const uint8_t *data, size_t len, const rc_opts *o, char *err) {
  err[0] = 0;
  if (len == 0) return snprintf(err, RC_ERRLEN, "empty buffer"), RC_EMPTY;
  if (!is_jpeg(data, len)) return snprintf(err, RC_ERRLEN, "not a JPEG"), RC_UNSUPPORTED;
  if (o->out_w <= 0 || o->out_h <= 0)
    return snprintf(err, RC_ERRLEN, "output size must be positive"), RC_BAD_PARAM;
  return RC_OK;
}

static int fail(struct jpeg_decompress_struct *ci, char *err, int status, const char *msg);

/* After jpeg_read_header: refuses an image over the pixel limit (before anything is allocated
 * for it) and intersects the crop {x, y, w, h} (or the whole image) with the image. */
static int crop_window(struct jpeg_decompress_struct *ci, const int32_t *crop, const rc_opts *o,
                       int64_t *x0, int64_t *y0, int64_t *x1, int64_t *y1, char *err) {
  const int W = (int)ci->image_width, H = (int)ci->image_height;
  if ((uint64_t)W * (uint64_t)H > o->max_pixels) {
    char msg[RC_ERRLEN];
    snprintf(msg, sizeof msg, "%dx%d image is over the limit of %llu pixels", W, H,
             (unsigned long long)o->max_pixels);
    return fail(ci, err, RC_TOO_LARGE, msg);
  }
  *x0 = 0, *y0 = 0, *x1 = W, *y1 = H;
  if (crop) {
    *x0 = crop[0] > 0 ? crop[0] : 0;
    *y0 = crop[1] > 0 ? crop[1] : 0;
    *x1 = (int64_t)crop[0] + crop[2] < W ? (int64_t)crop[0] + crop[2] : W;
    *y1 = (int64_t)crop[1] + crop[3] < H ? (int64_t)crop[1] + crop[3] : H;
    if (*x1 <= *x0 || *y1 <= *y0)
      return fail(ci, err, RC_BAD_PARAM, "crop window misses the image");
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

static int fail(struct jpeg_decompress_struct *ci, char *err, int status, const char *msg) {
  jpeg_abort_decompress(ci);
  snprintf(err, RC_ERRLEN, "%s", msg);
  return status;
}

int rc_decode(rc_worker *w, const uint8_t *data, size_t len, const int32_t *crop, int flip,
              const rc_opts *o, void *out, char *err) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  const int bad = check_input(data, len, o, err);
  if (bad) return bad;
  w->err.eof_warning = 0;
  w->err.msg[0] = 0;
  if (setjmp(w->err.jb)) { /* only w and err are used here: both unchanged since setjmp */
    jpeg_abort_decompress(ci);
    snprintf(err, RC_ERRLEN, "JPEG: %s", w->err.msg[0] ? w->err.msg : "decode error");
    return RC_CORRUPT;
  }
  jpeg_mem_src(ci, data, (unsigned long)len);
  jpeg_read_header(ci, TRUE);
  const int W = (int)ci->image_width, H = (int)ci->image_height;
  int64_t x0, y0, x1, y1;
  const int refused = crop_window(ci, crop, o, &x0, &y0, &x1, &y1, err);
  if (refused) return refused;
  int nch;
  switch (ci->jpeg_color_space) {
    case JCS_GRAYSCALE:
    case JCS_YCbCr:
    case JCS_RGB:
      ci->out_color_space = JCS_RGB; /* libjpeg-turbo expands grayscale itself */
      nch = 3;
      break;
    case JCS_CMYK:
    case JCS_YCCK: /* libjpeg cannot give RGB from these: take CMYK and convert */
      ci->out_color_space = JCS_CMYK;
      nch = 4;
      break;
    default:
      return fail(ci, err, RC_UNSUPPORTED, "JPEG colour space left to the fallback");
  }

  const int num = rc_dct_scale_num((int)(x1 - x0), (int)(y1 - y0), o->out_w, o->out_h, o->dct_mode);
  ci->scale_num = (unsigned)num;
  ci->scale_denom = 8;
  jpeg_calc_output_dimensions(ci);
  const int SW = (int)ci->output_width, SH = (int)ci->output_height;

  /* The crop in scaled pixels, and the whole pixels that cover it. */
  const double fx = (double)SW / W, fy = (double)SH / H;
  const double bx0 = x0 * fx, bx1 = x1 * fx, by0 = y0 * fy, by1 = y1 * fy;
  int rx0 = (int)floor(bx0), rx1 = (int)ceil(bx1), ry0 = (int)floor(by0), ry1 = (int)ceil(by1);
  if (rx0 > SW - 1) rx0 = SW - 1;
  if (ry0 > SH - 1) ry0 = SH - 1;
  if (rx1 > SW) rx1 = SW;
  if (ry1 > SH) ry1 = SH;
  if (rx1 <= rx0) rx1 = rx0 + 1;
  if (ry1 <= ry0) ry1 = ry0 + 1;
  const int rw = rx1 - rx0, rh = ry1 - ry0;
  if (precompute(w, &w->ch, rw, bx0 - rx0, bx1 - rx0, o->out_w, o->interp) ||
      precompute(w, &w->cv, rh, by0 - ry0, by1 - ry0, o->out_h, o->interp))
    return fail(ci, err, RC_NOMEM, "out of memory (coefficients)");
  /* Only the rows the vertical filter touches are decoded. */
  int first = rh, last = 0;
  for (int yy = 0; yy < o->out_h; yy++) {
    int a = w->cv.bounds[2 * yy], b = a + w->cv.bounds[2 * yy + 1];
    if (w->cv.bounds[2 * yy + 1] == 0) continue;
    if (a < first) first = a;
    if (b > last) last = b;
  }
  if (last <= first) first = 0, last = 1;
  for (int yy = 0; yy < o->out_h; yy++) w->cv.bounds[2 * yy] -= first;
  const int R0 = ry0 + first, R1 = ry0 + last, nrows = last - first;
  const size_t out_stride = (size_t)o->out_w * 3;
  if (grow((void **)&w->line, &w->line_cap, (size_t)rw * 3 + hpass_slack(&w->ch)) ||
      grow((void **)&w->hline, &w->hline_cap, out_stride + RC_SLACK))
    return fail(ci, err, RC_NOMEM, "out of memory (resample buffers)");

  jpeg_start_decompress(ci);
  JDIMENSION xoff = 0, xw = ci->output_width;
  if (o->roi && rw < SW) {
    /* Chroma upsampling treats the cropped row's ends as image edges: keep one iMCU of margin
     * on both sides so the columns we use are the same as in a full decode. */
    int margin = ci->max_h_samp_factor * ci->min_DCT_scaled_size;
    int a = rx0 - margin > 0 ? rx0 - margin : 0, b = rx1 + margin < SW ? rx1 + margin : SW;
    if (b - a < SW) {
      xoff = (JDIMENSION)a;
      xw = (JDIMENSION)(b - a);
      jpeg_crop_scanline(ci, &xoff, &xw); /* widens to whole iMCU columns */
    }
  }
  /* The rows the vertical filter needs are decoded straight into tmp (no copy), a few per
   * call; the vertical pass then runs first, over whole rows (SIMD-friendly), so the costlier
   * per-pixel horizontal pass sees only out_h rows. */
  const size_t row_stride = (size_t)ci->output_width * 3;
  const size_t skip = (size_t)(rx0 - (int)xoff) * 3; /* the crop's first byte in a row */
  if (grow((void **)&w->tmp, &w->tmp_cap, row_stride * nrows + hpass_slack(&w->ch)) ||
      grow((void **)&w->row, &w->row_cap, (size_t)ci->output_width * nch + RC_SLACK))
    return fail(ci, err, RC_NOMEM, "out of memory (row buffers)");
  if (o->roi && R0 > 0) jpeg_skip_scanlines(ci, (JDIMENSION)R0);
  const int inverted = nch == 4 && ci->saw_Adobe_marker;
  const int end = o->roi ? R1 : SH; /* without roi the whole image is decoded (for measuring) */
  while ((int)ci->output_scanline < end) {
    const int r = (int)ci->output_scanline;
    JSAMPROW rows[16];
    int n = 1;
    if (r < R0 || r >= R1 || nch == 4) { /* outside the crop (no roi), or CMYK to convert */
      rows[0] = w->row;
    } else {
      n = R1 - r < 16 ? R1 - r : 16;
      for (int i = 0; i < n; i++) rows[i] = w->tmp + (size_t)(r - R0 + i) * row_stride;
    }
    const int got = (int)jpeg_read_scanlines(ci, rows, (JDIMENSION)n);
    if (got < 1) return fail(ci, err, RC_CORRUPT, "JPEG: no rows");
    if (nch == 4 && r >= R0 && r < R1)
      cmyk_to_rgb(w->row, w->tmp + (size_t)(r - R0) * row_stride, (int)ci->output_width, inverted);
  }
  jpeg_abort_decompress(ci); /* the rows below the crop are never decoded */

  for (int yy = 0; yy < o->out_h; yy++) {
    const int ymin = w->cv.bounds[2 * yy], ytaps = w->cv.bounds[2 * yy + 1];
    const uint8_t *vrow = w->line;
    if (w->cv.identity)
      vrow = w->tmp + (size_t)ymin * row_stride + skip;
    else
      vpass(w->tmp + skip, row_stride, (size_t)rw * 3, ymin, ytaps,
            w->cv.kk + (size_t)yy * w->cv.ksize, w->line);
    if (w->ch.identity && !flip) {
      store_row(o, vrow + (size_t)w->ch.bounds[0] * 3, out, yy);
    } else {
      hpass(vrow, w->hline, o->out_w, &w->ch, flip);
      store_row(o, w->hline, out, yy);
    }
  }
  if (w->err.eof_warning) {
    snprintf(err, RC_ERRLEN, "JPEG: premature end of data (image incomplete)");
    return RC_TRUNCATED;
  }
  return RC_OK;
}

/* ---- YCbCr planes: decode without colour conversion or upsampling, resample each plane ---- */

/* Horizontal pass over one row of single-channel samples; `line` holds the row from column
 * `off` on, readable ksize bytes past the last sample used. */
static inline __attribute__((always_inline)) void hpass1_k(const uint8_t *line, int off,
                                                           uint8_t *out, int out_n,
                                                           const rc_coeffs *c, const int ksize) {
  for (int xx = 0; xx < out_n; xx++) {
    const int16_t *k = c->kk + (size_t)xx * ksize;
    const uint8_t *p = line + (c->bounds[2 * xx] - off);
    int32_t s = 1 << (PRECISION_BITS - 1);
    for (int x = 0; x < ksize; x++) s += p[x] * k[x];
    out[xx] = clip8(s);
  }
}

#ifdef __SSE2__
static inline __m128i load32(const uint8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm_cvtsi32_si128(v);
}

static inline __m128i load16(const uint8_t *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return _mm_cvtsi32_si128(v);
}

/* Four outputs' (rounded, shifted) sums as four bytes. */
static inline int32_t pack4(__m128i sums) {
  sums = _mm_srai_epi32(_mm_add_epi32(sums, _mm_set1_epi32(1 << (PRECISION_BITS - 1))),
                        PRECISION_BITS);
  const __m128i zero = _mm_setzero_si128();
  return _mm_cvtsi128_si32(_mm_packus_epi16(_mm_packs_epi32(sums, zero), zero));
}

/* SIMD horizontal pass for single-channel rows, four outputs per step: ksize 2 and 4 gather the
 * taps of four outputs into one register; ksize 6 and 8 take eight taps per output (lanes past
 * ksize are masked) and add the four partial sums across. Needs ksize + 8 readable bytes past
 * each row's last tap and 8 int16 past the last kernel (see precompute). */
static int hpass1_simd(const uint8_t *line, int off, uint8_t *out, int out_n, const rc_coeffs *c) {
  const int ksize = c->ksize;
  if (ksize != 2 && ksize != 4 && ksize != 6 && ksize != 8) return 0;
  const __m128i zero = _mm_setzero_si128();
  const __m128i mask6 = _mm_set_epi16(0, 0, -1, -1, -1, -1, -1, -1);
  int xx = 0;
  for (; xx + 4 <= out_n; xx += 4) {
    const uint8_t *p[4];
    for (int j = 0; j < 4; j++) p[j] = line + (c->bounds[2 * (xx + j)] - off);
    const int16_t *k = c->kk + (size_t)xx * ksize;
    __m128i sums;
    if (ksize == 2) {
      __m128i v = _mm_unpacklo_epi32(_mm_unpacklo_epi16(load16(p[0]), load16(p[1])),
                                     _mm_unpacklo_epi16(load16(p[2]), load16(p[3])));
      sums = _mm_madd_epi16(_mm_unpacklo_epi8(v, zero), _mm_loadu_si128((const __m128i *)k));
    } else if (ksize == 4) {
      __m128i v = _mm_unpacklo_epi64(_mm_unpacklo_epi32(load32(p[0]), load32(p[1])),
                                     _mm_unpacklo_epi32(load32(p[2]), load32(p[3])));
      __m128i m0 = _mm_madd_epi16(_mm_unpacklo_epi8(v, zero), _mm_loadu_si128((const __m128i *)k));
      __m128i m1 =
          _mm_madd_epi16(_mm_unpackhi_epi8(v, zero), _mm_loadu_si128((const __m128i *)(k + 8)));
      __m128 a = _mm_castsi128_ps(m0), b = _mm_castsi128_ps(m1);
      sums = _mm_add_epi32(_mm_castps_si128(_mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))),
                           _mm_castps_si128(_mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))));
    } else {
      __m128i m[4];
      for (int j = 0; j < 4; j++) {
        __m128i px = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)p[j]), zero);
        __m128i kv = _mm_loadu_si128((const __m128i *)(k + (size_t)j * ksize));
        if (ksize == 6) kv = _mm_and_si128(kv, mask6);
        m[j] = _mm_madd_epi16(px, kv);
      }
      __m128i t0 = _mm_add_epi32(_mm_unpacklo_epi32(m[0], m[1]), _mm_unpackhi_epi32(m[0], m[1]));
      __m128i t1 = _mm_add_epi32(_mm_unpacklo_epi32(m[2], m[3]), _mm_unpackhi_epi32(m[2], m[3]));
      sums = _mm_add_epi32(_mm_unpacklo_epi64(t0, t1), _mm_unpackhi_epi64(t0, t1));
    }
    int32_t v4 = pack4(sums);
    memcpy(out + xx, &v4, 4);
  }
  return xx;
}
#endif

static void hpass1(const uint8_t *line, int off, uint8_t *out, int out_n, const rc_coeffs *c) {
  int done = 0;
#ifdef __SSE2__
  done = hpass1_simd(line, off, out, out_n, c);
#endif
  if (done == out_n) return;
  /* the tail (fewer than four outputs), or every output for wide kernels */
  rc_coeffs tail = *c;
  tail.bounds += 2 * done;
  tail.kk += (size_t)done * c->ksize;
  hpass1_k(line, off, out + done, out_n - done, &tail, c->ksize);
}

static int round_up(int v, int m) {
  return (v + m - 1) / m * m;
}

/* Copies the last valid column and row into the padding, as libjpeg pads its own input. */
static void pad_plane(uint8_t *p, size_t stride, int w, int h, int pw, int ph) {
  for (int y = 0; y < h; y++)
    memset(p + (size_t)y * stride + w, p[(size_t)y * stride + w - 1], pw - w);
  for (int y = h; y < ph; y++) memcpy(p + (size_t)y * stride, p + (size_t)(h - 1) * stride, pw);
}

/* One past the last input row that resampling [in0, in1) to out_size rows reads (with a row to
 * spare; precompute's windows are centre +- support, rounded). */
static int end_row(double in0, double in1, int out_size, int in_size, int interp) {
  const double scale = (in1 - in0) / out_size;
  const double support = (interp == RC_INTERP_BILINEAR ? 1.0 : 0.5) * (scale < 1.0 ? 1.0 : scale);
  const int end = (int)(in0 + (out_size - 0.5) * scale + support + 0.5) + 1;
  return end < in_size ? end : in_size;
}

int rc_decode_planes(rc_worker *w, const uint8_t *data, size_t len, const int32_t *crop,
                     const rc_opts *o, int gray, rc_planes *out, char *err) {
  struct jpeg_decompress_struct *ci = &w->cinfo;
  const int bad = check_input(data, len, o, err);
  if (bad) return bad;
  w->err.eof_warning = 0;
  w->err.msg[0] = 0;
  if (setjmp(w->err.jb)) {
    jpeg_abort_decompress(ci);
    snprintf(err, RC_ERRLEN, "JPEG: %s", w->err.msg[0] ? w->err.msg : "decode error");
    return RC_CORRUPT;
  }
  jpeg_mem_src(ci, data, (unsigned long)len);
  jpeg_read_header(ci, TRUE);
  int64_t x0, y0, x1, y1;
  const int refused = crop_window(ci, crop, o, &x0, &y0, &x1, &y1, err);
  if (refused) return refused;
  const int ncomp = ci->num_components;
  const int ycc = ci->jpeg_color_space == JCS_YCbCr && ncomp == 3;
  if (!ycc && !(ci->jpeg_color_space == JCS_GRAYSCALE && ncomp == 1))
    return fail(ci, err, RC_UNSUPPORTED, "not a YCbCr or greyscale JPEG");
  ci->scale_num =
      (unsigned)rc_dct_scale_num((int)(x1 - x0), (int)(y1 - y0), o->out_w, o->out_h, o->dct_mode);
  ci->scale_denom = 8;
  ci->raw_data_out = TRUE;
  jpeg_start_decompress(ci);

  /* Output planes: 4:2:0 for colour (OpenCV's default, hence MXNet's), padded to whole MCUs. */
  const int nout = gray ? 1 : 3, mcu = gray ? 8 : 16;
  const int pw = round_up(o->out_w, mcu), ph = round_up(o->out_h, mcu);
  out->nplanes = nout;
  for (int c = 0; c < nout; c++) {
    const int sub = c ? 2 : 1;
    out->width[c] = (o->out_w + sub - 1) / sub;
    out->height[c] = (o->out_h + sub - 1) / sub;
    out->stride[c] = (size_t)(pw / sub);
    if (grow((void **)&w->out_plane[c], &w->out_cap[c], out->stride[c] * (ph / sub)))
      return fail(ci, err, RC_NOMEM, "out of memory (planes)");
    out->data[c] = w->out_plane[c];
  }
  const int nsrc = ycc && !gray ? 3 : 1; /* the source planes that are resampled */

  /* Per source plane: its size, its scale against the image, the rows the filter needs.
   * (Copied: jpeg_abort_decompress frees comp_info before the planes are resampled.) */
  int last_row[RC_MAX_PLANES], imcu_rows[RC_MAX_PLANES], need_imcu = 0;
  int sw[RC_MAX_PLANES], sh[RC_MAX_PLANES];
  double sx[RC_MAX_PLANES], sy[RC_MAX_PLANES];
  size_t sstride[RC_MAX_PLANES];
  for (int c = 0; c < ncomp; c++) {
    jpeg_component_info *cp = &ci->comp_info[c];
    imcu_rows[c] = cp->v_samp_factor * cp->DCT_scaled_size;
    sstride[c] = (size_t)cp->width_in_blocks * cp->DCT_scaled_size;
    sw[c] = (int)cp->downsampled_width;
    sh[c] = (int)cp->downsampled_height;
    sx[c] = (double)cp->h_samp_factor * cp->DCT_scaled_size / (ci->max_h_samp_factor * DCTSIZE);
    sy[c] = (double)cp->v_samp_factor * cp->DCT_scaled_size / (ci->max_v_samp_factor * DCTSIZE);
    const size_t rows = (size_t)ci->total_iMCU_rows * imcu_rows[c];
    if (grow((void **)&w->src_plane[c], &w->src_cap[c], sstride[c] * rows + RC_SLACK))
      return fail(ci, err, RC_NOMEM, "out of memory (source planes)");
    last_row[c] = 0;
  }
  for (int c = 0; c < nsrc; c++) {
    const double oy = c ? 0.5 : 1.0, in0 = y0 * sy[c];
    const double in1 = in0 + (y1 - y0) * sy[c] * out->height[c] / (o->out_h * oy);
    last_row[c] = end_row(in0, in1, out->height[c], sh[c], o->interp);
    int n = (last_row[c] + imcu_rows[c] - 1) / imcu_rows[c];
    if (n > need_imcu) need_imcu = n;
  }
  if (need_imcu > (int)ci->total_iMCU_rows) need_imcu = (int)ci->total_iMCU_rows;

  /* Decode the iMCU rows down to the last one the filters use. */
  const JDIMENSION step = (JDIMENSION)(ci->max_v_samp_factor * ci->min_DCT_scaled_size);
  for (int r = 0; r < need_imcu; r++) {
    JSAMPROW rows[RC_MAX_PLANES][4 * DCTSIZE];
    JSAMPARRAY planes[RC_MAX_PLANES];
    for (int c = 0; c < ncomp; c++) {
      for (int i = 0; i < imcu_rows[c]; i++)
        rows[c][i] = w->src_plane[c] + ((size_t)r * imcu_rows[c] + i) * sstride[c];
      planes[c] = rows[c];
    }
    if (jpeg_read_raw_data(ci, planes, step) < 1) return fail(ci, err, RC_CORRUPT, "JPEG: no rows");
  }
  jpeg_abort_decompress(ci);
  if (w->err.eof_warning) {
    snprintf(err, RC_ERRLEN, "JPEG: premature end of data (image incomplete)");
    return RC_TRUNCATED;
  }

  /* Resample: vertical pass over the columns in use, then the horizontal pass. */
  for (int c = 0; c < nsrc; c++) {
    const double of = c ? 0.5 : 1.0;
    const int ow = out->width[c], oh = out->height[c];
    const double ix0 = x0 * sx[c], ix1 = ix0 + (x1 - x0) * sx[c] * ow / (o->out_w * of);
    const double iy0 = y0 * sy[c], iy1 = iy0 + (y1 - y0) * sy[c] * oh / (o->out_h * of);
    if (precompute(w, &w->ch, sw[c], ix0, ix1, ow, o->interp) ||
        precompute(w, &w->cv, sh[c], iy0, iy1, oh, o->interp))
      return snprintf(err, RC_ERRLEN, "out of memory (coefficients)"), RC_NOMEM;
    int cx0 = w->ch.bounds[0], cx1 = cx0 + 1;
    for (int xx = 0; xx < ow; xx++) {
      int a = w->ch.bounds[2 * xx], e = a + w->ch.bounds[2 * xx + 1];
      if (a < cx0) cx0 = a;
      if (e > cx1) cx1 = e;
    }
    if (grow((void **)&w->line, &w->line_cap, (size_t)(cx1 - cx0) + w->ch.ksize + RC_SLACK))
      return snprintf(err, RC_ERRLEN, "out of memory (resample buffers)"), RC_NOMEM;
    /* The zero taps at a row's end read past it: keep those bytes defined. */
    memset(w->line + (cx1 - cx0), 0, (size_t)w->ch.ksize + RC_SLACK);
    const uint8_t *src = w->src_plane[c];
    for (int yy = 0; yy < oh; yy++) {
      const int ymin = w->cv.bounds[2 * yy], ytaps = w->cv.bounds[2 * yy + 1];
      const uint8_t *srow = src + (size_t)ymin * sstride[c] + cx0;
      uint8_t *dst = out->data[c] + (size_t)yy * out->stride[c];
      if (w->cv.identity && w->ch.identity) {
        memcpy(dst, srow + (w->ch.bounds[0] - cx0), (size_t)ow);
        continue;
      }
      if (w->cv.identity) /* a copy: hpass1 reads past the row's end */
        memcpy(w->line, srow, (size_t)(cx1 - cx0));
      else
        vpass(src + cx0, sstride[c], (size_t)(cx1 - cx0), ymin, ytaps,
              w->cv.kk + (size_t)yy * w->cv.ksize, w->line);
      if (w->ch.identity)
        memcpy(dst, w->line + (w->ch.bounds[0] - cx0), (size_t)ow);
      else
        hpass1(w->line, cx0, dst, ow, &w->ch);
    }
  }
  for (int c = nsrc; c < nout; c++) /* colour from a greyscale JPEG: neutral chroma */
    memset(out->data[c], 128, out->stride[c] * (ph / 2));
  for (int c = 0; c < nsrc; c++) {
    const int sub = c ? 2 : 1;
    pad_plane(out->data[c], out->stride[c], out->width[c], out->height[c], pw / sub, ph / sub);
  }
  return RC_OK;
}
