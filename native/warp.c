/* Affine warp (warp.h), OpenCV's warpAffine and cv::resize arithmetic for 8-bit RGB. Area's
 * box average is float arithmetic in OpenCV's order: no fused multiply-adds here. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include "warp.h"

#include "resample.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define AB_BITS 10 /* warpAffine's fixed point for the map (MAX(10, INTER_BITS)) */
#define AB_SCALE (1 << AB_BITS)
#define INTER_BITS 5 /* positions of 1/32 pixel */
#define TAB_SIZE (1 << INTER_BITS)
#define COEF_BITS 15 /* tap weights sum to 1 << 15 */
#define COEF_SCALE (1 << COEF_BITS)

/* 2-D tap tables [fy * 32 + fx][ky * k + kx], as OpenCV's initInterTab2D builds them (int, not
 * short: a whole-pixel position's weight is 1 << 15). */
static int32_t tab_linear[TAB_SIZE * TAB_SIZE][4];
static int32_t tab_cubic[TAB_SIZE * TAB_SIZE][16];
static int32_t tab_lanczos[TAB_SIZE * TAB_SIZE][64];
static pthread_once_t tabs_once = PTHREAD_ONCE_INIT;

static void taps_linear(float x, float *c) {
  c[0] = 1.f - x;
  c[1] = x;
}

static void taps_cubic(float x, float *c) {
  const float A = -0.75f;
  c[0] = ((A * (x + 1) - 5 * A) * (x + 1) + 8 * A) * (x + 1) - 4 * A;
  c[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
  c[2] = ((A + 2) * (1 - x) - (A + 3)) * (1 - x) * (1 - x) + 1;
  c[3] = 1.f - c[0] - c[1] - c[2];
}

static void taps_lanczos(float x, float *c) {
  static const double s45 = 0.70710678118654752440084436210485;
  static const double cs[8][2] = {{1, 0},  {-s45, -s45}, {0, 1},  {s45, -s45},
                                  {-1, 0}, {s45, s45},   {0, -1}, {-s45, s45}};
  if (x < 1.1920929e-07f) { /* FLT_EPSILON: the sample itself */
    for (int i = 0; i < 8; i++) c[i] = 0;
    c[3] = 1;
    return;
  }
  float sum = 0;
  const double y0 = -(x + 3) * RC_PI * 0.25, s0 = sin(y0), c0 = cos(y0);
  for (int i = 0; i < 8; i++) {
    const double y = -(x + 3 - i) * RC_PI * 0.25;
    c[i] = (float)((cs[i][0] * s0 + cs[i][1] * c0) / (y * y));
    sum += c[i];
  }
  sum = 1.f / sum;
  for (int i = 0; i < 8; i++) c[i] *= sum;
}

static void build_tab(int32_t *tab, int k, void (*taps)(float, float *)) {
  float vx[8], vy[8];
  for (int fy = 0; fy < TAB_SIZE; fy++) {
    taps((float)fy / TAB_SIZE, vy);
    for (int fx = 0; fx < TAB_SIZE; fx++) {
      taps((float)fx / TAB_SIZE, vx);
      int32_t *t = tab + (size_t)(fy * TAB_SIZE + fx) * k * k;
      int sum = 0;
      for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++)
          sum += t[i * k + j] = (int32_t)lrintf(vy[i] * vx[j] * COEF_SCALE);
      /* Rounding left the sum off 1 << 15: the difference goes to the largest (or smallest)
       * of the central taps, as OpenCV does. */
      const int diff = sum - COEF_SCALE, c = k / 2;
      int lo = c * k + c, hi = lo;
      for (int i = c; i < c + 2 && i < k; i++)
        for (int j = c; j < c + 2 && j < k; j++) {
          if (t[i * k + j] < t[lo])
            lo = i * k + j;
          else if (t[i * k + j] > t[hi])
            hi = i * k + j;
        }
      if (diff < 0)
        t[hi] -= diff;
      else if (diff > 0)
        t[lo] -= diff;
    }
  }
}

static void build_tabs(void) {
  build_tab(&tab_linear[0][0], 2, taps_linear);
  build_tab(&tab_cubic[0][0], 4, taps_cubic);
  build_tab(&tab_lanczos[0][0], 8, taps_lanczos);
}

/* OpenCV's saturate_cast<int>(double): round to nearest even, clamped. */
static int sat_round(double v) {
  if (!(v > -2147483648.0)) return INT32_MIN; /* (NaN too) */
  if (v >= 2147483647.0) return INT32_MAX;
  return (int)lrint(v);
}

static uint8_t clamp_u8(int v) {
  return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static int clampi(int v, int lo, int hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

void rc_warp_bounds(const rc_warp *wp, int out_w, int out_h, int src_w, int src_h, int box[4]) {
  double lo_x = INFINITY, hi_x = -INFINITY, lo_y = INFINITY, hi_y = -INFINITY;
  for (int cy = 0; cy < 2; cy++)
    for (int cx = 0; cx < 2; cx++) {
      const double x = (cx ? out_w - 1 : 0) + wp->off_x, y = (cy ? out_h - 1 : 0) + wp->off_y;
      const double sx = wp->m[0] * x + wp->m[1] * y + wp->m[2];
      const double sy = wp->m[3] * x + wp->m[4] * y + wp->m[5];
      lo_x = fmin(lo_x, sx), hi_x = fmax(hi_x, sx), lo_y = fmin(lo_y, sy), hi_y = fmax(hi_y, sy);
    }
  /* Taps reach `before` pixels before the sample's whole pixel and `after` past it; one more
   * either side for the fixed-point rounding of positions. */
  const int before = wp->interp == RC_CV_CUBIC ? 1 : wp->interp == RC_CV_LANCZOS4 ? 3 : 0;
  const int after = wp->interp == RC_CV_CUBIC ? 3 : wp->interp == RC_CV_LANCZOS4 ? 5 : 2;
  /* (area's box spans the sample's whole extent) */
  const int area = wp->border == RC_BORDER_REPLICATE && wp->interp == RC_CV_AREA;
  const int bx = area ? (int)fmin(ceil(fabs(wp->m[0]) / 2), 1e6) : 0;
  const int by = area ? (int)fmin(ceil(fabs(wp->m[4]) / 2), 1e6) : 0;
  const double big = 1e9; /* (keeps the casts defined for maps far off the image) */
  const double x0 = floor(fmax(lo_x, -big)) - before - 1 - bx;
  const double x1 = floor(fmin(hi_x, big)) + after + 1 + bx;
  const double y0 = floor(fmax(lo_y, -big)) - before - 1 - by;
  const double y1 = floor(fmin(hi_y, big)) + after + 1 + by;
  box[0] = (int)fmax(x0, 0), box[1] = (int)fmax(y0, 0);
  box[2] = (int)fmin(x1, src_w), box[3] = (int)fmin(y1, src_h);
  if (box[2] <= box[0] || box[3] <= box[1]) box[0] = box[1] = box[2] = box[3] = 0;
}

void rc_warp_scale_source(rc_warp *wp, double fx, double fy) {
  wp->m[0] *= fx, wp->m[1] *= fx, wp->m[2] = (wp->m[2] + 0.5) * fx - 0.5;
  wp->m[3] *= fy, wp->m[4] *= fy, wp->m[5] = (wp->m[5] + 0.5) * fy - 0.5;
}

/* One pixel of k x k taps from (sx, sy) on, those outside the source the fill value. */
static void taps_border(const rc_warp *wp, const uint8_t *src, size_t stride, int org_x, int org_y,
                        int W, int H, int sx, int sy, const int32_t *t, int k, uint8_t *d) {
  int acc[3] = {0, 0, 0};
  for (int i = 0; i < k; i++) {
    const int r = sy + i;
    for (int j = 0; j < k; j++) {
      const int c = sx + j, w = t[i * k + j];
      if (r < 0 || r >= H || c < 0 || c >= W) {
        acc[0] += wp->fill * w, acc[1] += wp->fill * w, acc[2] += wp->fill * w;
        continue;
      }
      const uint8_t *p = src + (size_t)(r - org_y) * stride + (size_t)(c - org_x) * 3;
      acc[0] += p[0] * w, acc[1] += p[1] * w, acc[2] += p[2] * w;
    }
  }
  for (int ch = 0; ch < 3; ch++) d[ch] = clamp_u8((acc[ch] + (1 << (COEF_BITS - 1))) >> COEF_BITS);
}

/* ---- REPLICATE: cv::resize's arithmetic (resizeGeneric_, resizeArea_) along each axis ---- */

#define RS_BITS 11 /* cv::resize's INTER_RESIZE_COEF_BITS */
#define RS_MAX_TAPS 4096

/* The taps of one output sample along one axis: source indices (clamped to 0..n-1) and 11-bit
 * weights; returns their number. s: the sample's centre in source pixels, scale: source pixels
 * per output pixel along the axis, box: area's box average (else its linear form). */
static int axis_taps(int interp, int box, double s, double scale, int n, int *idx, int *wt,
                     float *alpha) {
  float c[8];
  int k = 0, first = 0;
  const double edge = s + 0.5 - 0.5 * scale; /* the sample's left edge, cv's dx * scale */
  if (interp == RC_CV_NEAREST) {
    idx[0] = clampi((int)floor(edge), 0, n - 1), wt[0] = 1 << RS_BITS;
    return 1;
  }
  if (interp == RC_CV_AREA && box) { /* computeResizeAreaTab, clipped to the source */
    const double f1 = fmax(edge, 0), f2 = fmin(edge + scale, n), cell = fmin(scale, f2 - f1);
    if (!(cell > 0)) return idx[0] = clampi((int)floor(s), 0, n - 1), alpha[0] = 1, wt[0] = 0, 1;
    int s1 = (int)ceil(f1), s2 = (int)floor(f2);
    s2 = s2 < n - 1 ? s2 : n - 1;
    s1 = s1 < s2 ? s1 : s2;
    if (s1 - f1 > 1e-3 && k < RS_MAX_TAPS) idx[k] = s1 - 1, alpha[k++] = (float)((s1 - f1) / cell);
    for (int i = s1; i < s2 && k < RS_MAX_TAPS; i++) idx[k] = i, alpha[k++] = (float)(1.0 / cell);
    if (f2 - s2 > 1e-3 && k < RS_MAX_TAPS)
      idx[k] = s2, alpha[k++] = (float)(fmin(fmin(f2 - s2, 1.), cell) / cell);
    for (int i = 0; i < k; i++) wt[i] = 0; /* (float weights only) */
    return k;
  }
  int sx, taps;
  float fx;
  if (interp == RC_CV_AREA) { /* area enlarging: a linear step at each source pixel's edge */
    sx = (int)floor(edge);
    fx = (float)((edge + scale - (sx + 1)) / scale);
    fx = fx <= 0 ? 0.f : fx - floorf(fx);
  } else {
    fx = (float)s;
    sx = (int)floorf(fx);
    fx -= (float)sx;
  }
  if (interp == RC_CV_CUBIC) {
    taps = 4, first = sx - 1;
    taps_cubic(fx, c);
  } else if (interp == RC_CV_LANCZOS4) {
    taps = 8, first = sx - 3;
    taps_lanczos(fx, c);
  } else { /* linear, and area's linear form */
    if (sx < 0) fx = 0, sx = 0;
    if (sx >= n - 1) fx = 0, sx = n - 1;
    taps = 2, first = sx;
    taps_linear(fx, c);
  }
  for (int i = 0; i < taps; i++)
    idx[i] = clampi(first + i, 0, n - 1), wt[i] = (int)lrintf(c[i] * (1 << RS_BITS));
  return taps;
}

/* Area's box average of one pixel. OpenCV's resizeArea_: float sums of each row's taps, then
 * of the rows, rounded; its resizeAreaFast_ for whole scales (area = the box's pixels): the
 * integer sum, (sum + 2) >> 2 for 2 x 2, else rounded times 1 / area. */
static void area_pixel(const uint8_t *src, size_t stride, int org_x, int org_y, const int *yi,
                       const float *ya, int ny, const int *xi, const float *xa, int nx, int area,
                       uint8_t *dst) {
  if (area && ny * nx == area) {
    int sum[3] = {0, 0, 0};
    for (int i = 0; i < ny; i++)
      for (int j = 0; j < nx; j++) {
        const uint8_t *p = src + (size_t)(yi[i] - org_y) * stride + (size_t)(xi[j] - org_x) * 3;
        sum[0] += p[0], sum[1] += p[1], sum[2] += p[2];
      }
    for (int ch = 0; ch < 3; ch++)
      dst[ch] = area == 4 ? (uint8_t)((sum[ch] + 2) >> 2)
                          : clamp_u8((int)lrintf((float)sum[ch] * (1.f / (float)area)));
    return;
  }
  float acc[3] = {0, 0, 0};
  for (int i = 0; i < ny; i++) {
    const uint8_t *row = src + (size_t)(yi[i] - org_y) * stride;
    float h[3] = {0, 0, 0};
    for (int j = 0; j < nx; j++) {
      const uint8_t *p = row + (size_t)(xi[j] - org_x) * 3;
      h[0] += (float)p[0] * xa[j], h[1] += (float)p[1] * xa[j], h[2] += (float)p[2] * xa[j];
    }
    for (int ch = 0; ch < 3; ch++) acc[ch] += ya[i] * h[ch];
  }
  for (int ch = 0; ch < 3; ch++) dst[ch] = clamp_u8((int)lrintf(acc[ch]));
}

/* A row of bilinear samples (and area's linear form) from source rows r0 and r1 (weights yw):
 * OpenCV 3.4's SSE2 vertical pass (VResizeLinearVec_32s8u), which MXNet 1.9.1 runs: each row's
 * 11-bit sum shifted right 4, 16-bit high products, then rounded off 2 bits. */
static void linear_resize_row(const rc_warp *wp, const uint8_t *r0, const uint8_t *r1, int org_x,
                              const int *yw, int out_w, uint8_t *dst) {
  const int b0 = yw[0], b1 = yw[1];
#ifdef __SSE2__
  const __m128i z = _mm_setzero_si128(), two = _mm_set1_epi16(2);
  const __m128i vb0 = _mm_set1_epi16((short)b0), vb1 = _mm_set1_epi16((short)b1);
#endif
  for (int x = 0; x < out_w; x++, dst += 3) {
    if (!wp->xn[x]) { /* centred outside the source */
      dst[0] = dst[1] = dst[2] = wp->fill;
      continue;
    }
    const int *xi = wp->xi + (size_t)x * wp->xk, *xw = wp->xw + (size_t)x * wp->xk;
    const size_t i0 = (size_t)(xi[0] - org_x) * 3, i1 = (size_t)(xi[1] - org_x) * 3;
    const int a0 = xw[0], a1 = xw[1];
#ifdef __SSE2__
    if (i1 == i0 + 3) { /* the two taps side by side (not clamped at an edge) */
      /* the horizontal sums by madd, then OpenCV's own 16-bit steps */
      const __m128i wx = _mm_set1_epi32((a1 << 16) | (a0 & 0xFFFF));
      const __m128i p = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(r0 + i0)), z);
      const __m128i q = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(r1 + i0)), z);
      const __m128i h0 = _mm_madd_epi16(_mm_unpacklo_epi16(p, _mm_srli_si128(p, 6)), wx);
      const __m128i h1 = _mm_madd_epi16(_mm_unpacklo_epi16(q, _mm_srli_si128(q, 6)), wx);
      const __m128i s = _mm_packs_epi32(_mm_srai_epi32(h0, 4), _mm_srai_epi32(h1, 4));
      const __m128i v =
          _mm_adds_epi16(_mm_mulhi_epi16(s, vb0), _mm_mulhi_epi16(_mm_srli_si128(s, 8), vb1));
      const __m128i r = _mm_srai_epi16(_mm_adds_epi16(v, two), 2);
      const int32_t px = _mm_cvtsi128_si32(_mm_packus_epi16(r, z));
      memcpy(dst, &px, 4); /* (the fourth byte is the next pixel's, or the row's spare one) */
      continue;
    }
#endif
    for (int ch = 0; ch < 3; ch++) {
      const int h0 = r0[i0 + ch] * a0 + r0[i1 + ch] * a1, h1 = r1[i0 + ch] * a0 + r1[i1 + ch] * a1;
      const int v = (((h0 >> 4) * b0) >> 16) + (((h1 >> 4) * b1) >> 16);
      dst[ch] = clamp_u8((v + 2) >> 2);
    }
  }
}

/* One output row the way cv::resize computes it: per sample, the horizontal sums of each tap
 * row (integers, weights of 1 << 11), then the vertical sum, rounded off 22 bits. */
static void resize_row(const rc_warp *wp, const uint8_t *src, size_t stride, int org_x, int org_y,
                       int W, int H, int y, int out_w, uint8_t *dst) {
  const double sy = wp->m[4] * ((double)y + wp->off_y) + wp->m[5];
  const int box = wp->m[0] >= 1 && wp->m[4] >= 1; /* cv: area averages when both shrink */
  if (sy < -0.5 || sy >= H - 0.5) {
    for (int x = 0; x < 3 * out_w; x++) dst[x] = wp->fill;
    return;
  }
  int yi[RS_MAX_TAPS], yw[RS_MAX_TAPS];
  float ya[RS_MAX_TAPS];
  const int ny = axis_taps(wp->interp, box, sy, wp->m[4], H, yi, yw, ya);
  const int area_box = wp->interp == RC_CV_AREA && box;
  const int ix = (int)lrint(wp->m[0]), iy = (int)lrint(wp->m[4]); /* cv's is_area_fast */
  const int fast = area_box && fabs(wp->m[0] - ix) < 2.220446049250313e-16 &&
                   fabs(wp->m[4] - iy) < 2.220446049250313e-16;
  if (ny == 2 && (wp->interp == RC_CV_LINEAR || (wp->interp == RC_CV_AREA && !box))) {
    linear_resize_row(wp, src + (size_t)(yi[0] - org_y) * stride,
                      src + (size_t)(yi[1] - org_y) * stride, org_x, yw, out_w, dst);
    return;
  }
  for (int x = 0; x < out_w; x++, dst += 3) {
    const int nx = wp->xn[x];
    if (!nx) { /* centred outside the source */
      dst[0] = dst[1] = dst[2] = wp->fill;
      continue;
    }
    const int *xi = wp->xi + (size_t)x * wp->xk, *xw = wp->xw + (size_t)x * wp->xk;
    const float *xa = wp->xa + (size_t)x * wp->xk;
    if (area_box) {
      area_pixel(src, stride, org_x, org_y, yi, ya, ny, xi, xa, nx, fast ? ix * iy : 0, dst);
      continue;
    }
    int64_t acc[3] = {0, 0, 0};
    for (int i = 0; i < ny; i++) {
      const uint8_t *row = src + (size_t)(yi[i] - org_y) * stride;
      int64_t h[3] = {0, 0, 0};
      for (int j = 0; j < nx; j++) {
        const uint8_t *p = row + (size_t)(xi[j] - org_x) * 3;
        h[0] += p[0] * xw[j], h[1] += p[1] * xw[j], h[2] += p[2] * xw[j];
      }
      acc[0] += h[0] * yw[i], acc[1] += h[1] * yw[i], acc[2] += h[2] * yw[i];
    }
    if (wp->interp == RC_CV_NEAREST) {
      for (int ch = 0; ch < 3; ch++) dst[ch] = (uint8_t)(acc[ch] >> (2 * RS_BITS));
      continue;
    }
    for (int ch = 0; ch < 3; ch++) {
      const int64_t v = (acc[ch] + ((int64_t)1 << (2 * RS_BITS - 1))) >> (2 * RS_BITS);
      dst[ch] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
  }
}

/* The most taps a column of a REPLICATE map has. */
static int max_taps(const rc_warp *wp) {
  if (wp->interp != RC_CV_AREA || !(wp->m[0] >= 1 && wp->m[4] >= 1)) return 8;
  const double k = ceil(wp->m[0]) + 2;
  return k < RS_MAX_TAPS ? (int)k : RS_MAX_TAPS;
}

size_t rc_warp_scratch_bytes(const rc_warp *wp, int out_w) {
  if (wp->border == RC_BORDER_CONSTANT) return (size_t)out_w * 2 * sizeof(int32_t);
  return (size_t)out_w * (sizeof(int32_t) + (size_t)max_taps(wp) * 3 * sizeof(int32_t));
}

void rc_warp_prepare(rc_warp *wp, int out_w, int src_w, int mirror, void *scratch) {
  pthread_once(&tabs_once, build_tabs);
  int32_t *s = scratch;
  if (wp->border == RC_BORDER_CONSTANT) { /* warpAffine's adelta, bdelta */
    wp->adelta = s, wp->bdelta = s + out_w;
    for (int x = 0; x < out_w; x++) {
      const double xx = (double)x + wp->off_x;
      const int to = mirror ? out_w - 1 - x : x;
      wp->adelta[to] = sat_round(wp->m[0] * xx * AB_SCALE);
      wp->bdelta[to] = sat_round(wp->m[3] * xx * AB_SCALE);
    }
    return;
  }
  const int k = wp->xk = max_taps(wp);
  const int box = wp->m[0] >= 1 && wp->m[4] >= 1;
  wp->xn = s, wp->xi = s + out_w, wp->xw = wp->xi + (size_t)out_w * k;
  wp->xa = (float *)(wp->xw + (size_t)out_w * k);
  for (int x = 0; x < out_w; x++) {
    const double sx = wp->m[0] * ((double)x + wp->off_x) + wp->m[2];
    const size_t to = (size_t)(mirror ? out_w - 1 - x : x);
    wp->xn[to] = sx < -0.5 || sx >= src_w - 0.5
                     ? 0
                     : axis_taps(wp->interp, box, sx, wp->m[0], src_w, wp->xi + to * k,
                                 wp->xw + to * k, wp->xa + to * k);
  }
}

/* A bilinear sample with all four taps in the source: OpenCV's 15-bit weights are
 * 32 (32 - fx)(32 - fy) and so on, so the sum is the 5-bit horizontal pass then the vertical
 * one, times 32: rounded off 15 bits, (v + 512) >> 10. */
static inline void linear_pixel(const uint8_t *p, size_t stride, int fx, int fy, uint8_t *d) {
#ifdef __SSE2__
  const __m128i z = _mm_setzero_si128();
  const __m128i wx = _mm_set1_epi32((fx << 16) | (TAB_SIZE - fx));
  const __m128i wy = _mm_set1_epi32((fy << 16) | (TAB_SIZE - fy));
  const __m128i a = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)p), z);
  const __m128i b = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(p + stride)), z);
  /* (r0 r1 g0 g1 b0 b1 ..) of each row: one madd gives its three horizontal sums */
  const __m128i h0 = _mm_madd_epi16(_mm_unpacklo_epi16(a, _mm_srli_si128(a, 6)), wx);
  const __m128i h1 = _mm_madd_epi16(_mm_unpacklo_epi16(b, _mm_srli_si128(b, 6)), wx);
  const __m128i h = _mm_packs_epi32(h0, h1); /* (h0r h0g h0b . h1r h1g h1b .) */
  __m128i v = _mm_madd_epi16(_mm_unpacklo_epi16(h, _mm_srli_si128(h, 8)), wy);
  v = _mm_srai_epi32(_mm_add_epi32(v, _mm_set1_epi32(512)), 10);
  v = _mm_packus_epi16(_mm_packs_epi32(v, v), z);
  const int32_t px = _mm_cvtsi128_si32(v);
  memcpy(d, &px, 4); /* (the fourth byte is the next pixel's, or the row's spare one) */
#else
  for (int ch = 0; ch < 3; ch++) {
    const int h0 = p[ch] * (TAB_SIZE - fx) + p[ch + 3] * fx;
    const int h1 = p[stride + ch] * (TAB_SIZE - fx) + p[stride + ch + 3] * fx;
    d[ch] = (uint8_t)((h0 * (TAB_SIZE - fy) + h1 * fy + 512) >> 10);
  }
#endif
}

/* Bilinear samples x0..x1 of a row, every tap in the source (no checks). */
static void linear_span(const rc_warp *wp, const uint8_t *src, size_t stride, int org_x, int org_y,
                        int64_t X0, int64_t Y0, int x0, int x1, uint8_t *dst) {
  for (int x = x0; x < x1; x++) {
    const int64_t fxy = (X0 + wp->adelta[x]) >> (AB_BITS - INTER_BITS);
    const int64_t fyy = (Y0 + wp->bdelta[x]) >> (AB_BITS - INTER_BITS);
    const size_t at =
        (size_t)((fyy >> INTER_BITS) - org_y) * stride + (size_t)((fxy >> INTER_BITS) - org_x) * 3;
    linear_pixel(src + at, stride, (int)(fxy & (TAB_SIZE - 1)), (int)(fyy & (TAB_SIZE - 1)),
                 dst + 3 * (size_t)x);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RC_WARP_AVX2 1

/* linear_span on AVX2, a chunk of samples at a time: their byte offsets and weights computed
 * eight at once, then linear_pixel's steps for two samples on the two 128-bit lanes. (In the
 * run every tap is inside the source, so positions and offsets fit 32 bits.) */
__attribute__((target("avx2"))) static int linear_span_avx2(const rc_warp *wp, const uint8_t *src,
                                                            size_t stride, int org_x, int org_y,
                                                            int64_t X0, int64_t Y0, int x0, int x1,
                                                            uint8_t *dst) {
  enum { CHUNK = 64 };
  int32_t off[CHUNK], wxs[CHUNK], wys[CHUNK];
  const __m256i z = _mm256_setzero_si256(), half = _mm256_set1_epi32(512);
  const __m256i frac = _mm256_set1_epi32(TAB_SIZE - 1), full = _mm256_set1_epi32(TAB_SIZE);
  const __m256i vx0 = _mm256_set1_epi32((int32_t)X0), vy0 = _mm256_set1_epi32((int32_t)Y0);
  const __m256i ox = _mm256_set1_epi32(org_x), oy = _mm256_set1_epi32(org_y);
  const __m256i vstride = _mm256_set1_epi32((int32_t)stride), three = _mm256_set1_epi32(3);
  const __m256i lanes = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  int x = x0;
  for (; x + 2 <= x1; x += CHUNK) {
    const int n = (x1 - x < CHUNK ? x1 - x : CHUNK) & ~1;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256i X = _mm256_srai_epi32(
          _mm256_add_epi32(vx0, _mm256_loadu_si256((const __m256i *)(wp->adelta + x + i))),
          AB_BITS - INTER_BITS);
      const __m256i Y = _mm256_srai_epi32(
          _mm256_add_epi32(vy0, _mm256_loadu_si256((const __m256i *)(wp->bdelta + x + i))),
          AB_BITS - INTER_BITS);
      const __m256i fx = _mm256_and_si256(X, frac), fy = _mm256_and_si256(Y, frac);
      const __m256i sx = _mm256_sub_epi32(_mm256_srai_epi32(X, INTER_BITS), ox);
      const __m256i sy = _mm256_sub_epi32(_mm256_srai_epi32(Y, INTER_BITS), oy);
      _mm256_storeu_si256((__m256i *)(off + i), _mm256_add_epi32(_mm256_mullo_epi32(sy, vstride),
                                                                 _mm256_mullo_epi32(sx, three)));
      _mm256_storeu_si256((__m256i *)(wxs + i),
                          _mm256_or_si256(_mm256_slli_epi32(fx, 16), _mm256_sub_epi32(full, fx)));
      _mm256_storeu_si256((__m256i *)(wys + i),
                          _mm256_or_si256(_mm256_slli_epi32(fy, 16), _mm256_sub_epi32(full, fy)));
    }
    for (; i < n; i++) {
      const int32_t X =
          (int32_t)((uint32_t)X0 + (uint32_t)wp->adelta[x + i]) >> (AB_BITS - INTER_BITS);
      const int32_t Y =
          (int32_t)((uint32_t)Y0 + (uint32_t)wp->bdelta[x + i]) >> (AB_BITS - INTER_BITS);
      const int32_t fx = X & (TAB_SIZE - 1), fy = Y & (TAB_SIZE - 1);
      off[i] = ((Y >> INTER_BITS) - org_y) * (int32_t)stride + ((X >> INTER_BITS) - org_x) * 3;
      wxs[i] = (fx << 16) | (TAB_SIZE - fx), wys[i] = (fy << 16) | (TAB_SIZE - fy);
    }
    uint8_t *d = dst + 3 * (size_t)x;
    for (i = 0; i < n; i += 2, d += 6) {
      const uint8_t *pa = src + off[i], *pb = src + off[i + 1];
      const __m256i wx = _mm256_permutevar8x32_epi32(
          _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(wxs + i))), lanes);
      const __m256i wy = _mm256_permutevar8x32_epi32(
          _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(wys + i))), lanes);
      __m256i a = _mm256_setr_m128i(_mm_loadl_epi64((const __m128i *)pa),
                                    _mm_loadl_epi64((const __m128i *)pb));
      __m256i b = _mm256_setr_m128i(_mm_loadl_epi64((const __m128i *)(pa + stride)),
                                    _mm_loadl_epi64((const __m128i *)(pb + stride)));
      a = _mm256_unpacklo_epi8(a, z);
      b = _mm256_unpacklo_epi8(b, z);
      const __m256i h0 = _mm256_madd_epi16(_mm256_unpacklo_epi16(a, _mm256_srli_si256(a, 6)), wx);
      const __m256i h1 = _mm256_madd_epi16(_mm256_unpacklo_epi16(b, _mm256_srli_si256(b, 6)), wx);
      const __m256i h = _mm256_packs_epi32(h0, h1);
      __m256i v = _mm256_madd_epi16(_mm256_unpacklo_epi16(h, _mm256_srli_si256(h, 8)), wy);
      v = _mm256_srai_epi32(_mm256_add_epi32(v, half), 10);
      v = _mm256_packus_epi16(_mm256_packs_epi32(v, v), z);
      const int32_t first = _mm_cvtsi128_si32(_mm256_castsi256_si128(v));
      const int32_t second = _mm_cvtsi128_si32(_mm256_extracti128_si256(v, 1));
      memcpy(d, &first, 4);
      memcpy(d + 3, &second, 4);
    }
    if (n < CHUNK) return x + n;
  }
  return x;
}
#endif

/* Whether bilinear sample x of the row (X0, Y0) has all four taps in the W x H source. */
static int linear_inside(const rc_warp *wp, int64_t X0, int64_t Y0, int x, int W, int H) {
  const int64_t sx = (X0 + wp->adelta[x]) >> AB_BITS, sy = (Y0 + wp->bdelta[x]) >> AB_BITS;
  return sx >= 0 && sy >= 0 && sx + 2 <= W && sy + 2 <= H;
}

void rc_warp_row(const rc_warp *wp, const uint8_t *src, size_t stride, int org_x, int org_y, int W,
                 int H, int y, int out_w, uint8_t *dst) {
  pthread_once(&tabs_once, build_tabs);
  const int nearest = wp->interp == RC_CV_NEAREST;
  const int k = wp->interp == RC_CV_CUBIC ? 4 : wp->interp == RC_CV_LANCZOS4 ? 8 : 2;
  const int lead = k / 2 - 1; /* taps before the sample's whole pixel */
  const int32_t *tab = k == 2 ? &tab_linear[0][0] : k == 4 ? &tab_cubic[0][0] : &tab_lanczos[0][0];
  const int round_delta = nearest ? AB_SCALE / 2 : AB_SCALE / TAB_SIZE / 2;
  if (wp->border == RC_BORDER_REPLICATE) {
    resize_row(wp, src, stride, org_x, org_y, W, H, y, out_w, dst);
    return;
  }
  const double yy = (double)y + wp->off_y;
  const int X0 = sat_round((wp->m[1] * yy + wp->m[2]) * AB_SCALE) + round_delta;
  const int Y0 = sat_round((wp->m[4] * yy + wp->m[5]) * AB_SCALE) + round_delta;
  int lo = out_w, hi = out_w; /* bilinear: [lo, hi) has every tap inside, without checks */
  if (k == 2 && !nearest) {
    /* positions are monotonic along a row, so the samples inside are one run */
    for (lo = 0; lo < out_w && !linear_inside(wp, X0, Y0, lo, W, H); lo++) {
    }
    for (hi = out_w; hi > lo && !linear_inside(wp, X0, Y0, hi - 1, W, H); hi--) {
    }
    int done = lo;
#ifdef RC_WARP_AVX2
    if (rc_simd_avx2()) done = linear_span_avx2(wp, src, stride, org_x, org_y, X0, Y0, lo, hi, dst);
#endif
    linear_span(wp, src, stride, org_x, org_y, X0, Y0, done, hi, dst);
  }
  for (int x = 0; x < out_w; x++, dst += 3) {
    if (x == lo) x = hi, dst += 3 * (size_t)(hi - lo);
    if (x >= out_w) break;
    /* (int64: a map far off the image must not overflow the sum) */
    const int64_t X = (int64_t)X0 + wp->adelta[x], Y = (int64_t)Y0 + wp->bdelta[x];
    if (nearest) {
      const int64_t sx = X >> AB_BITS, sy = Y >> AB_BITS;
      if (sx < 0 || sy < 0 || sx >= W || sy >= H) {
        dst[0] = dst[1] = dst[2] = wp->fill;
        continue;
      }
      const uint8_t *p = src + (size_t)(sy - org_y) * stride + (size_t)(sx - org_x) * 3;
      dst[0] = p[0], dst[1] = p[1], dst[2] = p[2];
      continue;
    }
    const int64_t fxy = X >> (AB_BITS - INTER_BITS), fyy = Y >> (AB_BITS - INTER_BITS);
    const int64_t sx = (fxy >> INTER_BITS) - lead, sy = (fyy >> INTER_BITS) - lead;
    const int32_t *t =
        tab + (size_t)(((fyy & (TAB_SIZE - 1)) << INTER_BITS) | (fxy & (TAB_SIZE - 1))) * k * k;
    if (sx >= 0 && sy >= 0 && sx + k <= W && sy + k <= H) {
      const uint8_t *p = src + (size_t)(sy - org_y) * stride + (size_t)(sx - org_x) * 3;
      if (k == 2) {
        linear_pixel(p, stride, (int)(fxy & (TAB_SIZE - 1)), (int)(fyy & (TAB_SIZE - 1)), dst);
      } else {
        int acc[3] = {0, 0, 0};
        for (int i = 0; i < k; i++, p += stride)
          for (int j = 0; j < k; j++) {
            const int w = t[i * k + j];
            acc[0] += p[3 * j] * w, acc[1] += p[3 * j + 1] * w, acc[2] += p[3 * j + 2] * w;
          }
        for (int ch = 0; ch < 3; ch++)
          dst[ch] = clamp_u8((acc[ch] + (1 << (COEF_BITS - 1))) >> COEF_BITS);
      }
      continue;
    }
    if (sx >= W || sy >= H || sx + k <= 0 || sy + k <= 0) { /* every tap outside */
      dst[0] = dst[1] = dst[2] = wp->fill;
      continue;
    }
    taps_border(wp, src, stride, org_x, org_y, W, H, (int)sx, (int)sy, t, k, dst);
  }
}
