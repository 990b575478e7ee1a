/* recio lossless transcode: JPEG -> baseline JPEG with restart markers, in the DCT domain.
 *
 * libjpeg reads the quantised DCT coefficients (jpeg_read_coefficients) and writes them again
 * (jpeg_write_coefficients) with the source's quantisation tables and sampling: no IDCT, no
 * rounding, so the new file decodes to exactly the pixels of the old. The output is
 * sequential (a progressive source becomes baseline) with optimised Huffman tables and a
 * restart marker every `restart` MCUs (or every -restart MCU rows), and keeps the source's
 * APPn and COM segments. No Python here; one rc_lossless per thread, reused.
 */
#ifndef RECIO_LOSSLESS_H
#define RECIO_LOSSLESS_H

#include <stddef.h>
#include <stdint.h>

#include "decode_core.h"

typedef struct rc_lossless rc_lossless;

rc_lossless *rc_lossless_new(void);
void rc_lossless_free(rc_lossless *t);

/* Transcodes the JPEG data[0:len]. restart > 0: a marker every `restart` MCUs; < 0: every
 * -restart MCU rows; 0: none. The coefficients (and the output) are taken from o->budget
 * through w (released by the caller with rc_worker_release) and refused over o->max_pixels.
 * On RC_OK *out is a malloc'd JPEG of *outlen bytes that the caller frees. A source libjpeg
 * warns about (damaged, cut short) is refused (RC_CORRUPT, RC_TRUNCATED): its decode is not
 * well defined, so no copy of it could be called lossless. Not a JPEG: RC_UNSUPPORTED. */
int rc_lossless_transcode(rc_lossless *t, rc_worker *w, const rc_opts *o, const uint8_t *data,
                          size_t len, int restart, uint8_t **out, size_t *outlen, char *err);

#endif
