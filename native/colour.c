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

/* MXNet's grey: the luma weights (0.299, 0.587, 0.114) over its BGR pixels in RGB's order,
 * so 0.114 R + 0.587 G + 0.299 B. */
static inline float gray(const uint8_t *p) {
  return ((float)p[2] * 0.299f + (float)p[1] * 0.587f) + (float)p[0] * 0.114f;
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

void rc_colour_apply(const rc_colour *c, const double v[RC_COLOUR_VALUES], uint8_t *rgb,
                     size_t npix) {
  const int hls = c->random_h || c->random_s || c->random_l;
  const size_t n = npix * 3;
  /* Pass 1, per pixel alone: HLS jitter, brightness; the grey sum contrast needs after them. */
  const float ab = (float)v[3];
  double gray_sum = 0;
  if (hls || c->brightness > 0 || c->contrast > 0) {
    for (size_t i = 0; i < n; i += 3) {
      uint8_t *p = rgb + i;
      if (hls) hls_jitter(p, (int)v[0], (int)v[1], (int)v[2]);
      if (c->brightness > 0)
        for (int k = 0; k < 3; k++) p[k] = round_u8((float)p[k] * ab);
      if (c->contrast > 0) gray_sum += (double)gray(p);
    }
  }
  if (!(c->contrast > 0 || c->saturation > 0 || c->pca_noise > 0)) return;
  /* Pass 2: contrast (around the image's mean grey), saturation (around each pixel's grey),
   * PCA lighting. */
  const float ac = (float)v[4], as = (float)v[5], bs = (float)(1.0 - v[5]);
  const float beta = (float)((1.0 - v[4]) * (gray_sum / (double)(npix ? npix : 1)));
  const float pca[3] = {(float)v[6], (float)v[7], (float)v[8]};
  for (size_t i = 0; i < n; i += 3) {
    uint8_t *p = rgb + i;
    if (c->contrast > 0)
      for (int k = 0; k < 3; k++) p[k] = round_u8((float)p[k] * ac + beta);
    if (c->saturation > 0) {
      const float grey = gray(p);
      for (int k = 0; k < 3; k++) p[k] = round_u8((float)p[k] * as + grey * bs);
    }
    if (c->pca_noise > 0)
      for (int k = 0; k < 3; k++) p[k] = round_u8((float)p[k] + pca[k]);
  }
}
