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

/* ---- MXNet's geometry as one affine map (recio/augment/geometry.py is the reference) ---- */

/* a = b o c for 2x3 affine maps (c applied first). */
static void compose(double a[6], const double b[6], const double c[6]) {
  const double r[6] = {b[0] * c[0] + b[1] * c[3],        b[0] * c[1] + b[1] * c[4],
                       b[0] * c[2] + b[1] * c[5] + b[2], b[3] * c[0] + b[4] * c[3],
                       b[3] * c[1] + b[4] * c[4],        b[3] * c[2] + b[4] * c[5] + b[5]};
  for (int i = 0; i < 6; i++) a[i] = r[i];
}

/* The map from source pixels u to pixels of cv::resize's dsize out of ssize, inverted: centres
 * aligned, OpenCV's scale 1 / (dsize / ssize). */
static void resize_map(double m[6], int ssize_w, int ssize_h, int dsize_w, int dsize_h) {
  const double sx = 1.0 / ((double)dsize_w / ssize_w), sy = 1.0 / ((double)dsize_h / ssize_h);
  const double r[6] = {sx, 0, 0.5 * sx - 0.5, 0, sy, 0.5 * sy - 0.5};
  for (int i = 0; i < 6; i++) m[i] = r[i];
}

/* MXNet's warpAffine stage on a cols x rows image: its matrix (float, as MXNet computes it),
 * inverted as warpAffine inverts it (double), and its output size. */
static void mxnet_affine(const rc_geom *g, uint64_t key, int cols, int rows, double inv[6],
                         int *new_cols, int *new_rows) {
  const float s = (float)uniform(key, RC_U_SHEAR) * g->max_shear_ratio * 2 - g->max_shear_ratio;
  int angle = 0;
  if (g->max_rotate_angle > 0)
    angle =
        (int)floor(uniform(key, RC_U_ANGLE) * (2 * g->max_rotate_angle + 1)) - g->max_rotate_angle;
  if (g->rotate > 0) angle = g->rotate;
  const float a = (float)cos(angle / 180.0 * RC_PI), b = (float)sin(angle / 180.0 * RC_PI);
  const float scale =
      (float)uniform(key, RC_U_SCALE) * (g->max_random_scale - g->min_random_scale) +
      g->min_random_scale;
  const float ratio =
      (float)uniform(key, RC_U_RATIO) * (g->max_ratio - g->min_ratio) + g->min_ratio;
  const float hs = 2 * scale / (1 + ratio), ws = ratio * hs;
  const float new_w = fmaxf(g->min_img_size, fminf(g->max_img_size, scale * cols));
  const float new_h = fmaxf(g->min_img_size, fminf(g->max_img_size, scale * rows));
  const float m0 = hs * a - s * b * ws, m3 = -b * ws, m1 = hs * b + s * a * ws, m4 = a * ws;
  const float cw = m0 * cols + m1 * rows, ch = m3 * cols + m4 * rows;
  const float m2 = (new_w - cw) / 2, m5 = (new_h - ch) / 2;
  /* cv::invertAffineTransform */
  double D = (double)m0 * m4 - (double)m1 * m3;
  D = D != 0 ? 1. / D : 0.;
  const double A11 = m4 * D, A22 = m0 * D, A12 = -m1 * D, A21 = -m3 * D;
  inv[0] = A11, inv[1] = A12, inv[2] = -A11 * m2 - A12 * m5;
  inv[3] = A21, inv[4] = A22, inv[5] = -A21 * m2 - A22 * m5;
  *new_cols = (int)new_w, *new_rows = (int)new_h;
}

/* A crop's offset along one axis: MXNet's centre, or a random one (the centre where the image is
 * smaller than the crop). C's division truncates, as MXNet's. */
static int crop_offset(int spare, int random, double u) {
  return random && spare >= 0 ? (int)floor(u * (spare + 1)) : spare / 2;
}

void rc_draw_warp(const rc_draw *d, int64_t record, int width, int height, rc_warp *wp,
                  int32_t crop[4], uint8_t *flip) {
  const rc_geom *g = &d->geom;
  const uint64_t key = mix(d->epoch_key ^ (uint64_t)record);
  const int W = width > 1 ? width : 1, H = height > 1 ? height : 1;
  *flip = (d->rand_mirror && uniform(key, RC_DRAW_UNIFORMS) < 0.5) || d->mirror;
  /* Stage 1, source -> an image of cols x rows: RandomResizedCrop's window scaled to the
   * output, or MXNet's shorter-side resize, or nothing. */
  double G[6] = {1, 0, 0, 0, 1, 0};
  int cols = W, rows = H;
  if (d->rrc) {
    int32_t win[4];
    uint8_t unused;
    rc_draw_window(d, record, W, H, win, &unused);
    cols = d->out_w, rows = d->out_h;
    resize_map(G, win[2], win[3], cols, rows);
    G[2] += win[0], G[5] += win[1];
  } else if (d->resize > 0) {
    if (H > W)
      rows = (int)((int64_t)d->resize * H / W), cols = d->resize;
    else
      rows = d->resize, cols = (int)((int64_t)d->resize * W / H);
    resize_map(G, W, H, cols, rows);
  }
  /* Stage 2: warpAffine. */
  if (g->affine) {
    double inv[6];
    mxnet_affine(g, key, cols, rows, inv, &cols, &rows);
    compose(G, G, inv);
  }
  /* Stages 3 and 4: pad, then a crop of the output size, or of a random size resized to it. */
  cols += 2 * g->pad, rows += 2 * g->pad;
  const int sized = g->min_crop_size > 0;
  int cw = d->out_w, ch = d->out_h;
  if (sized)
    cw = ch = g->min_crop_size +
              (int)floor(uniform(key, RC_U_CROP_SIZE) * (g->max_crop_size - g->min_crop_size + 1));
  const int x0 = crop_offset(cols - cw, d->rand_crop, uniform(key, RC_U_CROP_X));
  const int y0 = crop_offset(rows - ch, d->rand_crop, uniform(key, RC_U_CROP_Y));
  if (sized) {
    double K[6];
    resize_map(K, cw, ch, d->out_w, d->out_h);
    K[2] += x0 - g->pad, K[5] += y0 - g->pad;
    compose(G, G, K);
    wp->off_x = wp->off_y = 0;
  } else {
    wp->off_x = x0 - g->pad, wp->off_y = y0 - g->pad;
  }
  for (int i = 0; i < 6; i++) wp->m[i] = G[i];
  int interp = g->inter_method;
  if (interp == 10) {
    interp = (int)floor(uniform(key, RC_U_INTERP) * 5);
  } else if (interp == 9) { /* cubic to enlarge, area to shrink, else bilinear */
    const double ex = sqrt(G[0] * G[0] + G[3] * G[3]), ey = sqrt(G[1] * G[1] + G[4] * G[4]);
    interp = ex < 1 && ey < 1 ? RC_CV_CUBIC : ex > 1 && ey > 1 ? RC_CV_AREA : RC_CV_LINEAR;
  }
  wp->border = g->affine ? RC_BORDER_CONSTANT : RC_BORDER_REPLICATE;
  wp->interp = interp == RC_CV_AREA && g->affine ? RC_CV_LINEAR : interp;
  wp->fill = (uint8_t)g->fill_value;
  int box[4];
  rc_warp_bounds(wp, d->out_w, d->out_h, W, H, box);
  crop[0] = box[0], crop[1] = box[1], crop[2] = box[2] - box[0], crop[3] = box[3] - box[1];
}
