/* recio entropy decoder: the Huffman decode of a baseline JPEG's scan, for libjpeg.
 *
 * NOTE [entropy decode]: libjpeg-turbo 2.1 Huffman-decodes a scan without restart markers on
 * its fast path and one with markers bit by bit, which made a marked file (`recio optimize`)
 * and every cut of one (NOTE [restart cut]) slower to entropy-decode than the original;
 * Huffman decoding is half or more of a crop's decode. After jpeg_start_decompress,
 * rc_entropy_begin starts a copy of the scan's entropy-coded bytes with the 0xFF00 stuffing
 * taken out (unstuff.h), which checks the framing as it goes (the segments between the SOS
 * and the EOI, RST markers in sequence between them, nothing else), then replaces libjpeg's
 * decode_mcu with its own: a 64-bit bit buffer refilled eight bytes at a time from that
 * copy, and one table lookup of the next RC_FAST_BITS bits per AC coefficient. Where a code and
 * its value's bits both fit in those bits (short codes of small values) the entry holds the
 * whole step: the bits to drop, the zero run (the end of the block as a run that leaves it) and
 * the value, each a whole byte or two, so the loop over a block has no branch on the symbol; a
 * longer one is completed by a second step (entropy.c: complete). Where the bits after such a
 * step hold a second whole AC symbol, the entry holds both (a pair), which shortens the chain
 * of dependent lookups that bounds the decode's speed. A block's DC difference is looked up in
 * a table of its own, small enough to stay in L1 beside the AC tables (1 kB by the next
 * RC_DC_BITS bits: the code's length and the value's size, the value read after the code); the
 * AC tables (8 kB each) are as large as L1 allows: 11 bits, or a second table of several
 * symbols a lookup for the blocks read past, measured slower or no faster (BENCHMARKS.md).
 * Since a step from the table reads at most RC_FAST_BITS, the bits left are checked once every
 * three steps (a refill leaves 56 or more; a longer step refills for itself; an unconditional
 * refill, which spares the branch, measured no faster), and whether the data ran past its
 * segment's end once an MCU (the copy's padding covers an MCU's reads). The copy is made as the
 * decode reaches it, a chunk at a time: the same check once an MCU stops short of the segment's
 * end where the next MCU could read past what is copied (RC_UNSTUFF_PAD and a few bytes from
 * its end), and some 4 KB more are copied then, so a crop whose last row is high in the image
 * copies little of the rest and the common MCU pays nothing for it; a decode to the scan's end
 * (the whole-stream check's, NOTE [whole-stream check]) copies all of it and finds the EOI
 * there. A restart cut's segments are copied so straight from the source's scan
 * (rc_entropy_begin_window, NOTE [restart cut]). libjpeg IDCTs only the MCU columns
 * jpeg_crop_scanline keeps and no block of the rows jpeg_skip_scanlines skips: those blocks are
 * read past without storing a coefficient (rc_entropy_columns; the DC predictions still
 * follow them). A worker keeps its tables from image to image and builds them again only
 * for an image whose tables differ. It does so for every one-scan baseline JPEG,
 * markers or not: on the corpus of tools/make_corpus.py it is faster than libjpeg-turbo's
 * fast path too (in instructions and CPU time, BENCHMARKS.md). libjpeg still does
 * the rest (IDCT, upsampling, colour); the coefficients it receives are exactly those its own
 * decoder gives, including its handling of a run past the 63rd coefficient and of bytes left
 * over at a segment's end (ignored, as libjpeg ignores them with a warning that changes no
 * status). What libjpeg would warn about otherwise (a code no table has, a segment read past
 * its end) is not reproduced here: the decode stops (error_exit) with rc_entropy_failed set,
 * and the caller decodes the image again with libjpeg's own decoder, which reports it as it
 * always has. A scan framed otherwise (cut short, a marker out of sequence, 0xFF fill bytes)
 * is libjpeg's: from the start where the copy's first chunk shows it (or the image has
 * several scans), else from where the copy meets it, the decode stopping as at damaged data.
 * A fault past what a crop's decode copies is never met and cannot change its status
 * (libjpeg's own decoder would not read that far either). Each decode run again so is counted
 * (rc_second_decodes, recio._native.second_decodes): the pixels are libjpeg's either way, so
 * the count is how tests see a valid image fall off this decoder. RECIO_STOCK_ENTROPY=1, read
 * as a decode worker starts, leaves every scan to libjpeg (to compare the two).
 */
#ifndef RECIO_ENTROPY_H
#define RECIO_ENTROPY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

#include "unstuff.h"

typedef struct rc_entropy rc_entropy;

rc_entropy *rc_entropy_new(void);
void rc_entropy_free(rc_entropy *e);

/* After jpeg_start_decompress: takes over ci's entropy decoding where the scan is the
 * image's one baseline Huffman scan (all components, 8-bit) and its framing is as expected.
 * 1 when it did, 0 when libjpeg keeps it (or memory is short). ci's source must be in
 * memory (jpeg_mem_src): the rest of the stream is read from it at once. */
int rc_entropy_begin(rc_entropy *e, j_decompress_ptr ci);

/* rc_entropy_begin for a restart cut's JPEG without its entropy-coded data
 * (rc_restart_header, NOTE [restart cut]): the scan is the segments of window w of the whole
 * JPEG's scan src[0:n], copied from there. 0 where the decoder does not take it: then no
 * decoder has the data (libjpeg's needs the cut with its segments). */
int rc_entropy_begin_window(rc_entropy *e, j_decompress_ptr ci, const uint8_t *src, size_t n,
                            const rc_unstuff_window *w);

/* After rc_entropy_begin and jpeg_crop_scanline: the MCU columns first..last are the ones
 * libjpeg IDCTs (its first and last iMCU columns); the coefficients of the others are read
 * past, not stored. Every column until called. */
void rc_entropy_columns(rc_entropy *e, size_t first, size_t last);

/* 1 when the last decode stopped at data libjpeg's decoder must see (NOTE [entropy decode]);
 * cleared by the next rc_entropy_begin. */
int rc_entropy_failed(const rc_entropy *e);

/* After rc_entropy_begin took a scan: the rest of it copied at once; 1 where all of it is
 * framed as the decoder reads it (a decode would otherwise stop where the copy meets what is
 * not, and libjpeg's decode the image again). */
int rc_entropy_framed(rc_entropy *e);

#endif
