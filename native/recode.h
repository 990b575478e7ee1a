/* recio re-code: a baseline JPEG's entropy-coded data re-coded symbol by symbol, with restart
 * markers and optimal Huffman tables, without libjpeg's coefficient arrays.
 *
 * NOTE [re-code]: libjpeg's lossless transcode (jpeg_read_coefficients, then
 * jpeg_write_coefficients) decodes every block into a whole-image coefficient array, gathers
 * the Huffman statistics in a second pass over the array and encodes in a third; on a
 * 0.17 MP photo that cost as much as decoding and re-encoding the pixels. For the common
 * source (one interleaved sequential Huffman scan, 8-bit) rc_recode does the same in two
 * passes over a compact list of what each block holds: the decode keeps each block's DC
 * value and its non-zero AC coefficients (zigzag position and the raw bits, the value's
 * size being their count) and counts the symbols the output will code as it goes (the DC
 * differences with the predictors reset at the output's restart intervals, the AC run/size
 * pairs, ZRL, EOB, and the dummy blocks libjpeg's encoder writes at the right and bottom
 * edges: DC difference 0, EOB); the encode writes them with the optimal tables (Annex K.2,
 * as huffstats.c builds them). The decode reads a copy of the scan without its 0xFF00
 * stuffing (rc_unstuff_scan, which also checks the restart markers and the EOI once), so a
 * refill is one 8-byte load with no test for 0xFF bytes. The header is the source's own (its
 * tables, frame, APPn and COM segments, in order) with new DHT, DRI and SOS segments, so the
 * coefficients, and hence the pixels, are the source's. Anything it does not expect (progressive or
 * arithmetic coding, several scans, a bad code, a coefficient past 63, a value the baseline encoder
 * refuses, bits read past the data, bytes or markers out of place, a restart marker missing)
 * makes it give up before anything is returned: the caller then takes libjpeg's path,
 * which reports the same problems.
 */
#ifndef RECIO_RECODE_H
#define RECIO_RECODE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

/* Buffers kept from one image to the next (zero-initialised; rc_recoder_free releases). */
typedef struct {
  uint32_t *blocks; /* per real block: (uint16)DC | tokens << 16 | (an EOB) << 22 */
  size_t blocks_cap;
  uint32_t *tokens;          /* per non-zero AC coefficient: ZRLs before it << 24 | its run/size
                              * symbol << 16 | its value's raw bits */
  struct rc_dtables *tables; /* the decoding tables last built, by class and number: most
                              * sources share their Huffman tables (libjpeg's defaults) */
  size_t tokens_cap;
  uint8_t *data; /* the scan's entropy-coded data without its stuffing (rc_unstuff_scan) */
  size_t data_cap;
  size_t *seg; /* where its segments start in data */
  size_t seg_cap;
} rc_recoder;

void rc_recoder_free(rc_recoder *r);

/* After jpeg_read_header(src) of data[0:len]: the re-coded JPEG (restart > 0: a marker every
 * `restart` MCUs; < 0: every -restart MCU rows; 0: none) as a malloc'd *out of *outlen bytes,
 * and 0; or -1 with nothing allocated where the source is not one it takes (NOTE [re-code]).
 * src is only read. */
int rc_recode(rc_recoder *r, const struct jpeg_decompress_struct *src, const uint8_t *data,
              size_t len, int restart, uint8_t **out, size_t *outlen);

#endif
