/* recio resampler: Pillow's separable resampling (BILINEAR, BOX, NEAREST) in fixed point, for
 * interleaved 3-channel rows and single-channel planes. Internal to native/: the decode core
 * computes the coefficients for a crop and runs the passes.
 */
#ifndef RECIO_RESAMPLE_H
#define RECIO_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

/* 14-bit weights fit int16, so SSE2 pmaddwd does two taps of four channels at once (the
 * Pillow-SIMD approach); Pillow itself uses 22 bits, so results may differ by one level. */
#define PRECISION_BITS 14
#define RC_SLACK 16 /* padding after row buffers: the SIMD passes read/write a little past */

typedef struct {
  int ksize;
  int identity; /* every output sample is one input sample: a plain copy does */
  int *bounds;  /* [out][2]: first input index, number of taps */
  int16_t *kk;  /* [out][ksize] fixed-point weights, ksize even, zero padded */
  size_t bounds_cap, kk_cap;
  double *prekk; /* scratch: one kernel's weights before normalising */
  size_t prekk_cap;
  /* The arguments these coefficients were computed for: a repeat call (the second chroma
   * plane, images of one size) reuses them. */
  int valid, key_in_size, key_out_size, key_interp;
  double key_in0, key_in1;
  /* The kernels as the AVX2 horizontal pass takes them, by output pair (NOTE [hpass avx2]):
   * made for a flip (packed_key 1 + flip; 0: none for these coefficients). */
  uint8_t *packed;
  size_t packed_cap;
  int packed_key;
} rc_coeffs;

/* Grows *p to at least `need` bytes (keeping its contents); -1 when out of memory. */
int rc_grow(void **p, size_t *cap, size_t need);
void rc_coeffs_free(rc_coeffs *c);

/* Pillow's precompute_coeffs for out_size samples from the input window [in0, in1) of an
 * input in_size samples long, with an RC_INTERP_* filter; -1 when out of memory. Returns at
 * once when `c` already holds the coefficients for these arguments. */
int rc_precompute(rc_coeffs *c, int in_size, double in0, double in1, int out_size, int interp);

/* Horizontal pass over one row of 3-channel pixels, mirrored when `flip`; `in` must stay
 * readable rc_hpass_slack(c) bytes past the last pixel used. Writes up to 4 bytes past the row. */
void rc_hpass(const uint8_t *in, uint8_t *out, int out_w, const rc_coeffs *c, int flip);
size_t rc_hpass_slack(const rc_coeffs *c);

/* Packs c's kernels for rc_hpass's AVX2 pass over out_w outputs with this flip (kept until
 * the coefficients change), so that each step loads its weights whole; rc_hpass runs without
 * it too (the same bytes). Nothing where the AVX2 passes do not run, or out of memory. */
void rc_hpass_pack(rc_coeffs *c, int flip);

/* De-interleaves n RGB pixels into three planes (AVX2 where it runs, else plain C). */
void rc_split3(const uint8_t *in, uint8_t *d0, uint8_t *d1, uint8_t *d2, int n);

/* NOTE [float store]: the float32 NCHW store's table, [3][256] levels -> (level - mean) /
 * std * scale as Python computes it (float64, rounded to float32), is in effect a line per
 * channel. Where the AVX2 passes run (with FMA), a level is computed as (float)fma(level, a, b)
 * in double precision, 8 a step, instead of looked up one at a time (the lookups, gathers
 * included, cost about as much as the rest of the resample); only for a table that line
 * reproduces bit for bit, all 256 levels checked once per JobOptions (rc_line_exact),
 * so the output is the table's, whatever the SIMD. */

/* Whether (float)fma(v, ab[0], ab[1]) is t[v], bit for bit, for every level v, on the path
 * rc_split3_f32 runs; 0 where that path does not run (no AVX2 and FMA). */
int rc_line_exact(const float *t, const double ab[2]);

/* rc_split3 to float32: byte c of each pixel looked up in table t[c] into d[c]; computed
 * on the lines ab[c] (NOTE [float store]) where rc_line_exact said they are exact, else
 * (ab NULL) looked up. */
void rc_split3_f32(const uint8_t *in, const float *const t[3], const double *const ab[3],
                   float *const d[3], int n);

/* Vertical pass: one output row of `width` bytes from ymax rows of `tmp` starting at ymin. */
void rc_vpass(const uint8_t *tmp, size_t stride, size_t width, int ymin, int ymax, const int16_t *k,
              uint8_t *line);

/* Picks the passes' instruction set once, at module import (before any thread runs): AVX2
 * on x86-64 where the CPU has it, unless the environment says RECIO_SIMD=sse2; until called,
 * the AVX2 passes are off. Returns what runs: "avx2", "sse2" (built with SSE2, always so on
 * x86-64) or "scalar" (built without SSE2, e.g. on ARM: the plain C loops). */
const char *rc_simd_init(void);

/* Whether rc_simd_init chose the AVX2 passes (the warp's follow the same choice). */
int rc_simd_avx2(void);

/* One past the last input row that rc_precompute(.., in0, in1, out_size, ..) reads. */
int rc_end_row(double in0, double in1, int out_size, int in_size, int interp);

/* A growable scratch buffer that the caller owns (a worker's field and its capacity). */
typedef struct {
  uint8_t **p;
  size_t *cap;
} rc_buf;

/* Copies a rows x cols block of bytes to its transpose: dst[c * dstride + r] = src[r * sstride
 * + c] (SSE2 16x16 tiles where compiled in, the edges one byte at a time). */
void rc_transpose(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride, int rows,
                  int cols);

/* Scratch bytes rc_resample_plane needs for an in_w-wide window resampled to out_w x out_h. */
uint64_t rc_resample_plane_bytes(int in_w, int out_w, int out_h);

/* Resamples one single-channel plane to out_w x out_h with coefficients ch (columns) and cv
 * (rows): the vertical pass row by row, then the horizontal pass as a vertical pass over the
 * transposed rows (whole 32-column vector steps, no gathers), transposed back: the same bytes
 * as a horizontal pass over each row. `src` rows are `sstride` bytes; three scratch buffers grow
 * as needed. Returns -1 when out of memory. */
int rc_resample_plane(const uint8_t *src, size_t sstride, const rc_coeffs *ch, const rc_coeffs *cv,
                      uint8_t *dst, size_t dstride, int out_w, int out_h, rc_buf mid, rc_buf midt,
                      rc_buf outt);

#endif
