/* Keyed draws (draw.h). Every operation is the one numpy's reference does, in the same order,
 * in double precision: fused multiply-adds would change the last bit of a product, so they
 * are off for this file. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include "draw.h"

#include <math.h>

#define GOLDEN 0x9E3779B97F4A7C15ull
#define RC_PI 3.14159265358979323846 /* math.pi */

/* splitmix64's finaliser: a bijection of 64-bit words that scrambles every bit. */
static uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t rc_epoch_key(uint64_t seed, uint64_t epoch) {
  return mix(mix(seed + GOLDEN) ^ (epoch * GOLDEN));
}

static double uniform(uint64_t sample_key, int k) {
  return (double)(mix(sample_key + (uint64_t)k * GOLDEN) >> 11) * (1.0 / 9007199254740992.0);
}

double rc_keyed_uniform(uint64_t epoch_key, int64_t record, int k) {
  return uniform(mix(epoch_key ^ (uint64_t)record), k);
}

static double clip(double v, double lo, double hi) {
  return fmin(fmax(v, lo), hi); /* numpy's clip: max first, then min */
}

/* A fixed-size window (centre or random position) after the optional shorter-side resize. */
static void fixed_size(const rc_draw *d, double W, double H, double u2, double u3,
                       int32_t crop[4]) {
  const double out_w = d->out_w, out_h = d->out_h;
  double scale = d->resize > 0 ? fmin(W, H) / d->resize : 1.0;
  scale = fmin(scale, fmin(W / out_w, H / out_h));
  const double w = fmax(nearbyint(out_w * scale), 1), h = fmax(nearbyint(out_h * scale), 1);
  const double fx = d->rand_crop ? u2 : 0.5, fy = d->rand_crop ? u3 : 0.5;
  const double extra = d->rand_crop ? 1 : 0;
  const double x = clip(floor((W - w + extra) * fx), 0, W - w);
  const double y = clip(floor((H - h + extra) * fy), 0, H - h);
  crop[0] = (int32_t)x, crop[1] = (int32_t)y, crop[2] = (int32_t)w, crop[3] = (int32_t)h;
}

/* torchvision's RandomResizedCrop window, from the uniforms of its 10 attempts. */
static void random_resized(const rc_draw *d, double W, double H, const double *u, int32_t crop[4]) {
  const double area = W * H;
  const double log_lo = log(d->min_aspect), log_hi = log(d->max_aspect);
  for (int a = 0; a < RC_DRAW_ATTEMPTS; a++) {
    const double *ua = u + 4 * a;
    const double scale = d->min_area + (d->max_area - d->min_area) * ua[0];
    const double aspect = exp(log_lo + (log_hi - log_lo) * ua[1]);
    const double w = nearbyint(sqrt(area * scale * aspect));
    const double h = nearbyint(sqrt(area * scale / aspect));
    if (w > 0 && h > 0 && w <= W && h <= H) {
      const double x = clip(floor((W - w + 1) * ua[2]), 0, fmax(W - w, 0));
      const double y = clip(floor((H - h + 1) * ua[3]), 0, fmax(H - h, 0));
      crop[0] = (int32_t)x, crop[1] = (int32_t)y;
      crop[2] = (int32_t)fmax(w, 1), crop[3] = (int32_t)fmax(h, 1);
      return;
    }
  }
  /* No attempt fits: the centre window, its aspect ratio clamped to the range. */
  const double ratio = W / H;
  double w = W, h = H;
  if (ratio < d->min_aspect)
    h = nearbyint(W / d->min_aspect);
  else if (ratio > d->max_aspect)
    w = nearbyint(H * d->max_aspect);
  const double x = clip(floor((W - w) / 2), 0, fmax(W - w, 0));
  const double y = clip(floor((H - h) / 2), 0, fmax(H - h, 0));
  crop[0] = (int32_t)x, crop[1] = (int32_t)y;
  crop[2] = (int32_t)fmax(w, 1), crop[3] = (int32_t)fmax(h, 1);
}

void rc_draw_window(const rc_draw *d, int64_t record, int width, int height, int32_t crop[4],
                    uint8_t *flip) {
  const uint64_t key = mix(d->epoch_key ^ (uint64_t)record);
  const double W = width > 1 ? width : 1, H = height > 1 ? height : 1;
  if (d->rrc) {
    double u[RC_DRAW_ATTEMPTS * 4];
    for (int k = 0; k < RC_DRAW_ATTEMPTS * 4; k++) u[k] = uniform(key, k + 1);
    random_resized(d, W, H, u, crop);
  } else {
    fixed_size(d, W, H, uniform(key, 3), uniform(key, 4), crop);
  }
  *flip = (d->rand_mirror && uniform(key, RC_DRAW_UNIFORMS) < 0.5) || d->mirror;
}

int rc_colour_pixels(const rc_colour *c) {
  return c->random_h || c->random_s || c->random_l || c->brightness > 0 || c->contrast > 0 ||
         c->saturation > 0 || c->pca_noise > 0;
}

int rc_colour_affine(const rc_colour *c) {
  return c->max_random_contrast > 0 || c->max_random_illumination > 0;
}

/* PCA lighting's eigenvalues and eigenvectors (rows R, G, B), as recio.augment's. */
static const double EIGVAL[3] = {55.46, 4.794, 1.148};
static const double EIGVEC[3][3] = {
    {-0.5675, 0.7192, 0.4009}, {-0.5808, -0.0045, -0.8140}, {-0.5836, -0.6948, 0.4203}};

void rc_draw_colour(const rc_draw *d, int64_t record, double v[RC_COLOUR_VALUES]) {
  const rc_colour *c = &d->colour;
  const uint64_t key = mix(d->epoch_key ^ (uint64_t)record);
  double u[RC_COLOUR_UNIFORMS];
  for (int k = 0; k < RC_COLOUR_UNIFORMS; k++) u[k] = uniform(key, RC_COLOUR_FIRST + k);
  /* U(-m, m) as MXNet writes it: u * 2m - m; the HLS shifts are its int() of that */
  const int hls[3] = {c->random_h, c->random_s, c->random_l};
  for (int k = 0; k < 3; k++) v[k] = hls[k] ? trunc(u[k] * (2.0 * hls[k]) - hls[k]) : 0;
  const double jitter[3] = {c->brightness, c->contrast, c->saturation};
  for (int k = 0; k < 3; k++)
    v[3 + k] = jitter[k] > 0 ? 1.0 + (u[3 + k] * (2 * jitter[k]) - jitter[k]) : 1;
  double w[3] = {0, 0, 0};
  if (c->pca_noise > 0)
    for (int k = 0; k < 3; k++) { /* Box-Muller */
      const double z = sqrt(-2.0 * log(1.0 - u[6 + 2 * k])) * cos(2.0 * RC_PI * u[7 + 2 * k]);
      w[k] = z * c->pca_noise * EIGVAL[k];
    }
  for (int ch = 0; ch < 3; ch++)
    v[6 + ch] =
        c->pca_noise > 0 ? EIGVEC[ch][0] * w[0] + EIGVEC[ch][1] * w[1] + EIGVEC[ch][2] * w[2] : 0;
  const double mrc = c->max_random_contrast, mri = c->max_random_illumination;
  v[9] = mrc > 0 ? 1.0 + (u[12] * (2 * mrc) - mrc) : 1;
  v[10] = mri > 0 ? u[13] * (2 * mri) - mri : 0;
}
