/* recio encode core: RGB pixels -> baseline JPEG, and JPEG -> planes -> JPEG (im2rec's
 * re-encode: the plane decode, rc_decode_planes, beside the plane encode).
 *
 * No Python here. An rc_encoder holds a reusable libjpeg compressor and the RGB scratch image
 * a transcode decodes into; one per thread, like rc_worker.
 */
#ifndef RECIO_ENCODE_CORE_H
#define RECIO_ENCODE_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "decode_core.h"

/* A JPEG's planes after crop and resample, as a raw-data JPEG encoder takes them: one luma
 * plane for grey output, else Y, Cb, Cr with chroma at half width and height (4:2:0). Rows
 * and columns are edge-padded to whole MCUs (16x16 luma for colour, 8x8 for grey). */
typedef struct {
  int nplanes;
  int width[RC_MAX_PLANES], height[RC_MAX_PLANES]; /* valid samples */
  size_t stride[RC_MAX_PLANES];                    /* bytes per row */
  uint8_t *data[RC_MAX_PLANES]; /* owned by the worker: valid until its next call */
} rc_planes;

/* Decodes a YCbCr or greyscale JPEG without colour conversion or chroma upsampling, then crops
 * and resamples each plane to o->out_w x o->out_h luma samples (o's interp, dct_mode and
 * max_pixels are used; flip and layout are not). Other colour spaces (CMYK, YCCK, RGB-coded)
 * get RC_UNSUPPORTED: take the RGB way (rc_decode) for them. */
int rc_decode_planes(rc_worker *w, const uint8_t *data, size_t len, const int32_t *crop,
                     const rc_opts *o, int gray, rc_planes *out, char *err);

typedef struct rc_encoder rc_encoder;

rc_encoder *rc_encoder_new(void);
void rc_encoder_free(rc_encoder *e);
/* The restart markers the encoder's next JPEGs get: one every `restart` MCUs (> 0), every
 * -restart MCU rows (< 0), or none (0, the default). */
void rc_encoder_set_restart(rc_encoder *e, int restart);
/* Frees the transcode scratch image when over RC_KEEP_BYTES (after a huge image). */
void rc_encoder_trim(rc_encoder *e);

/* Encodes w x h packed RGB pixels as a baseline JPEG at `quality` (1..100): YCbCr with 4:2:0
 * chroma (what OpenCV, hence MXNet's im2rec, writes), or one luma channel when `gray`.
 * On RC_OK *out is a malloc'd buffer of *outlen bytes that the caller frees; on failure
 * *out is NULL and err holds a message (RC_ERRLEN bytes). */
int rc_encode_jpeg(rc_encoder *e, const uint8_t *rgb, int w, int h, int quality, int gray,
                   uint8_t **out, size_t *outlen, char *err);

/* Encodes planes made by rc_decode_planes (w x h luma samples) with libjpeg's raw-data
 * interface: 4:2:0 YCbCr, or grey for one plane. Results as rc_encode_jpeg. */
int rc_encode_planes(rc_encoder *e, const rc_planes *p, int w, int h, int quality, uint8_t **out,
                     size_t *outlen, char *err);

/* YCbCr and grey JPEGs: rc_decode_planes then rc_encode_planes. Others (CMYK, YCCK):
 * rc_decode (crop, DCT scaling, resample to o->out_w x o->out_h; o must ask for uint8 NHWC
 * RGB) then rc_encode_jpeg: one JPEG becomes another without leaving C. A truncated input
 * is an error here (RC_TRUNCATED), not a partial image. */
int rc_transcode(rc_worker *w, rc_encoder *e, const uint8_t *data, size_t len, const int32_t *crop,
                 const rc_opts *o, int quality, int gray, uint8_t **out, size_t *outlen, char *err);

/* Pixels another library decoded (packed RGB, rows of `stride` bytes) → rc_resize_rgb to
 * o->out_w x o->out_h → rc_encode_jpeg (4:2:0 at `quality`). Results as rc_encode_jpeg. */
int rc_resize_encode(rc_worker *w, rc_encoder *e, const uint8_t *rgb, int width, int height,
                     size_t stride, const int32_t *crop, const rc_opts *o, int quality,
                     uint8_t **out, size_t *outlen, char *err);

#endif
