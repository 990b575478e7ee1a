/* recio keyed draws: each image's crop window and flip, a function of (seed, epoch, record).
 *
 * The same arithmetic as recio/augment/draws.py's numpy reference (draw_keyed), bit for bit: the
 * uniforms are splitmix64 hashes of counters, and the window follows torchvision's
 * RandomResizedCrop (10 attempts, then the centre fallback) or a fixed-size crop. Called by
 * the decode threads once an image's header gives its size, so no serial pass draws them.
 */
#ifndef RECIO_DRAW_H
#define RECIO_DRAW_H

#include <stdint.h>

#include "warp.h"

#define RC_DRAW_ATTEMPTS 10 /* torchvision's RandomResizedCrop tries 10 windows */
#define RC_DRAW_UNIFORMS (RC_DRAW_ATTEMPTS * 4 + 1) /* 4 per attempt, then the flip's */

/* Colour's uniforms, after the crop's (recio.augment.ColourSpec): HLS h, s, l; brightness,
 * contrast, saturation; PCA's three normals, two each; random contrast, illumination. */
#define RC_COLOUR_FIRST (RC_DRAW_UNIFORMS + 1)
#define RC_COLOUR_UNIFORMS 14
/* Values per image (rc_draw_colour): HLS shifts h, s, l; brightness, contrast, saturation
 * factors; PCA's R, G, B shifts; the normalisation's contrast factor and illumination. */
#define RC_COLOUR_VALUES 11

/* MXNet's colour parameters (recio.augment.ColourSpec). */
typedef struct {
  int random_h, random_s, random_l;
  double brightness, contrast, saturation, pca_noise;
  double max_random_contrast, max_random_illumination;
} rc_colour;

/* Uniforms of each record for MXNet's geometry (recio.augment.geometry), after the crop's, the
 * flip's and colour's 14 (RC_DRAW_UNIFORMS + 1 on). */
#define RC_GEOMETRY_FIRST (RC_DRAW_UNIFORMS + 15)
enum {
  RC_U_SHEAR = RC_GEOMETRY_FIRST,
  RC_U_ANGLE,
  RC_U_SCALE,
  RC_U_RATIO,
  RC_U_CROP_SIZE,
  RC_U_CROP_Y,
  RC_U_CROP_X,
  RC_U_INTERP,
  RC_U_GEOMETRY_END /* the first uniform free for what comes after */
};

/* MXNet's default augmenter's geometry (recio.augment.geometry.GeometrySpec), MXNet's names. */
typedef struct {
  int on;     /* sample through the affine warp (else: the crop window and resampler) */
  int affine; /* MXNet's warpAffine stage runs (rotation, shear, scale, aspect, img size) */
  int max_rotate_angle, rotate; /* rotate > 0 overrides the random angle */
  float max_shear_ratio, min_ratio, max_ratio, min_random_scale, max_random_scale;
  float min_img_size, max_img_size;
  int min_crop_size, max_crop_size; /* -1: no random-size crop */
  int pad, fill_value;
  int inter_method; /* 0-4, 9 (auto), 10 (random) */
} rc_geom;

/* How windows are chosen (recio.augment.CropSpec), and the key of (seed, epoch). */
typedef struct {
  int out_w, out_h;
  int resize;      /* shorter side scaled to this before a fixed-size crop; <= 0: none */
  int rand_crop;   /* fixed-size crop at a random position, not the centre */
  int rrc;         /* RandomResizedCrop */
  int rand_mirror; /* flip with probability 1/2 */
  double min_area, max_area, min_aspect, max_aspect;
  uint64_t epoch_key; /* rc_epoch_key(seed, epoch) */
  int mirror;         /* every image flipped (MXNet's mirror), rand_mirror or not */
  rc_colour colour;
  rc_geom geom;
} rc_draw;

/* The key every sample's draws of one epoch start from. */
uint64_t rc_epoch_key(uint64_t seed, uint64_t epoch);

/* Uniform k (1-based) in [0, 1) of the sample whose key is mixed from epoch_key and record. */
double rc_keyed_uniform(uint64_t epoch_key, int64_t record, int k);

/* The window {x, y, w, h} (source pixels) and flip of `record`, an image of width x height
 * (values below 1 count as 1). */
void rc_draw_window(const rc_draw *d, int64_t record, int width, int height, int32_t crop[4],
                    uint8_t *flip);

/* Whether the colour changes 8-bit pixels (colour.c), and whether it changes the
 * normalisation (a contrast factor or an illumination shift per image). */
int rc_colour_pixels(const rc_colour *c);
int rc_colour_affine(const rc_colour *c);

/* The colour draws of `record` (identities for the parameters that are off). */
void rc_draw_colour(const rc_draw *d, int64_t record, double v[RC_COLOUR_VALUES]);

/* With d->geom.on: the warp of `record` from its width x height source to the output, its flip,
 * and crop {x, y, w, h} the source pixels its taps read (rc_warp_bounds), as
 * recio.augment.geometry's reference computes them. */
void rc_draw_warp(const rc_draw *d, int64_t record, int width, int height, rc_warp *wp,
                  int32_t crop[4], uint8_t *flip);

#endif
