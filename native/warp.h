/* recio affine warp: output pixels sampled once from source pixels through a 2x3 map, as
 * OpenCV's warpAffine computes them for 8-bit images (fixed-point positions of 1/32 pixel,
 * 15-bit tap weights from its tables), with nearest, bilinear, bicubic and Lanczos-4 taps.
 *
 * The map is the composition of MXNet's default augmenter's stages (resize, warpAffine, pad,
 * crop; draw.c builds it per image), so an image is sampled once where MXNet samples up to
 * three times; for a lone warpAffine followed by a crop the pixels are OpenCV's.
 */
#ifndef RECIO_WARP_H
#define RECIO_WARP_H

#include <stddef.h>
#include <stdint.h>

/* OpenCV's interpolation codes, which are MXNet's inter_method 0-4. */
#define RC_PI 3.1415926535897932384626433832795 /* OpenCV's CV_PI, glibc's M_PI */

enum { RC_CV_NEAREST = 0, RC_CV_LINEAR = 1, RC_CV_CUBIC = 2, RC_CV_AREA = 3, RC_CV_LANCZOS4 = 4 };

/* How the map is sampled. CONSTANT (a warpAffine stage ran): warpAffine's taps, each one outside
 * the source the fill value (BORDER_CONSTANT). REPLICATE (no warpAffine: the map is
 * axis-aligned): cv::resize's arithmetic per axis (11-bit weights, two passes in integers; area
 * a box average when shrinking both axes), taps past an edge taking the edge pixel, and a
 * sample whose centre lies outside the source the fill value (the padding MXNet's pad adds). */
enum { RC_BORDER_CONSTANT = 0, RC_BORDER_REPLICATE = 1 };

/* One image's warp: output pixel (x, y) samples the source at
 * (m[0] * (x + off_x) + m[1] * (y + off_y) + m[2], m[3] * (x + off_x) + m[4] * (y + off_y) + m[5]),
 * pixel centres at integers. off_x and off_y are the crop's offset in warpAffine's output grid,
 * kept apart from m so that the fixed-point positions are OpenCV's. */
typedef struct {
  double m[6];
  int off_x, off_y;
  int interp; /* RC_CV_*; with CONSTANT, AREA samples as LINEAR (warpAffine does the same) */
  int border; /* RC_BORDER_* */
  uint8_t fill;
  /* Per-image tables of rc_warp_prepare, in the caller's scratch: CONSTANT, each column's
   * position steps (OpenCV's adelta, bdelta); REPLICATE, each column's taps (up to xk). */
  int32_t *adelta, *bdelta, *xn, *xi, *xw;
  float *xa;
  int xk;
} rc_warp;

/* The source pixels {x0, y0, x1, y1} (x1, y1 exclusive, inside src_w x src_h) that the taps of
 * an out_w x out_h output read; x1 <= x0 when no output pixel reads the source. */
void rc_warp_bounds(const rc_warp *wp, int out_w, int out_h, int src_w, int src_h, int box[4]);

/* The scratch bytes rc_warp_prepare needs for out_w output columns. */
size_t rc_warp_scratch_bytes(const rc_warp *wp, int out_w);

/* Fills wp's per-image tables for out_w columns of a src_w pixels wide source, in scratch
 * (rc_warp_scratch_bytes of it, 4-byte aligned, kept until the image's last row); with mirror,
 * the columns in reverse (the rows come out flipped, the same pixels mirrored). */
void rc_warp_prepare(rc_warp *wp, int out_w, int src_w, int mirror, void *scratch);

/* Output row y (out_w RGB pixels to dst, which must have 1 byte to spare after them; after
 * rc_warp_prepare) from the decoded source pixels: pixel (c, r) of the
 * src_w x src_h image is at src + (r - org_y) * stride + (c - org_x) * 3 for the pixels of
 * rc_warp_bounds' box, readable 8 bytes past each row's last pixel used. */
void rc_warp_row(const rc_warp *wp, const uint8_t *src, size_t stride, int org_x, int org_y,
                 int src_w, int src_h, int y, int out_w, uint8_t *dst);

/* The map with the source scaled by (fx, fy) (libjpeg's DCT scaling), centres kept aligned. */
void rc_warp_scale_source(rc_warp *wp, double fx, double fy);

#endif
