/* Affine warp (warp.h), OpenCV's warpAffine arithmetic for 8-bit RGB. */
#include "warp.h"

#include <math.h>
#include <pthread.h>

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
  const double big = 1e9; /* (keeps the casts defined for maps far off the image) */
  const double x0 = floor(fmax(lo_x, -big)) - before - 1, x1 = floor(fmin(hi_x, big)) + after + 1;
  const double y0 = floor(fmax(lo_y, -big)) - before - 1, y1 = floor(fmin(hi_y, big)) + after + 1;
  box[0] = (int)fmax(x0, 0), box[1] = (int)fmax(y0, 0);
  box[2] = (int)fmin(x1, src_w), box[3] = (int)fmin(y1, src_h);
  if (box[2] <= box[0] || box[3] <= box[1]) box[0] = box[1] = box[2] = box[3] = 0;
}

void rc_warp_scale_source(rc_warp *wp, double fx, double fy) {
  wp->m[0] *= fx, wp->m[1] *= fx, wp->m[2] = (wp->m[2] + 0.5) * fx - 0.5;
  wp->m[3] *= fy, wp->m[4] *= fy, wp->m[5] = (wp->m[5] + 0.5) * fy - 0.5;
}

/* One pixel of k x k taps from (sx, sy) on, some of them possibly outside the source. */
static void taps_border(const rc_warp *wp, const uint8_t *src, size_t stride, int org_x, int org_y,
                        int W, int H, int sx, int sy, const int32_t *t, int k, uint8_t *d) {
  int acc[3] = {0, 0, 0};
  for (int i = 0; i < k; i++) {
    int r = sy + i;
    const int rin = r >= 0 && r < H;
    if (wp->border == RC_BORDER_REPLICATE) r = clampi(r, 0, H - 1);
    for (int j = 0; j < k; j++) {
      int c = sx + j;
      const int w = t[i * k + j];
      if (wp->border == RC_BORDER_CONSTANT && (!rin || c < 0 || c >= W)) {
        acc[0] += wp->fill * w, acc[1] += wp->fill * w, acc[2] += wp->fill * w;
        continue;
      }
      c = clampi(c, 0, W - 1);
      const uint8_t *p = src + (size_t)(r - org_y) * stride + (size_t)(c - org_x) * 3;
      acc[0] += p[0] * w, acc[1] += p[1] * w, acc[2] += p[2] * w;
    }
  }
  for (int ch = 0; ch < 3; ch++) d[ch] = clamp_u8((acc[ch] + (1 << (COEF_BITS - 1))) >> COEF_BITS);
}

void rc_warp_row(const rc_warp *wp, const uint8_t *src, size_t stride, int org_x, int org_y, int W,
                 int H, int y, int out_w, uint8_t *dst) {
  pthread_once(&tabs_once, build_tabs);
  const int nearest = wp->interp == RC_CV_NEAREST;
  const int k = wp->interp == RC_CV_CUBIC ? 4 : wp->interp == RC_CV_LANCZOS4 ? 8 : 2;
  const int lead = k / 2 - 1; /* taps before the sample's whole pixel */
  const int32_t *tab = k == 2 ? &tab_linear[0][0] : k == 4 ? &tab_cubic[0][0] : &tab_lanczos[0][0];
  const int round_delta = nearest ? AB_SCALE / 2 : AB_SCALE / TAB_SIZE / 2;
  const double yy = (double)y + wp->off_y;
  const int X0 = sat_round((wp->m[1] * yy + wp->m[2]) * AB_SCALE) + round_delta;
  const int Y0 = sat_round((wp->m[4] * yy + wp->m[5]) * AB_SCALE) + round_delta;
  const int replicate = wp->border == RC_BORDER_REPLICATE;
  for (int x = 0; x < out_w; x++, dst += 3) {
    const double xx = (double)x + wp->off_x;
    /* (int64: a map far off the image must not overflow the sum) */
    const int64_t X = (int64_t)X0 + sat_round(wp->m[0] * xx * AB_SCALE);
    const int64_t Y = (int64_t)Y0 + sat_round(wp->m[3] * xx * AB_SCALE);
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
        const int w0 = t[0], w1 = t[1], w2 = t[2], w3 = t[3];
        for (int ch = 0; ch < 3; ch++) {
          const int v = p[ch] * w0 + p[ch + 3] * w1 + p[stride + ch] * w2 + p[stride + ch + 3] * w3;
          dst[ch] = (uint8_t)((v + (1 << (COEF_BITS - 1))) >> COEF_BITS);
        }
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
    /* Near or past an edge. */
    const int outside = replicate ? fxy < -TAB_SIZE / 2 || fyy < -TAB_SIZE / 2 ||
                                        fxy >= (int64_t)W * TAB_SIZE - TAB_SIZE / 2 ||
                                        fyy >= (int64_t)H * TAB_SIZE - TAB_SIZE / 2
                                  : sx >= W || sy >= H || sx + k <= 0 || sy + k <= 0;
    if (outside) {
      dst[0] = dst[1] = dst[2] = wp->fill;
      continue;
    }
    taps_border(wp, src, stride, org_x, org_y, W, H, (int)sx, (int)sy, t, k, dst);
  }
}
