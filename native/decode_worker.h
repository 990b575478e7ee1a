/* The decode worker's insides, for the libjpeg decode passes: decode_core.c's (RGB out) and
 * encode_core.c's plane decode (im2rec's re-encode). Private to those two files: the bindings
 * and the rest of native/ use decode_core.h.
 *
 * A pass: rc_check_input, rc_fresh_decompressor, rc_jpeg_err_reset, setjmp(w->err.jb) (its
 * branch: rc_pass_failed), jpeg_read_header, rc_crop_window, the scale, rc_reserve_decode,
 * rc_start_decompress, the rows, jpeg_abort_decompress, rc_warned. A pass that returns
 * RC_DECODE_AGAIN is run once more with w->own_entropy 0 (NOTE [entropy decode]).
 */
#ifndef RECIO_DECODE_WORKER_H
#define RECIO_DECODE_WORKER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

#include "decode_core.h"
#include "entropy.h"
#include "jpeg_glue.h"
#include "resample.h"

struct rc_worker {
  struct jpeg_decompress_struct cinfo;
  struct jpeg_progress_mgr progress;
  rc_jpeg_err err; /* warnings classified by warning_status */
  uint8_t *row, *tmp, *line, *hline, *image, *cut;
  size_t row_cap, tmp_cap, line_cap, hline_cap, image_cap; /* image: colour's output pixels */
  size_t cut_cap;      /* cut: the crop's segments as a JPEG (NOTE [restart cut]) */
  rc_entropy *entropy; /* recio's Huffman decoder (NOTE [entropy decode]) */
  int own_entropy;     /* this pass may use it (a pass after it stopped may not) */
  int entropy_on;      /* it decodes this image's scan */
  int stock_entropy;   /* RECIO_STOCK_ENTROPY=1: libjpeg's always (for comparing the two) */
  float *planes;       /* colour's scratch */
  size_t planes_cap;
  float lut[3 * 256]; /* this image's (store_norm) */
  rc_coeffs ch, cv;
  uint8_t *src_plane[RC_MAX_PLANES], *out_plane[RC_MAX_PLANES]; /* rc_decode_planes */
  size_t src_cap[RC_MAX_PLANES], out_cap[RC_MAX_PLANES];
  struct rc_budget *held_from; /* whose share this worker holds (NOTE [decode budget]) */
  uint64_t held;
  /* The key of the JPEG about to be decoded, where its caller computed it (rc_checked_key_of,
   * NOTE [one pass per record] in bind_pool.c), else 0: computed when needed. */
  uint64_t stream_key;
};

/* recio's entropy decoder stopped at damaged data: libjpeg's decodes the image again. */
#define RC_DECODE_AGAIN (-1000)

/* Counts a pass run again for RC_DECODE_AGAIN (rc_second_decodes). */
void rc_count_second_decode(void);

/* w's decompressor replaced by a new one, no table of the image before left (NOTE [fresh
 * tables] in decode_core.c): RC_OK, or RC_NOMEM (its message in err unless NULL). */
int rc_fresh_decompressor(rc_worker *w, char *err);

/* RC_OK, or the status (and message) of an empty, non-JPEG input or a bad output size. */
int rc_check_input(const uint8_t *data, size_t len, const rc_opts *o, char *err);

/* After jpeg_read_header: RC_TOO_LARGE over o->max_pixels, else the crop {x, y, w, h} (NULL:
 * the whole image) intersected with the image (RC_BAD_PARAM when it misses it). */
int rc_crop_window(struct jpeg_decompress_struct *ci, const int32_t *crop, const rc_opts *o,
                   int64_t *x0, int64_t *y0, int64_t *x1, int64_t *y1, char *err);

/* jpeg_abort_decompress, then msg into err: returns status. */
int rc_fail(struct jpeg_decompress_struct *ci, char *err, int status, const char *msg);

/* After jpeg_read_header: libjpeg's whole-image coefficient buffer (0 for a single scan). */
uint64_t rc_coef_buffer_bytes(j_decompress_ptr ci);

/* After jpeg_calc_output_dimensions: libjpeg's other buffers. */
uint64_t rc_libjpeg_rows_bytes(j_decompress_ptr ci);

/* Takes `need` from the budget before jpeg_start_decompress allocates (NOTE [decode budget]);
 * coef: rc_coef_buffer_bytes, libjpeg's own limit derived from it. */
int rc_reserve_decode(rc_worker *w, const rc_opts *o, uint64_t coef, uint64_t need, char *err);

/* jpeg_start_decompress, then recio's Huffman decoder for the scan where it takes it. */
void rc_start_decompress(rc_worker *w);

/* The setjmp branch of a pass: RC_DECODE_AGAIN, or libjpeg's error as a status and message. */
int rc_pass_failed(rc_worker *w, char *err);

/* The status the warnings of the image just decoded give it (NOTE [libjpeg warnings]). */
int rc_warned(const rc_jpeg_err *e, char *err);

#endif
