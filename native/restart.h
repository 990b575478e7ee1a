/* recio restart cut: the part of a restart-marked JPEG that covers a crop, as a JPEG of its own.
 *
 * NOTE [restart cut]: a baseline JPEG's entropy-coded data is one chain, so a crop's decode must
 * Huffman-decode every MCU before the crop's last one. With restart markers (DRI) the chain is cut
 * into segments of `interval` MCUs that decode alone (the DC predictors reset at each).
 * rc_restart_cut copies the segments that cover a window of MCUs into a new JPEG: the source's
 * tables, its SOF with the window's width and height, the same DRI, the segments with their RST
 * markers renumbered, an EOI. Where recio's entropy decoder decodes it (NOTE [entropy decode]) the
 * JPEG is the header and the EOI alone (rc_restart_header): the decoder copies the window's
 * segments without their stuffing straight from the source's scan (unstuff.h's window,
 * rc_restart_window; the segments passed over have their markers checked as here), so the segments
 * are copied once, not twice; where that decoder stops, the decode is run again by libjpeg's, on
 * the cut with its segments. Decoding the cut gives the window's pixels exactly as the whole
 * image's decode does, away from the window's cut edges: there the chroma upsampler takes the cut
 * for an image edge, so the window keeps a margin beyond what the crop needs on every cut side:
 * two output pixels times the upsampling factor (libjpeg-turbo's fancy filters, at factor 2, read
 * one chroma sample beyond the one under a pixel; at factor 1, 4:4:4 or chroma the DCT scaling
 * brings to full size, none), rounded out to whole MCUs; a whole MCU where a component is
 * upsampled by any other factor. At the image's own right and bottom edges the window ends where
 * the image does, so its edge is the image's. Windows are whole segments: with a marker every k
 * MCUs and k dividing the MCUs of a row, any columns in steps of k; else whole rows, from a row
 * where a segment starts to one where a segment starts (or the last). A window must leave MCUs out
 * to be worth it. Anything else (progressive, several scans, arithmetic coding, a marker missing
 * or out of sequence, data cut short) gets no cut: the caller decodes the whole stream, which
 * reports what is wrong with it.
 */
#ifndef RECIO_RESTART_H
#define RECIO_RESTART_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

#include "unstuff.h"

/* The window of MCUs a cut keeps: columns c0..c1, rows r0..r1 (ends excluded). */
typedef struct {
  int c0, c1, r0, r1;
} rc_cut;

/* After jpeg_read_header of the whole stream, with scale_num/8 and the output dimensions
 * computed: the window of MCUs covering scaled columns x0..x1 and rows y0..y1 with the
 * margin NOTE [restart cut] says, aligned to whole segments. 1 with *cut set where the
 * window leaves out MCUs the decode would otherwise entropy-decode, 0 where no cut applies
 * or none would gain. */
/* The largest factor by which a component is upsampled across (*fh) and down (*fv), in
 * output pixels: 1 where none is (4:4:4, or chroma the DCT scaling makes full size), 2 for
 * libjpeg-turbo's fancy filters, which read one sample beyond; 0 for any other factor (then
 * a margin is a whole MCU). After jpeg_calc_output_dimensions (the DCT scales set). */
void rc_upsampling(const struct jpeg_decompress_struct *ci, int *fh, int *fv);

int rc_restart_plan(const struct jpeg_decompress_struct *ci, int x0, int x1, int y0, int y1,
                    rc_cut *cut);

/* The JPEG of the window `cut` of data[0:len] (which ci's header was read from) into *buf
 * (grown as needed, *cap bytes); its length, or 0 where the stream is not as the plan
 * expects (the caller then decodes the whole stream). */
size_t rc_restart_cut(const struct jpeg_decompress_struct *ci, const uint8_t *data, size_t len,
                      const rc_cut *cut, uint8_t **buf, size_t *cap);

/* The cut's JPEG without its entropy-coded data (an EOI right after its SOS), for recio's
 * entropy decoder, which copies the window's segments from the source itself
 * (rc_restart_window; no copy of them here): its length, 0 as rc_restart_cut; *scan: where the
 * source's entropy-coded data starts in data. */
size_t rc_restart_header(const struct jpeg_decompress_struct *ci, const uint8_t *data, size_t len,
                         const rc_cut *cut, uint8_t **buf, size_t *cap, size_t *scan);

/* The segments the cut keeps, as the unstuffed copy takes them; 0 where no cut applies. */
int rc_restart_window(const struct jpeg_decompress_struct *ci, const rc_cut *cut,
                      rc_unstuff_window *w);

#endif
