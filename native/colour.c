/* Colour augmentation (colour.h). Every step is the one recio.augment.apply_colour does, in
 * float32 and in the same order (fused multiply-adds off), so both give the same bytes. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include "colour.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* OpenCV's saturate_cast<uchar>(float): round half to even, clip to 0..255. (Adding and
 * taking away 1.5 * 2^23 rounds a float below 2^22 in magnitude to an integer, half to even,
 * without a libm call.) */
static inline uint8_t round_u8(float x) {
  if (!(x > 0)) return 0;
  if (x >= 255) return 255;
  const float magic = 12582912.0f;
  const float t = x + magic; /* (no -ffast-math: not folded away) */
  return (uint8_t)(t - magic);
}

static inline int clampi(int v, int lo, int hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

/* OpenCV's 8-bit RGB2HLS (H in 0..180) of the RGB pixel p, shifted, clipped, and its
 * HLS2RGB back into p. */
static void hls_jitter(uint8_t *p, int dh, int ds, int dl) {
  const float inv255 = 1.0f / 255.0f;
  const float r = p[0] * inv255, g = p[1] * inv255, b = p[2] * inv255;
  float vmax = r > g ? r : g, vmin = r < g ? r : g;
  vmax = vmax > b ? vmax : b;
  vmin = vmin < b ? vmin : b;
  const float diff = vmax - vmin, light = (vmax + vmin) * 0.5f;
  float hue = 0, sat = 0;
  if (diff > FLT_EPSILON) {
    sat = light < 0.5f ? diff / (vmax + vmin) : diff / (2.0f - vmax - vmin);
    const float step = 60.0f / diff;
    if (vmax == r)
      hue = (g - b) * step;
    else if (vmax == g)
      hue = (b - r) * step + 120.0f;
    else
      hue = (r - g) * step + 240.0f;
    if (hue < 0) hue += 360.0f;
  }
  const int H = clampi(round_u8(hue * 0.5f) + dh, 0, 180);
  const int L = clampi(round_u8(light * 255.0f) + dl, 0, 255);
  const int S = clampi(round_u8(sat * 255.0f) + ds, 0, 255);

  const float lum = L * inv255, s = S * inv255;
  float out[3];
  if (s == 0) {
    out[0] = out[1] = out[2] = lum;
  } else {
    static const int sectors[6][3] = {{1, 3, 0}, {1, 0, 2}, {3, 0, 1},
                                      {0, 2, 1}, {0, 1, 3}, {2, 1, 0}};
    const float p2 = lum <= 0.5f ? lum * (1.0f + s) : lum + s - lum * s;
    const float p1 = 2.0f * lum - p2;
    float h = (float)H * (6.0f / 180.0f);
    if (h >= 6) h -= 6.0f; /* H is at most 180: one turn at most */
    const int sector = (int)floorf(h);
    const float frac = h - (float)sector;
    const float tab[4] = {p2, p1, p1 + (p2 - p1) * (1.0f - frac), p1 + (p2 - p1) * frac};
    for (int k = 0; k < 3; k++) out[k] = tab[sectors[sector][k]];
  }
  for (int k = 0; k < 3; k++) p[k] = round_u8(out[2 - k] * 255.0f); /* out: b, g, r */
}

/* The float steps: the pixels as floats (whole numbers in 0..255, in the bytes' order), one
 * or two passes over the image, each doing its steps in registers (SSE2, four values at a
 * time; the same arithmetic in C for the rest and elsewhere). */

/* round half to even (adding and taking away 1.5 * 2^23), then clip to 0..255: what
 * saturate_cast<uchar> gives */
static inline float round_clip(float x) {
  const float magic = 12582912.0f;
  x = (x + magic) - magic;
  x = x > 0.0f ? x : 0.0f;
  return x < 255.0f ? x : 255.0f;
}

/* What one pass does to each pixel, in this order (a flag off: the step is skipped). */
typedef struct {
  int bright, contrast, sat, pca;
  float ab, ac, beta, as, bs;
  float add[12];  /* PCA's shift of value i: add[i % 12] (channel i % 3) */
  double sums[3]; /* out: the sums of each channel's values after the pass's steps */
} pass_ops;

/* MXNet's grey (the luma weights 0.299, 0.587, 0.114 over its BGR pixels in RGB's order). */
static inline float grey_of(const float p[3]) {
  return (p[2] * 0.299f + p[1] * 0.587f) + p[0] * 0.114f;
}

/* The pass's steps on one pixel. */
static inline void ops_pixel(const pass_ops *o, float p[3]) {
  for (int k = 0; k < 3; k++) {
    if (o->bright) p[k] = round_clip(p[k] * o->ab);
    if (o->contrast) p[k] = round_clip(p[k] * o->ac + o->beta);
  }
  if (o->sat) {
    const float g = grey_of(p);
    for (int k = 0; k < 3; k++) p[k] = round_clip(p[k] * o->as + g * o->bs);
  }
  if (o->pca)
    for (int k = 0; k < 3; k++) p[k] = round_clip(p[k] + o->add[k]);
}

#if defined(__SSE2__)
#include <emmintrin.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE __m128 round_clip4(__m128 x) {
  const __m128 magic = _mm_set1_ps(12582912.0f);
  x = _mm_sub_ps(_mm_add_ps(x, magic), magic);
  return _mm_min_ps(_mm_max_ps(x, _mm_setzero_ps()), _mm_set1_ps(255.0f));
}

/* The vector constants of a pass. */
typedef struct {
  __m128 ab, ac, beta, as, bs, add[3];
} pass_vec;

ALWAYS_INLINE __m128 load4(const uint8_t *src8, const float *srcf, size_t i) {
  if (!src8) return _mm_loadu_ps(srcf + i);
  int32_t b;
  memcpy(&b, src8 + i, 4);
  const __m128i zero = _mm_setzero_si128();
  const __m128i w = _mm_unpacklo_epi8(_mm_cvtsi32_si128(b), zero);
  return _mm_cvtepi32_ps(_mm_unpacklo_epi16(w, zero));
}

#define SHUF(a, b, i, j, k, l) _mm_shuffle_ps(a, b, _MM_SHUFFLE(l, k, j, i))

/* The greys of the 4 pixels in x[0..2] ([R0 G0 B0 R1], [G1 B1 R2 G2], [B2 R3 G3 B3]), each
 * written three times, as x's values lie. */
ALWAYS_INLINE void grey4(const __m128 x[3], __m128 g[3]) {
  const __m128 a = x[0], b = x[1], c = x[2];
  const __m128 r = SHUF(SHUF(a, a, 0, 3, 0, 3), SHUF(b, c, 2, 2, 1, 1), 0, 1, 1, 2);
  const __m128 gr = SHUF(SHUF(a, b, 1, 1, 0, 3), SHUF(b, c, 3, 3, 2, 2), 0, 2, 0, 2);
  const __m128 bl = SHUF(SHUF(a, b, 2, 2, 1, 1), SHUF(c, c, 0, 0, 3, 3), 0, 2, 0, 2);
  const __m128 y = _mm_add_ps(
      _mm_add_ps(_mm_mul_ps(bl, _mm_set1_ps(0.299f)), _mm_mul_ps(gr, _mm_set1_ps(0.587f))),
      _mm_mul_ps(r, _mm_set1_ps(0.114f)));
  g[0] = SHUF(y, y, 0, 0, 0, 1);
  g[1] = SHUF(y, y, 1, 1, 2, 2);
  g[2] = SHUF(y, y, 2, 3, 3, 3);
}

/* 48 values (16 pixels: every vector's channels fixed) from i, in groups of 4 pixels. */
ALWAYS_INLINE void pass48(const pass_vec *c, size_t i, const uint8_t *src8, const float *srcf,
                          uint8_t *dst8, float *dstf, __m128 acc[3], int bright, int contrast,
                          int sat, int pca) {
  __m128 v[12];
#pragma GCC unroll 4
  for (int q = 0; q < 12; q += 3) {
    __m128 *x = v + q;
#pragma GCC unroll 3
    for (int t = 0; t < 3; t++) {
      x[t] = load4(src8, srcf, i + 4 * (q + t));
      if (bright) x[t] = round_clip4(_mm_mul_ps(x[t], c->ab));
      if (contrast) x[t] = round_clip4(_mm_add_ps(_mm_mul_ps(x[t], c->ac), c->beta));
    }
    if (sat) {
      __m128 g[3];
      grey4(x, g);
#pragma GCC unroll 3
      for (int t = 0; t < 3; t++)
        x[t] = round_clip4(_mm_add_ps(_mm_mul_ps(x[t], c->as), _mm_mul_ps(g[t], c->bs)));
    }
#pragma GCC unroll 3
    for (int t = 0; t < 3; t++) {
      if (pca) x[t] = round_clip4(_mm_add_ps(x[t], c->add[t]));
      acc[t] = _mm_add_ps(acc[t], x[t]);
    }
  }
  if (dst8) { /* whole numbers in 0..255: exact conversions, no saturation needed */
#pragma GCC unroll 3
    for (int k = 0; k < 12; k += 4) {
      const __m128i a = _mm_packs_epi32(_mm_cvtps_epi32(v[k]), _mm_cvtps_epi32(v[k + 1]));
      const __m128i b = _mm_packs_epi32(_mm_cvtps_epi32(v[k + 2]), _mm_cvtps_epi32(v[k + 3]));
      _mm_storeu_si128((__m128i *)(dst8 + i + 4 * k), _mm_packus_epi16(a, b));
    }
  } else {
#pragma GCC unroll 12
    for (int k = 0; k < 12; k++) _mm_storeu_ps(dstf + i + 4 * k, v[k]);
  }
}

/* The vector part of a pass, its steps known when compiled; returns where it stopped. */
ALWAYS_INLINE size_t pass_sse2(pass_ops *o, size_t n, const uint8_t *src8, const float *srcf,
                               uint8_t *dst8, float *dstf, int bright, int contrast, int sat,
                               int pca) {
  pass_vec c = {_mm_set1_ps(o->ab),
                _mm_set1_ps(o->ac),
                _mm_set1_ps(o->beta),
                _mm_set1_ps(o->as),
                _mm_set1_ps(o->bs),
                {_mm_loadu_ps(o->add), _mm_loadu_ps(o->add + 4), _mm_loadu_ps(o->add + 8)}};
  /* Per-lane sums of the results: exact in float (whole numbers, at most 255 * n / 12 <
   * 2^24 each, for images up to 65 M values); lane l of acc[t] is channel (t + l) % 3. */
  __m128 acc[3] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
  size_t i = 0;
  for (; i + 48 <= n; i += 48)
    pass48(&c, i, src8, srcf, dst8, dstf, acc, bright, contrast, sat, pca);
  float lanes[12];
  for (int t = 0; t < 3; t++) _mm_storeu_ps(lanes + 4 * t, acc[t]);
  for (int k = 0; k < 12; k++) o->sums[k % 3] += lanes[k];
  return i;
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#define RC_COLOUR_AVX2 1
#include <immintrin.h>

static int colour_avx2; /* rc_colour_init: the CPU has AVX2 and RECIO_SIMD is not "sse2" */

#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2")))
#define SHUF8(a, b, i, j, k, l) _mm256_shuffle_ps(a, b, _MM_SHUFFLE(l, k, j, i))

AVX2_INLINE __m256 round_clip8(__m256 x) { /* (vroundps: half to even, as the magic) */
  x = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm256_min_ps(_mm256_max_ps(x, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
}

AVX2_INLINE __m256 both(__m128 a) {
  return _mm256_insertf128_ps(_mm256_castps128_ps256(a), a, 1);
}

/* Two groups of 4 pixels side by side, one per 128-bit half: vector t of the group at i in
 * the low half, of the group at i + 12 in the high one, so the SSE2 loop's in-lane shuffles
 * and channel patterns hold unchanged. */
AVX2_INLINE __m256 load8(const uint8_t *src8, const float *srcf, size_t i) {
  if (!src8)
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(srcf + i)),
                                _mm_loadu_ps(srcf + i + 12), 1);
  int32_t lo, hi;
  memcpy(&lo, src8 + i, 4);
  memcpy(&hi, src8 + i + 12, 4);
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, hi, lo)));
}

/* 12 whole numbers in 0..255 (three vectors) as 12 bytes. */
AVX2_INLINE void store12(uint8_t *dst, __m128 a, __m128 b, __m128 c) {
  const __m128i p = _mm_packus_epi16(_mm_packs_epi32(_mm_cvtps_epi32(a), _mm_cvtps_epi32(b)),
                                     _mm_packs_epi32(_mm_cvtps_epi32(c), _mm_setzero_si128()));
  _mm_storel_epi64((__m128i *)dst, p);
  const int32_t last = _mm_cvtsi128_si32(_mm_srli_si128(p, 8));
  memcpy(dst + 8, &last, 4);
}

/* pass_sse2 with 8 values a vector: 24 values (8 pixels) a step. */
AVX2_INLINE size_t pass_avx2_k(pass_ops *o, size_t n, const uint8_t *src8, const float *srcf,
                               uint8_t *dst8, float *dstf, int bright, int contrast, int sat,
                               int pca) {
  const __m256 ab = _mm256_set1_ps(o->ab), ac = _mm256_set1_ps(o->ac);
  const __m256 beta = _mm256_set1_ps(o->beta), as = _mm256_set1_ps(o->as);
  const __m256 bs = _mm256_set1_ps(o->bs);
  const __m256 add[3] = {both(_mm_loadu_ps(o->add)), both(_mm_loadu_ps(o->add + 4)),
                         both(_mm_loadu_ps(o->add + 8))};
  __m256 acc[3] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  size_t i = 0;
  for (; i + 24 <= n; i += 24) {
    __m256 x[3];
#pragma GCC unroll 3
    for (int t = 0; t < 3; t++) {
      x[t] = load8(src8, srcf, i + 4 * t);
      if (bright) x[t] = round_clip8(_mm256_mul_ps(x[t], ab));
      if (contrast) x[t] = round_clip8(_mm256_add_ps(_mm256_mul_ps(x[t], ac), beta));
    }
    if (sat) { /* as grey4, in each half */
      const __m256 a = x[0], b = x[1], c = x[2];
      const __m256 r = SHUF8(SHUF8(a, a, 0, 3, 0, 3), SHUF8(b, c, 2, 2, 1, 1), 0, 1, 1, 2);
      const __m256 gr = SHUF8(SHUF8(a, b, 1, 1, 0, 3), SHUF8(b, c, 3, 3, 2, 2), 0, 2, 0, 2);
      const __m256 bl = SHUF8(SHUF8(a, b, 2, 2, 1, 1), SHUF8(c, c, 0, 0, 3, 3), 0, 2, 0, 2);
      const __m256 y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(bl, _mm256_set1_ps(0.299f)),
                                                   _mm256_mul_ps(gr, _mm256_set1_ps(0.587f))),
                                     _mm256_mul_ps(r, _mm256_set1_ps(0.114f)));
      const __m256 g[3] = {SHUF8(y, y, 0, 0, 0, 1), SHUF8(y, y, 1, 1, 2, 2),
                           SHUF8(y, y, 2, 3, 3, 3)};
#pragma GCC unroll 3
      for (int t = 0; t < 3; t++)
        x[t] = round_clip8(_mm256_add_ps(_mm256_mul_ps(x[t], as), _mm256_mul_ps(g[t], bs)));
    }
#pragma GCC unroll 3
    for (int t = 0; t < 3; t++) {
      if (pca) x[t] = round_clip8(_mm256_add_ps(x[t], add[t]));
      acc[t] = _mm256_add_ps(acc[t], x[t]);
    }
    const __m128 lo[3] = {_mm256_castps256_ps128(x[0]), _mm256_castps256_ps128(x[1]),
                          _mm256_castps256_ps128(x[2])};
    const __m128 hi[3] = {_mm256_extractf128_ps(x[0], 1), _mm256_extractf128_ps(x[1], 1),
                          _mm256_extractf128_ps(x[2], 1)};
    if (dst8) {
      store12(dst8 + i, lo[0], lo[1], lo[2]);
      store12(dst8 + i + 12, hi[0], hi[1], hi[2]);
    } else {
      for (int t = 0; t < 3; t++) {
        _mm_storeu_ps(dstf + i + 4 * t, lo[t]);
        _mm_storeu_ps(dstf + i + 12 + 4 * t, hi[t]);
      }
    }
  }
  float lanes[24];
  for (int t = 0; t < 3; t++) _mm256_storeu_ps(lanes + 8 * t, acc[t]);
  for (int t = 0; t < 3; t++) /* lane l of either half of acc[t]: channel (4t + l) % 3 */
    for (int l = 0; l < 8; l++) o->sums[(4 * t + l % 4) % 3] += lanes[8 * t + l];
  return i;
}

__attribute__((target("avx2"))) static size_t pass_avx2(pass_ops *o, size_t n, const uint8_t *src8,
                                                        const float *srcf, uint8_t *dst8,
                                                        float *dstf) {
#define PASS(b, c, s, p) return pass_avx2_k(o, n, src8, srcf, dst8, dstf, b, c, s, p)
  switch (o->bright | o->contrast << 1 | o->sat << 2 | o->pca << 3) {
    case 0:
      PASS(0, 0, 0, 0);
    case 1:
      PASS(1, 0, 0, 0);
    case 2:
      PASS(0, 1, 0, 0);
    case 3:
      PASS(1, 1, 0, 0);
    case 4:
      PASS(0, 0, 1, 0);
    case 5:
      PASS(1, 0, 1, 0);
    case 6:
      PASS(0, 1, 1, 0);
    case 7:
      PASS(1, 1, 1, 0);
    case 8:
      PASS(0, 0, 0, 1);
    case 9:
      PASS(1, 0, 0, 1);
    case 10:
      PASS(0, 1, 0, 1);
    case 11:
      PASS(1, 1, 0, 1);
    case 12:
      PASS(0, 0, 1, 1);
    case 13:
      PASS(1, 0, 1, 1);
    case 14:
      PASS(0, 1, 1, 1);
    default:
      PASS(1, 1, 1, 1);
  }
#undef PASS
}
#endif

const char *rc_colour_init(void) {
#ifdef RC_COLOUR_AVX2
  const char *simd = getenv("RECIO_SIMD");
  colour_avx2 = __builtin_cpu_supports("avx2") && !(simd && strcmp(simd, "sse2") == 0);
  if (colour_avx2) return "avx2";
#endif
#if defined(__SSE2__)
  return "sse2";
#else
  return "scalar";
#endif
}

/* One pass over n values (whole pixels): from bytes (src8) or floats (srcf), to bytes (dst8)
 * or floats (dstf), the sums of the results' channels added to o->sums. */
static void run_pass(pass_ops *o, size_t n, const uint8_t *src8, const float *srcf, uint8_t *dst8,
                     float *dstf) {
  size_t i = 0;
#ifdef RC_COLOUR_AVX2
  if (colour_avx2) i = pass_avx2(o, n, src8, srcf, dst8, dstf);
  if (!colour_avx2) {
#endif
#if defined(__SSE2__)
    /* one copy of the loop per set of steps (a pass runs a few of them) */
#define PASS(b, c, s, p) i = pass_sse2(o, n, src8, srcf, dst8, dstf, b, c, s, p)
    switch (o->bright | o->contrast << 1 | o->sat << 2 | o->pca << 3) {
      case 0:
        PASS(0, 0, 0, 0);
        break;
      case 1:
        PASS(1, 0, 0, 0);
        break;
      case 2:
        PASS(0, 1, 0, 0);
        break;
      case 3:
        PASS(1, 1, 0, 0);
        break;
      case 4:
        PASS(0, 0, 1, 0);
        break;
      case 5:
        PASS(1, 0, 1, 0);
        break;
      case 6:
        PASS(0, 1, 1, 0);
        break;
      case 7:
        PASS(1, 1, 1, 0);
        break;
      case 8:
        PASS(0, 0, 0, 1);
        break;
      case 9:
        PASS(1, 0, 0, 1);
        break;
      case 10:
        PASS(0, 1, 0, 1);
        break;
      case 11:
        PASS(1, 1, 0, 1);
        break;
      case 12:
        PASS(0, 0, 1, 1);
        break;
      case 13:
        PASS(1, 0, 1, 1);
        break;
      case 14:
        PASS(0, 1, 1, 1);
        break;
      default:
        PASS(1, 1, 1, 1);
        break;
    }
#undef PASS
#endif
#ifdef RC_COLOUR_AVX2
  }
#endif
  for (; i < n; i += 3) { /* (i: a whole pixel) */
    float p[3];
    for (int k = 0; k < 3; k++) p[k] = src8 ? (float)src8[i + k] : srcf[i + k];
    ops_pixel(o, p);
    for (int k = 0; k < 3; k++) {
      o->sums[k] += p[k];
      if (dst8)
        dst8[i + k] = (uint8_t)p[k];
      else
        dstf[i + k] = p[k];
    }
  }
}

void rc_colour_apply(const rc_colour *c, const double v[RC_COLOUR_VALUES], uint8_t *rgb,
                     size_t npix, float *scratch) {
  if (c->random_h || c->random_s || c->random_l) /* per pixel, in bytes */
    for (size_t i = 0; i < npix; i++) hls_jitter(rgb + 3 * i, (int)v[0], (int)v[1], (int)v[2]);
  const int bright = c->brightness > 0, contrast = c->contrast > 0, sat = c->saturation > 0;
  const int pca = c->pca_noise > 0;
  if (!(bright || contrast || sat || pca)) return;
  const size_t n = npix * 3;
  pass_ops o = {.ab = (float)v[3], .ac = (float)v[4], .as = (float)v[5], .bs = (float)(1.0 - v[5])};
  for (int k = 0; k < 12; k++) o.add[k] = (float)v[6 + k % 3];
  o.sat = sat, o.pca = pca;
  if (contrast) { /* the mean grey first: a pass of its own, brightness with it */
    o.bright = bright;
    pass_ops first = o;
    first.sat = first.pca = 0;
    run_pass(&first, n, rgb, NULL, NULL, scratch);
    /* from the channels' sums (exact): the luma weights in MXNet's order */
    const double mean = (first.sums[2] * 0.299 + first.sums[1] * 0.587 + first.sums[0] * 0.114) /
                        (double)(npix ? npix : 1);
    o.bright = 0, o.contrast = 1, o.beta = (float)((1.0 - v[4]) * mean);
    run_pass(&o, n, NULL, scratch, rgb, NULL);
  } else {
    o.bright = bright;
    run_pass(&o, n, rgb, NULL, rgb, NULL);
  }
}

/* ---- the fused colour and store (colour.h's rc_colour_plan) ---- */

int rc_colour_fused(void) {
#ifdef RC_COLOUR_AVX2
  return colour_avx2;
#else
  return 0;
#endif
}

void rc_colour_plan_begin(rc_colour_plan *p, const rc_colour *c, const double v[RC_COLOUR_VALUES],
                          int bgr) {
  p->hls = c->random_h || c->random_s || c->random_l;
  p->dh = (int)v[0], p->ds = (int)v[1], p->dl = (int)v[2];
  const int bright = c->brightness > 0;
  p->contrast = c->contrast > 0, p->sat = c->saturation > 0, p->pca = c->pca_noise > 0;
  p->bright = bright, p->t1_on = bright || p->contrast;
  p->ab = (float)v[3], p->ac = (float)v[4], p->as = (float)v[5], p->bs = (float)(1.0 - v[5]);
  p->alpha_c = v[4];
  for (int k = 0; k < 3; k++) p->add[k] = (float)v[6 + k];
  for (int i = 0; i < 256; i++) p->tb[i] = bright ? round_clip((float)i * p->ab) : (float)i;
  p->src[0] = bgr ? 2 : 0, p->src[1] = 1, p->src[2] = bgr ? 0 : 2;
}

#ifdef RC_COLOUR_AVX2
static size_t row_sums_avx2(const rc_colour_plan *p, const uint8_t *rgb, size_t npix,
                            double sums[3]);
#endif

void rc_colour_row_prepare(const rc_colour_plan *p, uint8_t *rgb, size_t npix, double sums[3]) {
  if (p->hls)
    for (size_t i = 0; i < npix; i++) hls_jitter(rgb + 3 * i, p->dh, p->ds, p->dl);
  if (!p->contrast) return;
  size_t i = 0;
#ifdef RC_COLOUR_AVX2
  if (colour_avx2) i = row_sums_avx2(p, rgb, npix, sums);
#endif
  for (; i < npix; i++) /* (whole numbers: exact) */
    for (int k = 0; k < 3; k++) sums[k] += p->tb[rgb[3 * i + k]];
}

void rc_colour_plan_finish(rc_colour_plan *p, const double sums[3], size_t npix, const void *lut,
                           int itemsize) {
  float beta = 0;
  if (p->contrast) { /* as rc_colour_apply: the luma weights in MXNet's order */
    const double mean =
        (sums[2] * 0.299 + sums[1] * 0.587 + sums[0] * 0.114) / (double)(npix ? npix : 1);
    beta = (float)((1.0 - p->alpha_c) * mean);
  }
  p->beta = beta;
  for (int i = 0; i < 256; i++)
    p->t1[i] = p->contrast ? round_clip(p->tb[i] * p->ac + beta) : p->tb[i];
  p->itemsize = itemsize;
  /* the item is the value itself: uint8, or float32 through the identity table */
  p->direct = itemsize == 1;
  if (itemsize == 4) {
    p->direct = 1;
    for (int i = 0; i < 3 * 256; i++) { /* (bit for bit: -0.0 is not 0) */
      const float f = (float)(i % 256);
      p->direct &= memcmp((const float *)lut + i, &f, sizeof f) == 0;
    }
  }
  for (int k = 0; k < 3; k++) {
    const float add = p->add[p->src[k]];
    for (int i = 0; i < 256; i++) {
      /* without saturation the value read is the byte itself: brightness and contrast too */
      const int y = p->sat ? i : (int)p->t1[i];
      const int z = p->pca ? (int)round_clip((float)y + add) : y;
      if (itemsize == 4)
        p->out[k][i] = ((const uint32_t *)lut)[k * 256 + z];
      else if (itemsize == 2)
        p->out[k][i] = ((const uint16_t *)lut)[k * 256 + z];
      else
        p->out[k][i] = (uint32_t)z;
    }
  }
}

/* One pixel of rc_colour_store_row in C: the SIMD loop's arithmetic, value for value. */
static inline void store_pixel(const rc_colour_plan *p, const uint8_t *s, int x, void *const dst[3],
                               const float *const mean[3], float contrast) {
  int y[3] = {s[0], s[1], s[2]};
  if (p->sat) {
    float f[3];
    for (int c = 0; c < 3; c++) f[c] = p->t1_on ? p->t1[s[c]] : (float)s[c];
    const float gb = grey_of(f) * p->bs;
    for (int c = 0; c < 3; c++) y[c] = (int)round_clip(f[c] * p->as + gb);
  }
  for (int k = 0; k < 3; k++) {
    const uint32_t v = p->out[k][y[p->src[k]]];
    /* NCHW: item x of plane k; NHWC: item 3x + k of the row */
    const size_t i = p->nhwc ? (size_t)3 * x + k : (size_t)x;
    void *d = p->nhwc ? dst[0] : dst[k];
    if (p->itemsize == 4) {
      float f;
      memcpy(&f, &v, 4);
      ((float *)d)[i] = mean[k] ? f - contrast * mean[k][x] : f;
    } else if (p->itemsize == 2) {
      ((uint16_t *)d)[i] = (uint16_t)v;
    } else {
      ((uint8_t *)d)[i] = (uint8_t)v;
    }
  }
}

#ifdef RC_COLOUR_AVX2
/* Eight pixels (24 bytes at s) as three vectors of one channel's values each, from the bytes
 * (pshufb: each channel's bytes together in the low 8 bytes, then widened). */
AVX2_INLINE void split8(const uint8_t *s, __m256i v[3]) {
  const __m128i lo = _mm_loadu_si128((const __m128i *)s);
  const __m128i hi = _mm_loadl_epi64((const __m128i *)(s + 16));
  const __m128i m_lo[3] = {
      _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
      _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
      _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1)};
  const __m128i m_hi[3] = {
      _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, -1, -1, -1, -1, -1, -1, -1, -1),
      _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, -1, -1, -1, -1, -1, -1, -1, -1),
      _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, -1, -1, -1, -1, -1, -1, -1, -1)};
#pragma GCC unroll 3
  for (int c = 0; c < 3; c++)
    v[c] = _mm256_cvtepu8_epi32(
        _mm_or_si128(_mm_shuffle_epi8(lo, m_lo[c]), _mm_shuffle_epi8(hi, m_hi[c])));
}

/* The contrast's sums (rc_colour_row_prepare) 24 values a step: value i + 8t + l of lane l
 * of acc[t] is channel (8t + l) % 3. Returns the pixels done. */
__attribute__((target("avx2"))) static size_t row_sums_avx2(const rc_colour_plan *p,
                                                            const uint8_t *rgb, size_t npix,
                                                            double sums[3]) {
  __m256 acc[3] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  const __m256 ab = _mm256_set1_ps(p->ab);
  const int bright = p->bright;
  size_t i = 0;
  /* (per-lane sums stay exact, whole numbers under 2^24, for rows up to 500 k pixels) */
  for (; i + 8 <= npix && i < 500000; i += 8) {
    const uint8_t *s = rgb + 3 * i;
#pragma GCC unroll 3
    for (int t = 0; t < 3; t++) { /* (tb's arithmetic: a gather is slower on some CPUs) */
      const __m128i b = _mm_loadl_epi64((const __m128i *)(s + 8 * t));
      __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
      if (bright) x = round_clip8(_mm256_mul_ps(x, ab));
      acc[t] = _mm256_add_ps(acc[t], x);
    }
  }
  float lanes[24];
  for (int t = 0; t < 3; t++) _mm256_storeu_ps(lanes + 8 * t, acc[t]);
  for (int t = 0; t < 3; t++)
    for (int l = 0; l < 8; l++) sums[(8 * t + l) % 3] += lanes[8 * t + l];
  return i;
}

/* Output channel k's vector v (8 items, in the order of the source pixels) stored at `at`:
 * mirrored when flip, less contrast * mean where a mean image is given. */
AVX2_INLINE void put8(const rc_colour_plan *p, int k, __m256i v, int flip, void *const dst[3],
                      const float *const mean[3], __m256 ct, int at) {
  if (flip) v = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0));
  if (p->itemsize == 4) {
    float *d = (float *)dst[k] + at;
    if (mean[k])
      _mm256_storeu_ps(d, _mm256_sub_ps(_mm256_castsi256_ps(v),
                                        _mm256_mul_ps(ct, _mm256_loadu_ps(mean[k] + at))));
    else
      _mm256_storeu_si256((__m256i *)d, v);
  } else {
    const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    if (p->itemsize == 2)
      _mm_storeu_si128((__m128i *)((uint16_t *)dst[k] + at), w);
    else
      _mm_storel_epi64((__m128i *)((uint8_t *)dst[k] + at), _mm_packus_epi16(w, w));
  }
}

/* The three output channels' vectors of 8 pixels stored: each into its plane (NCHW), or
 * interleaved into one row (NHWC: items 3x + k), mirrored and less the mean as put8. */
AVX2_INLINE void put24(const rc_colour_plan *p, __m256i v[3], int flip, void *const dst[3],
                       const float *const mean[3], __m256 ct, int at) {
  if (!p->nhwc) {
#pragma GCC unroll 3
    for (int k = 0; k < 3; k++) put8(p, k, v[k], flip, dst, mean, ct, at);
    return;
  }
#pragma GCC unroll 3
  for (int k = 0; k < 3; k++) {
    if (flip) v[k] = _mm256_permutevar8x32_epi32(v[k], _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0));
    if (p->itemsize == 4 && mean[k])
      v[k] = _mm256_castps_si256(_mm256_sub_ps(_mm256_castsi256_ps(v[k]),
                                               _mm256_mul_ps(ct, _mm256_loadu_ps(mean[k] + at))));
  }
  /* o0 = a0 b0 c0 a1 b1 c1 a2 b2, o1 = c2 a3 b3 c3 a4 b4 c4 a5, o2 = b5 c5 a6 b6 c6 a7 b7 c7 */
  const __m256i a = v[0], b = v[1], c = v[2];
  const __m256i pa0 = _mm256_setr_epi32(0, 0, 0, 1, 0, 0, 2, 0);
  const __m256i pb0 = _mm256_setr_epi32(0, 0, 0, 0, 1, 0, 0, 2);
  const __m256i pc0 = _mm256_setr_epi32(0, 0, 0, 0, 0, 1, 0, 0);
  const __m256i pa1 = _mm256_setr_epi32(0, 3, 0, 0, 4, 0, 0, 5);
  const __m256i pb1 = _mm256_setr_epi32(0, 0, 3, 0, 0, 4, 0, 0);
  const __m256i pc1 = _mm256_setr_epi32(2, 0, 0, 3, 0, 0, 4, 0);
  const __m256i pa2 = _mm256_setr_epi32(0, 0, 6, 0, 0, 7, 0, 0);
  const __m256i pb2 = _mm256_setr_epi32(5, 0, 0, 6, 0, 0, 7, 0);
  const __m256i pc2 = _mm256_setr_epi32(0, 5, 0, 0, 6, 0, 0, 7);
  __m256i o[3];
  o[0] = _mm256_blend_epi32(_mm256_blend_epi32(_mm256_permutevar8x32_epi32(a, pa0),
                                               _mm256_permutevar8x32_epi32(b, pb0), 0x92),
                            _mm256_permutevar8x32_epi32(c, pc0), 0x24);
  o[1] = _mm256_blend_epi32(_mm256_blend_epi32(_mm256_permutevar8x32_epi32(a, pa1),
                                               _mm256_permutevar8x32_epi32(b, pb1), 0x24),
                            _mm256_permutevar8x32_epi32(c, pc1), 0x49);
  o[2] = _mm256_blend_epi32(_mm256_blend_epi32(_mm256_permutevar8x32_epi32(a, pa2),
                                               _mm256_permutevar8x32_epi32(b, pb2), 0x49),
                            _mm256_permutevar8x32_epi32(c, pc2), 0x92);
#pragma GCC unroll 3
  for (int j = 0; j < 3; j++) {
    const size_t i = (size_t)3 * at + 8 * j; /* the row's item */
    if (p->itemsize == 4) {
      _mm256_storeu_si256((__m256i *)((float *)dst[0] + i), o[j]);
    } else {
      const __m128i w =
          _mm_packus_epi32(_mm256_castsi256_si128(o[j]), _mm256_extracti128_si256(o[j], 1));
      if (p->itemsize == 2)
        _mm_storeu_si128((__m128i *)((uint16_t *)dst[0] + i), w);
      else
        _mm_storel_epi64((__m128i *)((uint8_t *)dst[0] + i), _mm_packus_epi16(w, w));
    }
  }
}

/* rc_colour_store_row's loop, 8 pixels a step. sat: saturation runs (else brightness and
 * contrast are in the tables, unless direct); direct: the item is the value itself (uint8,
 * or float32 with no normalisation), computed with PCA's shift and no table (a gather costs
 * more than the arithmetic on some CPUs). */
AVX2_INLINE void store_row_avx2_k(const rc_colour_plan *p, const uint8_t *rgb, int W, int flip,
                                  void *const dst[3], const float *const mean[3], float contrast,
                                  int sat, int direct) {
  const __m256 as = _mm256_set1_ps(p->as), bs = _mm256_set1_ps(p->bs);
  const __m256 ab = _mm256_set1_ps(p->ab), ac = _mm256_set1_ps(p->ac);
  const __m256 beta = _mm256_set1_ps(p->beta);
  const __m256 ct = _mm256_set1_ps(contrast);
  const __m256 add[3] = {_mm256_set1_ps(p->add[0]), _mm256_set1_ps(p->add[1]),
                         _mm256_set1_ps(p->add[2])};
  const int s0 = p->src[0], s2 = p->src[2];
  int x = 0;
  for (; x + 8 <= W; x += 8) {
    __m256i idx[3];
    split8(rgb + 3 * x, idx);
    const int at = flip ? W - 8 - x : x;
    if (!sat && !direct) { /* everything in the tables */
      __m256i v[3] = {_mm256_i32gather_epi32((const int *)p->out[0], idx[s0], 4),
                      _mm256_i32gather_epi32((const int *)p->out[1], idx[1], 4),
                      _mm256_i32gather_epi32((const int *)p->out[2], idx[s2], 4)};
      put24(p, v, flip, dst, mean, ct, at);
      continue;
    }
    __m256 f[3];
#pragma GCC unroll 3
    for (int c = 0; c < 3; c++) { /* t1's arithmetic */
      f[c] = _mm256_cvtepi32_ps(idx[c]);
      if (p->bright) f[c] = round_clip8(_mm256_mul_ps(f[c], ab));
      if (p->contrast) f[c] = round_clip8(_mm256_add_ps(_mm256_mul_ps(f[c], ac), beta));
    }
    if (sat) {
      /* grey_of's order: (b * 0.299 + g * 0.587) + r * 0.114 */
      const __m256 g = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(f[2], _mm256_set1_ps(0.299f)),
                                                   _mm256_mul_ps(f[1], _mm256_set1_ps(0.587f))),
                                     _mm256_mul_ps(f[0], _mm256_set1_ps(0.114f)));
      const __m256 gb = _mm256_mul_ps(g, bs);
#pragma GCC unroll 3
      for (int c = 0; c < 3; c++) f[c] = round_clip8(_mm256_add_ps(_mm256_mul_ps(f[c], as), gb));
    }
    if (direct) {
      if (p->pca)
#pragma GCC unroll 3
        for (int c = 0; c < 3; c++) f[c] = round_clip8(_mm256_add_ps(f[c], add[c]));
      const __m256 u[3] = {f[s0], f[1], f[s2]};
      __m256i v[3];
#pragma GCC unroll 3
      for (int k = 0; k < 3; k++)
        v[k] = p->itemsize == 4 ? _mm256_castps_si256(u[k]) : _mm256_cvtps_epi32(u[k]);
      put24(p, v, flip, dst, mean, ct, at);
    } else {
      const __m256i y[3] = {_mm256_cvtps_epi32(f[s0]), _mm256_cvtps_epi32(f[1]),
                            _mm256_cvtps_epi32(f[s2])};
      __m256i v[3];
#pragma GCC unroll 3
      for (int k = 0; k < 3; k++) v[k] = _mm256_i32gather_epi32((const int *)p->out[k], y[k], 4);
      put24(p, v, flip, dst, mean, ct, at);
    }
  }
  for (; x < W; x++) store_pixel(p, rgb + 3 * x, flip ? W - 1 - x : x, dst, mean, contrast);
}

__attribute__((target("avx2"))) static void store_row_avx2(const rc_colour_plan *p,
                                                           const uint8_t *rgb, int W, int flip,
                                                           void *const dst[3],
                                                           const float *const mean[3],
                                                           float contrast) {
  if (p->direct && p->sat)
    store_row_avx2_k(p, rgb, W, flip, dst, mean, contrast, 1, 1);
  else if (p->direct)
    store_row_avx2_k(p, rgb, W, flip, dst, mean, contrast, 0, 1);
  else if (p->sat)
    store_row_avx2_k(p, rgb, W, flip, dst, mean, contrast, 1, 0);
  else
    store_row_avx2_k(p, rgb, W, flip, dst, mean, contrast, 0, 0);
}
#endif

void rc_colour_store_row(const rc_colour_plan *p, const uint8_t *rgb, int W, int flip,
                         void *const dst[3], const float *const mean[3], float contrast) {
#ifdef RC_COLOUR_AVX2
  if (colour_avx2) {
    store_row_avx2(p, rgb, W, flip, dst, mean, contrast);
    return;
  }
#endif
  for (int x = 0; x < W; x++)
    store_pixel(p, rgb + 3 * x, flip ? W - 1 - x : x, dst, mean, contrast);
}
