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

#define RC_COLOUR_SCRATCH(npix) ((size_t)(npix)*4 * sizeof(float))

#endif
