/* recio Huffman statistics: optimal Huffman tables for a lossless transcode, fast.
 *
 * libjpeg's optimize_coding finds each image's optimal tables with a gather pass over every
 * block, branching on each of its 63 AC coefficients: on a 0.17 MP photo it doubled the time
 * of a whole lossless transcode. rc_huff_optimise counts the same symbols (the DC differences
 * with the predictors reset at every restart interval, the AC run/size pairs, ZRL and EOB,
 * the encoder's dummy blocks at the right and bottom edges included) from a mask of each
 * block's non-zero coefficients, then builds the tables as JPEG's Annex K.2 prescribes. The
 * output is the same size as with optimize_coding (the same symbol counts give the same code
 * lengths); should a symbol be missed, libjpeg's encoder stops with an error and the caller
 * falls back to optimize_coding.
 */
#ifndef RECIO_HUFFSTATS_H
#define RECIO_HUFFSTATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

/* After jpeg_copy_critical_parameters(src, dst) and the restart settings of dst: counts the
 * symbols of coefs (src's jpeg_read_coefficients) as dst will encode them in one sequential
 * scan and installs optimal tables in dst (optimize_coding left off). 0, or -1 when the
 * layout is not one it knows (the caller then sets optimize_coding). */
int rc_huff_optimise(j_decompress_ptr src, j_compress_ptr dst, jvirt_barray_ptr *coefs);

/* JPEG Annex K.2: the optimal table (at most 16-bit codes, none all ones) for the symbol
 * counts: bits[1..16] codes of each length (bits[0] = 0), huffval the symbols by length.
 * Ties go as libjpeg's jpeg_gen_optimal_table breaks them: its very table. */
void rc_huff_table(const long counts[256], uint8_t bits[17], uint8_t huffval[256]);

#endif
