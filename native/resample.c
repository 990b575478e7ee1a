/* recio resampler (see resample.h): Pillow's Resample.c in 14-bit fixed point with SSE2
 * (plain C loops where SSE2 is not compiled in). The vertical pass, both horizontal passes
 * (RGB rows and single-channel planes) and the RGB de-interleave also have AVX2 versions on
 * x86-64, chosen at run time (RECIO_SIMD=sse2 keeps to SSE2); AVX2 and SSE2 give the same
 * bytes.
 *
 * Coefficients follow Pillow's precompute_coeffs/normalize_coeffs_8bpc, with the zero taps at
 * both ends trimmed. The passes run every kernel at its full (even, zero-padded) width, so
 * their loops have no data-dependent branch; callers pad rows to make that safe.
 */
#include "resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decode_core.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

int rc_grow(void **p, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  size_t n = need + need / 2;
  void *q = realloc(*p, n);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

/* ---- resampling coefficients (Pillow's precompute_coeffs + normalize_coeffs_8bpc) ---- */

static inline double bilinear_filter(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

static inline double box_filter(double x) {
  return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0;
}

/* Narrows every kernel to `narrow` taps (>= the widest live one, even) in place. */
static void narrow_kernels(rc_coeffs *c, int out_size, int narrow) {
  for (int xx = 1; xx < out_size; xx++) /* repack at the narrower stride, in order */
    memmove(c->kk + (size_t)xx * narrow, c->kk + (size_t)xx * c->ksize, sizeof(int16_t) * narrow);
  c->ksize = narrow;
}

static int precompute(rc_coeffs *c, int in_size, double in0, double in1, int out_size, int interp) {
  double scale = (in1 - in0) / out_size;
  c->identity = scale == 1.0 && in0 == floor(in0);
  if (interp == RC_INTERP_NEAREST) { /* Pillow's affine nearest: one tap */
    c->ksize = 2;
    if (rc_grow((void **)&c->bounds, &c->bounds_cap, sizeof(int) * 2 * out_size) ||
        rc_grow((void **)&c->kk, &c->kk_cap, sizeof(int16_t) * 2 * out_size))
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
  double support = interp == RC_INTERP_AREA ? 0.5 : 1.0;
  double filterscale = scale < 1.0 ? 1.0 : scale;
  support *= filterscale;
  int ksize = (int)ceil(support) * 2 + 2; /* Pillow's + 1, rounded up to even */
  c->ksize = ksize;
  size_t n = (size_t)out_size * ksize;
  if (rc_grow((void **)&c->bounds, &c->bounds_cap, sizeof(int) * 2 * out_size) ||
      rc_grow((void **)&c->kk, &c->kk_cap, sizeof(int16_t) * (n + 8)) || /* SIMD over-read */
      rc_grow((void **)&c->prekk, &c->prekk_cap, (sizeof(double) + sizeof(int16_t)) * ksize))
    return -1;
  const double ss = 1.0 / filterscale;
  const int box = interp == RC_INTERP_AREA;
  int16_t *q = (int16_t *)(c->prekk + ksize); /* one kernel's quantised weights */
  int widest = 0;
  for (int xx = 0; xx < out_size; xx++) {
    double center = in0 + (xx + 0.5) * scale;
    int xmin = (int)(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = (int)(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    if (xmax < 0) xmax = 0;
    double ww = 0.0, *k = c->prekk;
    for (int x = 0; x < xmax; x++) {
      k[x] = box ? box_filter((x + xmin - center + 0.5) * ss)
                 : bilinear_filter((x + xmin - center + 0.5) * ss);
      ww += k[x];
    }
    /* Quantised by rounding the running sum, not each weight: the weights then add up to
     * exactly 1 << PRECISION_BITS however many taps share it, so a flat image stays flat
     * (rounding each of 2,000+ tiny weights on its own loses or gains whole levels). */
    int first = 0, n = ww != 0.0 ? xmax : 0;
    double sum = 0.0;
    int32_t before = 0;
    for (int x = 0; x < n; x++) { /* bilinear and box weights are in [0, 1] */
      sum += k[x] / ww;
      int32_t upto = (int32_t)(0.5 + sum * (1 << PRECISION_BITS));
      q[x] = (int16_t)(upto - before);
      before = upto;
    }
    /* The zero weights at both ends are dropped (an upscaling bilinear kernel has two live
     * taps of Pillow's window of three or four), so the passes run fewer tap pairs; the
     * results are unchanged. An all-zero kernel keeps one (zero) tap at xmin. */
    while (first < n && q[first] == 0) first++;
    while (n > first && q[n - 1] == 0) n--;
    if (n == first) first = n = 0;
    int16_t *kk = c->kk + (size_t)xx * ksize;
    for (int x = 0; x < ksize; x++) kk[x] = x < n - first ? q[first + x] : 0;
    c->bounds[2 * xx] = xmin + first;
    c->bounds[2 * xx + 1] = n - first;
    if (n - first > widest) widest = n - first;
  }
  int narrow = (widest + 1) & ~1; /* even: the passes take taps in pairs */
  if (narrow < 2) narrow = 2;
  if (narrow < ksize) narrow_kernels(c, out_size, narrow);
  return 0;
}

int rc_precompute(rc_coeffs *c, int in_size, double in0, double in1, int out_size, int interp) {
  if (c->valid && c->key_in_size == in_size && c->key_out_size == out_size &&
      c->key_interp == interp && c->key_in0 == in0 && c->key_in1 == in1)
    return 0;
  c->valid = 0;
  c->packed_key = 0;
  if (precompute(c, in_size, in0, in1, out_size, interp)) return -1;
  c->valid = 1;
  c->key_in_size = in_size;
  c->key_out_size = out_size;
  c->key_interp = interp;
  c->key_in0 = in0;
  c->key_in1 = in1;
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
static void hpass_1px(const uint8_t *in, uint8_t *out, int out_w, const rc_coeffs *c, int flip) {
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

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RC_HAVE_AVX2_PATH 1

static int use_avx2; /* set once by rc_simd_init, before any pool thread runs */
static int use_fma;  /* (with AVX2: the float32 store's line, NOTE [float store]) */

static int have_avx2(void) {
  return use_avx2;
}
#endif

int rc_simd_avx2(void) {
#ifdef RC_HAVE_AVX2_PATH
  return use_avx2;
#else
  return 0;
#endif
}

const char *rc_simd_init(void) {
#ifdef RC_HAVE_AVX2_PATH
  const char *simd = getenv("RECIO_SIMD");
  use_avx2 = __builtin_cpu_supports("avx2") && !(simd && strcmp(simd, "sse2") == 0);
  use_fma = use_avx2 && __builtin_cpu_supports("fma");
  if (use_avx2) return "avx2";
#endif
#ifdef __SSE2__
  return "sse2";
#else
  return "scalar"; /* built without SSE2 (not x86, say): the plain C loops run */
#endif
}

#ifdef RC_HAVE_AVX2_PATH

/* rc_vpass's sums for 32 columns per step, the last step ending at the row's end (over
 * columns the one before did: the same bytes again, and no one-column loop); returns the
 * columns done: all, or none for a row under 32. */
__attribute__((target("avx2"))) static size_t vpass_avx2(const uint8_t *base, size_t stride,
                                                         size_t width, int ymax, const int16_t *k,
                                                         uint8_t *line) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
  if (width < 32) return 0;
  for (size_t i = 0;; i += 32) {
    if (i + 32 > width) i = width - 32;
    __m256i a0 = half, a1 = half, a2 = half, a3 = half;
    for (int y = 0; y < ymax; y += 2) {
      const uint8_t *p = base + (size_t)y * stride + i;
      __m256i r0 = _mm256_loadu_si256((const __m256i *)p);
      __m256i r1 = y + 1 < ymax ? _mm256_loadu_si256((const __m256i *)(p + stride)) : zero;
      int32_t kp;
      memcpy(&kp, k + y, 4);
      __m256i kv = _mm256_set1_epi32(y + 1 < ymax ? kp : (uint16_t)k[y]);
      __m256i lo = _mm256_unpacklo_epi8(r0, r1), hi = _mm256_unpackhi_epi8(r0, r1);
      a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), kv));
      a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), kv));
      a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), kv));
      a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), kv));
    }
    a0 = _mm256_srai_epi32(a0, PRECISION_BITS);
    a1 = _mm256_srai_epi32(a1, PRECISION_BITS);
    a2 = _mm256_srai_epi32(a2, PRECISION_BITS);
    a3 = _mm256_srai_epi32(a3, PRECISION_BITS);
    /* every step works within 128-bit lanes, so the packs come out in column order */
    __m256i v = _mm256_packus_epi16(_mm256_packs_epi32(a0, a1), _mm256_packs_epi32(a2, a3));
    _mm256_storeu_si256((__m256i *)(line + i), v);
    if (i + 32 == width) return width;
  }
}

/* NOTE [hpass avx2]: the horizontal pass over RGB rows, four output pixels per step, two in
 * each 256-bit register (one per 128-bit lane), four taps per group: a 16-byte load at the
 * group's first pixel holds its four pixels (12 bytes); two in-lane shuffles spread taps (0, 1)
 * and (2, 3) to 16-bit [r r g g b b 0 0], and pmaddwd with the pair's weights, broadcast per
 * lane, sums each channel's two taps. A kernel of 4k + 2 taps ends with a half group. The four
 * pixels are packed to 12 bytes and stored as 16 (the next step overwrites the 4 past them).
 * The sums are the SSE2 path's (integers, added in another order): the same bytes. Per image,
 * rc_hpass_pack lays the weights out as the steps take them (for the image's flip: a pair's
 * per lane, each tap pair broadcast), so a step loads them whole instead of gathering and
 * broadcasting them (1.03-1.08x the resample, BENCHMARKS.md); without it the pass broadcasts
 * them itself. */
/* The in-lane shuffles that spread a group's taps (0, 1) and (2, 3) to 16-bit
 * [r r g g b b 0 0] (NOTE [hpass avx2]). */
static inline __attribute__((always_inline, target("avx2"))) __m256i taps01(void) {
  return _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1, 0, -1, 3, -1, 1,
                          -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
}

static inline __attribute__((always_inline, target("avx2"))) __m256i taps23(void) {
  return _mm256_setr_epi8(6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1, 6, -1, 9, -1,
                          7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
}

/* 16 bytes at a in the low lane, 16 at b in the high one. */
static inline __attribute__((always_inline, target("avx2"))) __m256i load_pair(const uint8_t *a,
                                                                               const uint8_t *b) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                 _mm_loadu_si128((const __m128i *)b), 1);
}

static inline __attribute__((always_inline, target("avx2"))) __m256i hpass_avx2_pair(
    const uint8_t *in, const int *bounds, const int16_t *kk, int xa, int xb, const int ksize) {
  const __m256i lo = taps01(), hi = taps23();
  const int16_t *ka = kk + (size_t)xa * ksize, *kb = kk + (size_t)xb * ksize;
  const uint8_t *pa = in + (size_t)bounds[2 * xa] * 3, *pb = in + (size_t)bounds[2 * xb] * 3;
  __m256i acc = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
  int t = 0;
  for (; t + 4 <= ksize; t += 4) {
    __m256i px = load_pair(pa + 3 * t, pb + 3 * t);
    __m256i kv =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(ka + t))),
                                _mm_loadl_epi64((const __m128i *)(kb + t)), 1);
    acc = _mm256_add_epi32(
        acc, _mm256_madd_epi16(_mm256_shuffle_epi8(px, lo), _mm256_shuffle_epi32(kv, 0x00)));
    acc = _mm256_add_epi32(
        acc, _mm256_madd_epi16(_mm256_shuffle_epi8(px, hi), _mm256_shuffle_epi32(kv, 0x55)));
  }
  if (t < ksize) { /* two taps left */
    int32_t wa, wb;
    memcpy(&wa, ka + t, 4);
    memcpy(&wb, kb + t, 4);
    __m256i px = load_pair(pa + 3 * t, pb + 3 * t);
    __m256i kv = _mm256_inserti128_si256(_mm256_set1_epi32(wa), _mm_set1_epi32(wb), 1);
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_shuffle_epi8(px, lo), kv));
  }
  return _mm256_srai_epi32(acc, PRECISION_BITS);
}

/* hpass_avx2_pair with the pair's weights packed (rc_hpass_pack): each tap pair's one load,
 * [a's two weights x4 | b's two weights x4]. */
static inline __attribute__((always_inline, target("avx2"))) __m256i hpass_avx2_packed(
    const uint8_t *in, const int *bounds, const __m256i *kv, int xa, int xb, const int ksize) {
  const __m256i lo = taps01(), hi = taps23();
  const uint8_t *pa = in + (size_t)bounds[2 * xa] * 3, *pb = in + (size_t)bounds[2 * xb] * 3;
  __m256i acc = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
  int t = 0;
  for (; t + 4 <= ksize; t += 4, kv += 2) {
    __m256i px = load_pair(pa + 3 * t, pb + 3 * t);
    acc = _mm256_add_epi32(acc,
                           _mm256_madd_epi16(_mm256_shuffle_epi8(px, lo), _mm256_loadu_si256(kv)));
    acc = _mm256_add_epi32(
        acc, _mm256_madd_epi16(_mm256_shuffle_epi8(px, hi), _mm256_loadu_si256(kv + 1)));
  }
  if (t < ksize) { /* two taps left */
    __m256i px = load_pair(pa + 3 * t, pb + 3 * t);
    acc = _mm256_add_epi32(acc,
                           _mm256_madd_epi16(_mm256_shuffle_epi8(px, lo), _mm256_loadu_si256(kv)));
  }
  return _mm256_srai_epi32(acc, PRECISION_BITS);
}

static inline __attribute__((always_inline, target("avx2"))) int hpass_avx2_k(
    const uint8_t *in, uint8_t *out, int out_w, const rc_coeffs *c, const int flip,
    const int ksize) {
  /* dwords [a c _ _ | b d _ _] (four pixels, a byte to spare each) to [a b c d], then bytes */
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m128i pack12 = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  /* (locals: the stores to `out` could alias c's fields, which would then be reloaded) */
  const int *const bounds = c->bounds;
  const int16_t *const kk = c->kk;
  const int step = flip ? -1 : 1; /* destinations in order, sources mirrored when flipped */
  int x = flip ? out_w - 1 : 0, d = 0;
  const __m256i *kv = c->packed_key == 1 + flip ? (const __m256i *)c->packed : NULL;
  const size_t per_pair = (size_t)ksize / 2; /* vectors: one per tap pair */
  for (; d + 4 <= out_w; d += 4, x += 4 * step, out += 12) {
    __m256i ab, cd;
    if (kv) { /* (pair d / 2 and the next) */
      ab = hpass_avx2_packed(in, bounds, kv + per_pair * (d / 2), x, x + step, ksize);
      cd = hpass_avx2_packed(in, bounds, kv + per_pair * (d / 2 + 1), x + 2 * step, x + 3 * step,
                             ksize);
    } else {
      ab = hpass_avx2_pair(in, bounds, kk, x, x + step, ksize);
      cd = hpass_avx2_pair(in, bounds, kk, x + 2 * step, x + 3 * step, ksize);
    }
    __m256i v = _mm256_packus_epi16(_mm256_packs_epi32(ab, cd), ab);
    v = _mm256_permutevar8x32_epi32(v, order);
    _mm_storeu_si128((__m128i *)out, _mm_shuffle_epi8(_mm256_castsi256_si128(v), pack12));
  }
  return d;
}

#define HPASS_AVX2_KSIZES(flip)                               \
  switch (c->ksize) {                                         \
    case 2:                                                   \
      return hpass_avx2_k(in, out, out_w, c, flip, 2);        \
    case 4:                                                   \
      return hpass_avx2_k(in, out, out_w, c, flip, 4);        \
    case 6:                                                   \
      return hpass_avx2_k(in, out, out_w, c, flip, 6);        \
    case 8:                                                   \
      return hpass_avx2_k(in, out, out_w, c, flip, 8);        \
    default:                                                  \
      return hpass_avx2_k(in, out, out_w, c, flip, c->ksize); \
  }

/* One copy of the loop per common kernel width and direction; returns the outputs done (all
 * but the last out_w % 4, left to the one-pixel loop). */
__attribute__((target("avx2"))) static int hpass_avx2(const uint8_t *in, uint8_t *out, int out_w,
                                                      const rc_coeffs *c, int flip) {
  if (flip) HPASS_AVX2_KSIZES(1);
  HPASS_AVX2_KSIZES(0);
}

/* Plane c's 16 bytes out of 48 bytes of RGB pixels (three 16-byte loads a, b, e): a
 * shuffle of each, or-ed together. */
static const int8_t split3_masks[3][3][16] = {
    {{0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13}},
    {{1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14}},
    {{2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15}},
};

static inline __attribute__((always_inline, target("avx2"))) __m128i split3_plane(__m128i a,
                                                                                  __m128i b,
                                                                                  __m128i e,
                                                                                  int c) {
  const __m128i *m = (const __m128i *)split3_masks[c];
  return _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, _mm_loadu_si128(m)),
                                   _mm_shuffle_epi8(b, _mm_loadu_si128(m + 1))),
                      _mm_shuffle_epi8(e, _mm_loadu_si128(m + 2)));
}

/* rc_split3 for 16 pixels per step (split3_plane). */
__attribute__((target("avx2"))) static int split3_avx2(const uint8_t *in, uint8_t *d0, uint8_t *d1,
                                                       uint8_t *d2, int n) {
  uint8_t *const d[3] = {d0, d1, d2};
  int x = 0;
  for (; x + 16 <= n; x += 16, in += 48) {
    const __m128i a = _mm_loadu_si128((const __m128i *)in);
    const __m128i b = _mm_loadu_si128((const __m128i *)(in + 16));
    const __m128i e = _mm_loadu_si128((const __m128i *)(in + 32));
    for (int c = 0; c < 3; c++) {
      const __m128i v = split3_plane(a, b, e, c);
      _mm_storeu_si128((__m128i *)(d[c] + x), v);
    }
  }
  return x;
}

/* Eight levels (the low 8 bytes of v) as (float)fma(level, a, b): the float32 store's line
 * (NOTE [float store]). */
static inline __attribute__((always_inline, target("avx2,fma"))) __m256 line8(__m128i v, __m256d a,
                                                                              __m256d b) {
  const __m256i w = _mm256_cvtepu8_epi32(v);
  const __m128 lo =
      _mm256_cvtpd_ps(_mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(w)), a, b));
  const __m128 hi =
      _mm256_cvtpd_ps(_mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(w, 1)), a, b));
  return _mm256_set_m128(hi, lo);
}

__attribute__((target("avx2,fma"))) static int line_exact_avx2(const float *t, const double ab[2]) {
  const __m256d a = _mm256_set1_pd(ab[0]), b = _mm256_set1_pd(ab[1]);
  const __m128i step = _mm_set1_epi8(8);
  __m128i v = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int x = 0; x < 256; x += 8, v = _mm_add_epi8(v, step)) {
    const __m256i got = _mm256_castps_si256(line8(v, a, b));
    const __m256i want = _mm256_loadu_si256((const __m256i *)(t + x));
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(got, want)) != -1) return 0; /* bits, not == */
  }
  return 1;
}

/* rc_split3_f32 for 16 pixels per step: rc_split3's shuffles, then each plane's 16 levels
 * through its line. */
__attribute__((target("avx2,fma"))) static int split3_f32_avx2(const uint8_t *in,
                                                               const double *const ab[3],
                                                               float *const d[3], int n) {
  const __m256d a[3] = {_mm256_set1_pd(ab[0][0]), _mm256_set1_pd(ab[1][0]),
                        _mm256_set1_pd(ab[2][0])};
  const __m256d b[3] = {_mm256_set1_pd(ab[0][1]), _mm256_set1_pd(ab[1][1]),
                        _mm256_set1_pd(ab[2][1])};
  int x = 0;
  for (; x + 16 <= n; x += 16, in += 48) {
    const __m128i p = _mm_loadu_si128((const __m128i *)in);
    const __m128i q = _mm_loadu_si128((const __m128i *)(in + 16));
    const __m128i r = _mm_loadu_si128((const __m128i *)(in + 32));
    for (int c = 0; c < 3; c++) {
      const __m128i v = split3_plane(p, q, r, c);
      _mm256_storeu_ps(d[c] + x, line8(v, a[c], b[c]));
      _mm256_storeu_ps(d[c] + x + 8, line8(_mm_srli_si128(v, 8), a[c], b[c]));
    }
  }
  return x;
}

#endif

/* Horizontal pass over RGB rows: AVX2 four pixels a step (NOTE [hpass avx2]), else one a step;
 * the last out_w % 4 one by one. */
void rc_hpass(const uint8_t *in, uint8_t *out, int out_w, const rc_coeffs *c, int flip) {
  int done = 0;
#ifdef RC_HAVE_AVX2_PATH
  if (have_avx2()) done = hpass_avx2(in, out, out_w, c, flip);
#endif
  if (done == out_w) return;
  /* The rest as a row of its own: flipped, destination d comes from source out_w - 1 - d,
   * so destinations done.. take sources 0..out_w - 1 - done (the coefficients' first part). */
  rc_coeffs rest = *c;
  if (!flip) rest.bounds += 2 * done, rest.kk += (size_t)done * c->ksize;
  hpass_1px(in, out + 3 * done, out_w - done, &rest, flip);
}

void rc_hpass_pack(rc_coeffs *c, int flip) {
#ifdef RC_HAVE_AVX2_PATH
  const int out_w = c->key_out_size, per_pair = c->ksize / 2;
  if (!have_avx2() || !c->valid || c->packed_key == 1 + flip) return;
  c->packed_key = 0;
  if (rc_grow((void **)&c->packed, &c->packed_cap, (size_t)(out_w / 2) * per_pair * 32)) return;
  int32_t *v = (int32_t *)c->packed;
  for (int q = 0; q < out_w / 2; q++) { /* destinations 2q, 2q + 1, as hpass_avx2_k takes them */
    const int xa = flip ? out_w - 1 - 2 * q : 2 * q, xb = flip ? xa - 1 : xa + 1;
    for (int j = 0; j < per_pair; j++, v += 8) {
      int32_t wa, wb; /* taps 2j, 2j + 1 of each: as hpass_avx2_pair's broadcasts */
      memcpy(&wa, c->kk + (size_t)xa * c->ksize + 2 * j, 4);
      memcpy(&wb, c->kk + (size_t)xb * c->ksize + 2 * j, 4);
      for (int i = 0; i < 4; i++) v[i] = wa, v[4 + i] = wb;
    }
  }
  c->packed_key = 1 + flip;
#else
  (void)c, (void)flip;
#endif
}

/* Bytes a row given to hpass must stay readable past its last pixel: the passes read whole
 * kernels (zero-padded) and up to 16 bytes at a time. */
size_t rc_hpass_slack(const rc_coeffs *c) {
  return (size_t)c->ksize * 3 + RC_SLACK;
}

void rc_split3(const uint8_t *in, uint8_t *d0, uint8_t *d1, uint8_t *d2, int n) {
  int x = 0;
#ifdef RC_HAVE_AVX2_PATH
  if (have_avx2()) x = split3_avx2(in, d0, d1, d2, n);
#endif
  for (in += 3 * x; x < n; x++, in += 3) {
    d0[x] = in[0];
    d1[x] = in[1];
    d2[x] = in[2];
  }
}

int rc_line_exact(const float *t, const double ab[2]) {
#ifdef RC_HAVE_AVX2_PATH
  if (use_fma) return line_exact_avx2(t, ab);
#endif
  (void)t, (void)ab;
  return 0;
}

void rc_split3_f32(const uint8_t *in, const float *const t[3], const double *const ab[3],
                   float *const d[3], int n) {
  int x = 0;
#ifdef RC_HAVE_AVX2_PATH
  if (ab && use_fma) x = split3_f32_avx2(in, ab, d, n);
#endif
  for (in += 3 * x; x < n; x++, in += 3) { /* (a line's values are its table's) */
    d[0][x] = t[0][in[0]];
    d[1][x] = t[1][in[1]];
    d[2][x] = t[2][in[2]];
  }
}

/* Vertical pass: one output row from ymax rows of tmp starting at ymin. */
void rc_vpass(const uint8_t *tmp, size_t stride, size_t width, int ymin, int ymax, const int16_t *k,
              uint8_t *line) {
  size_t i = 0;
  const uint8_t *base = tmp + (size_t)ymin * stride;
#ifdef RC_HAVE_AVX2_PATH
  if (have_avx2()) i = vpass_avx2(base, stride, width, ymax, k, line);
#endif
#ifdef __SSE2__
  const __m128i zero = _mm_setzero_si128();
  const __m128i half = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
  /* 16 columns a step, the last ending at the row's end (as vpass_avx2's) */
  for (; i < width && width >= 16; i += 16) {
    if (i + 16 > width) i = width - 16;
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

/* One past the last input row that resampling [in0, in1) to out_size rows reads (with a row to
 * spare; precompute's windows are centre +- support, rounded). */
int rc_end_row(double in0, double in1, int out_size, int in_size, int interp) {
  const double scale = (in1 - in0) / out_size;
  const double support = (interp == RC_INTERP_BILINEAR ? 1.0 : 0.5) * (scale < 1.0 ? 1.0 : scale);
  const int end = (int)(in0 + (out_size - 0.5) * scale + support + 0.5) + 1;
  return end < in_size ? end : in_size;
}

void rc_coeffs_free(rc_coeffs *c) {
  free(c->packed);
  free(c->bounds);
  free(c->kk);
  free(c->prekk);
}

/* ---- whole planes: the horizontal pass as a vertical pass over the transposed rows ---- */

#ifdef __SSE2__
/* One 16x16 tile: four rounds of interleaving (bytes, 16-, 32-, 64-bit units) turn 16 rows
 * into 16 columns. */
static void transpose16(const uint8_t *src, size_t ss, uint8_t *dst, size_t ds) {
  __m128i a[16], b[16];
  for (int i = 0; i < 16; i++) a[i] = _mm_loadu_si128((const __m128i *)(src + i * ss));
  for (int i = 0; i < 8; i++) { /* b[8g + i]: rows 2i, 2i+1; columns 8g.. 8g+7 */
    b[i] = _mm_unpacklo_epi8(a[2 * i], a[2 * i + 1]);
    b[8 + i] = _mm_unpackhi_epi8(a[2 * i], a[2 * i + 1]);
  }
  for (int g = 0; g < 2; g++) /* a[4q + i]: rows 4i.. 4i+3; columns 4q.. 4q+3 */
    for (int i = 0; i < 4; i++) {
      a[8 * g + i] = _mm_unpacklo_epi16(b[8 * g + 2 * i], b[8 * g + 2 * i + 1]);
      a[8 * g + 4 + i] = _mm_unpackhi_epi16(b[8 * g + 2 * i], b[8 * g + 2 * i + 1]);
    }
  for (int q = 0; q < 4; q++) /* b[2p + i]: rows 8i.. 8i+7; columns 2p, 2p+1 */
    for (int i = 0; i < 2; i++) {
      b[4 * q + i] = _mm_unpacklo_epi32(a[4 * q + 2 * i], a[4 * q + 2 * i + 1]);
      b[4 * q + 2 + i] = _mm_unpackhi_epi32(a[4 * q + 2 * i], a[4 * q + 2 * i + 1]);
    }
  for (int p = 0; p < 8; p++) {
    _mm_storeu_si128((__m128i *)(dst + (size_t)(2 * p) * ds),
                     _mm_unpacklo_epi64(b[2 * p], b[2 * p + 1]));
    _mm_storeu_si128((__m128i *)(dst + (size_t)(2 * p + 1) * ds),
                     _mm_unpackhi_epi64(b[2 * p], b[2 * p + 1]));
  }
}
#endif

void rc_transpose(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride, int rows,
                  int cols) {
#ifdef __SSE2__
  for (int r0 = 0; r0 < rows; r0 += 16)
    for (int c0 = 0; c0 < cols; c0 += 16) {
      const int nr = rows - r0 < 16 ? rows - r0 : 16, nc = cols - c0 < 16 ? cols - c0 : 16;
      const uint8_t *s = src + (size_t)r0 * sstride + c0;
      uint8_t *d = dst + (size_t)c0 * dstride + r0;
      if (nr == 16 && nc == 16) {
        transpose16(s, sstride, d, dstride);
        continue;
      }
      /* An edge tile: through two local tiles, so no byte outside the block is touched. */
      uint8_t a[256] = {0}, t[256];
      for (int r = 0; r < nr; r++) memcpy(a + 16 * r, s + (size_t)r * sstride, (size_t)nc);
      transpose16(a, 16, t, 16);
      for (int c = 0; c < nc; c++) memcpy(d + (size_t)c * dstride, t + 16 * c, (size_t)nr);
    }
#else
  for (int c = 0; c < cols; c++)
    for (int r = 0; r < rows; r++) dst[(size_t)c * dstride + r] = src[(size_t)r * sstride + c];
#endif
}

static size_t round16(int v) {
  return ((size_t)v + 15) & ~(size_t)15;
}

uint64_t rc_resample_plane_bytes(int in_w, int out_w, int out_h) {
  const uint64_t t = round16(out_h);
  return (uint64_t)out_h * round16(in_w) + (uint64_t)in_w * t + (uint64_t)out_w * t + 3 * RC_SLACK;
}

static int grow(rc_buf b, size_t need) {
  return rc_grow((void **)b.p, b.cap, need);
}

int rc_resample_plane(const uint8_t *src, size_t sstride, const rc_coeffs *ch, const rc_coeffs *cv,
                      uint8_t *dst, size_t dstride, int out_w, int out_h, rc_buf mid, rc_buf midt,
                      rc_buf outt) {
  /* The input columns any output uses. */
  int cx0 = ch->bounds[0], cx1 = cx0 + 1;
  for (int xx = 0; xx < out_w; xx++) {
    const int a = ch->bounds[2 * xx], e = a + ch->bounds[2 * xx + 1];
    if (a < cx0) cx0 = a;
    if (e > cx1) cx1 = e;
  }
  const int cw = cx1 - cx0;
  /* Vertical pass (or, for a row-for-row window, the source rows themselves). */
  const uint8_t *rows;
  size_t rstride;
  if (cv->identity) {
    rows = src + (size_t)cv->bounds[0] * sstride + cx0;
    rstride = sstride;
  } else {
    rstride = round16(cw);
    if (grow(mid, rstride * out_h + RC_SLACK)) return -1;
    /* Whole vectors: the columns past cw read the next row (or the source's RC_SLACK after
     * the last) and land in the padding. */
    for (int yy = 0; yy < out_h; yy++)
      rc_vpass(src + cx0, sstride, rstride, cv->bounds[2 * yy], cv->bounds[2 * yy + 1],
               cv->kk + (size_t)yy * cv->ksize, *mid.p + (size_t)yy * rstride);
    rows = *mid.p;
  }
  if (ch->identity) {
    for (int yy = 0; yy < out_h; yy++)
      memcpy(dst + (size_t)yy * dstride, rows + (size_t)yy * rstride + (ch->bounds[0] - cx0),
             (size_t)out_w);
    return 0;
  }
  /* Horizontal pass: columns become rows, each output column one vertical pass over them. */
  const size_t tstride = round16(out_h);
  if (grow(midt, tstride * cw + RC_SLACK) || grow(outt, tstride * out_w + RC_SLACK)) return -1;
  rc_transpose(rows, rstride, *midt.p, tstride, out_h, cw);
  if (tstride > (size_t)out_h) /* the passes run whole vectors: keep the padding defined */
    for (int x = 0; x < cw; x++) memset(*midt.p + (size_t)x * tstride + out_h, 0, tstride - out_h);
  for (int xx = 0; xx < out_w; xx++)
    rc_vpass(*midt.p, tstride, tstride, ch->bounds[2 * xx] - cx0, ch->bounds[2 * xx + 1],
             ch->kk + (size_t)xx * ch->ksize, *outt.p + (size_t)xx * tstride);
  rc_transpose(*outt.p, tstride, dst, dstride, out_w, out_h);
  return 0;
}
