/* recio colour augmentation: MXNet's HLS jitter, brightness, contrast, saturation and PCA
 * lighting on an output image's 8-bit RGB pixels (recio.augment.apply_colour is the numpy
 * reference: the same float32 arithmetic, step by step).
 */
#ifndef RECIO_COLOUR_H
#define RECIO_COLOUR_H

#include <stddef.h>
#include <stdint.h>

#include "draw.h"

/* Applies c with the draws v (rc_draw_colour) to npix packed RGB pixels, in place; planes:
 * scratch of RC_COLOUR_SCRATCH(npix) bytes. */
void rc_colour_apply(const rc_colour *c, const double v[RC_COLOUR_VALUES], uint8_t *rgb,
                     size_t npix, float *planes);

/* Picks the colour passes' SIMD (AVX2 where the CPU has it and RECIO_SIMD is not "sse2",
 * else SSE2): call once before any pool thread runs. Returns "avx2", "sse2" or "scalar". */
const char *rc_colour_init(void);

#define RC_COLOUR_SCRATCH(npix) ((size_t)(npix) * 4 * sizeof(float))

/* The fused colour and store of one image (AVX2, NCHW output): everything but saturation is
 * a function of one byte, so it folds into tables made once per image. Brightness and
 * contrast become t1 (a byte to its whole-number result), PCA's shift and the store's
 * lookup (normalisation, dtype) become out[k] (output channel k's item for a saturated
 * value of its source channel), and only saturation, which mixes the channels, is computed
 * per pixel. Each value is the one rc_colour_apply and the store give, bit for bit. */
typedef struct {
  int hls, bright, contrast, sat, t1_on;
  int dh, ds, dl;
  float ab, ac, as, bs, beta;
  double alpha_c; /* contrast's factor, for its shift from the mean grey */
  float add[3];   /* PCA's shift of each source channel (0 without PCA) */
  int pca;
  float tb[256];        /* brightness alone: what the contrast's mean grey is taken of */
  float t1[256];        /* brightness, then contrast */
  uint32_t out[3][256]; /* output channel k: PCA, then the store's item, of a value */
  int src[3];           /* output channel k's source channel (BGR order swaps 0 and 2) */
  int itemsize;
  int direct; /* the item is the value itself (uint8; float32 with the identity table) */
  int nhwc;   /* the output interleaved (rc_colour_store_row's dst[0]), else planes */
} rc_colour_plan;

/* Whether rc_colour_store_row runs its SIMD loop (AVX2 picked by rc_colour_init). */
int rc_colour_fused(void);

/* The per-image part of the plan that needs no mean grey: from c and its draws v. */
void rc_colour_plan_begin(rc_colour_plan *p, const rc_colour *c, const double v[RC_COLOUR_VALUES],
                          int bgr);

/* Applies the HLS jitter (if any) to npix pixels in place; adds the sums of each channel's
 * values after brightness to sums (contrast's mean grey), when the plan has contrast. */
void rc_colour_row_prepare(const rc_colour_plan *p, uint8_t *rgb, size_t npix, double sums[3]);

/* Completes the tables: the mean grey from sums over npix pixels (with contrast), and the
 * store's table `lut` ([3][256] items of itemsize: 4 float, 2 float16 bits, or NULL for uint8
 * output as is). */
void rc_colour_plan_finish(rc_colour_plan *p, const double sums[3], size_t npix, const void *lut,
                           int itemsize);

/* One row of W pixels (RGB, mirrored when flip) coloured and stored into the three output
 * planes dst[k] (this row of output channel k), or with p->nhwc into the one interleaved
 * row dst[0]; for float32 with mean[k] not NULL (this row of the mean image's plane k), the
 * value less contrast * mean[k][x] (the store's mean image). */
void rc_colour_store_row(const rc_colour_plan *p, const uint8_t *rgb, int W, int flip,
                         void *const dst[3], const float *const mean[3], float contrast);

#endif
