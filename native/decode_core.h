/* recio decode core: one JPEG -> crop -> resample -> flip -> cast, written in place.
 *
 * No Python here: the bindings (bind_*.c) own buffers and errors, the pool (pool.c) owns
 * threads. One rc_worker per thread holds a reusable libjpeg decompressor and scratch memory.
 */
#ifndef RECIO_DECODE_CORE_H
#define RECIO_DECODE_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "draw.h"

/* Per-image status codes: X(suffix, value, name) gives RC_<suffix> = value here, and the
 * extension exports recio._native.STATUS_<suffix> = value and STATUS_NAMES {value: name}
 * from this list (the one definition; recio/decode/status.py's names are checked against it). */
#define RC_STATUS_LIST(X)                                                                       \
  X(OK, 0, "ok")                                                                                \
  X(EMPTY, 1, "empty")             /* zero-length buffer */                                     \
  X(UNSUPPORTED, 2, "unsupported") /* not a JPEG (or a colour space left to the fallback) */    \
  X(CORRUPT, 3, "corrupt")         /* libjpeg reported an error, or a damaging warning */       \
  X(TRUNCATED, 4, "truncated")     /* data ended early (or at an EOI padding it): incomplete */ \
  X(TOO_LARGE, 5, "too large")     /* over the pixel limit or the budget: nothing allocated */  \
  X(NOMEM, 6, "out of memory")                                                                  \
  X(BAD_PARAM, 7, "bad parameter")                                                              \
  X(RECORD, 8, "record left to the exact parse") /* decode_records: not plainly one frame */

#define RC_STATUS_ENUM_(suffix, value, name) RC_##suffix = value,
enum { RC_STATUS_LIST(RC_STATUS_ENUM_) };
#undef RC_STATUS_ENUM_

enum { RC_INTERP_BILINEAR = 0, RC_INTERP_AREA = 1, RC_INTERP_NEAREST = 2 };
enum { RC_LAYOUT_NHWC = 0, RC_LAYOUT_NCHW = 1 };
/* Which libjpeg DCT-domain scale factors (num/8) may be used. */
enum { RC_DCT_OFF = 0, RC_DCT_POW2 = 1, RC_DCT_ALL = 2 };

#define RC_ERRLEN 256 /* > JMSG_LENGTH_MAX plus a prefix */

/* Scratch buffers a worker keeps from one image to the next when no larger (bigger ones, for
 * the rare huge image, are freed when the worker releases its budget share). */
#define RC_KEEP_BYTES ((size_t)16 << 20)

struct rc_budget;  /* pool.h */
struct rc_checked; /* streamcheck.h */

/* Options shared by every image of a batch. */
typedef struct {
  int out_w, out_h;
  int layout;      /* RC_LAYOUT_* */
  int itemsize;    /* 1: uint8 direct; 2 or 4: looked up in lut */
  const void *lut; /* [3][256] items of itemsize (value -> normalised float), or NULL */
  /* Float32 outputs: [3][2], each channel's table as the line level * a + b, checked exact
   * (NOTE [float store] in resample.h), or NULL: looked up. */
  const double *lut_line;
  /* Float32 outputs, for a drawn contrast factor and illumination (rc_colour_affine) and a
   * mean image: gain[c] = scale / std[c]; mean_img [3][out_h][out_w] (output channel order,
   * times gain), or NULL. out = lut * contrast + illumination * gain - contrast * mean_img. */
  const float *gain;
  const float *mean_img;
  int interp;   /* RC_INTERP_* */
  int bgr;      /* swap to BGR channel order */
  int dct_mode; /* RC_DCT_* */
  int roi;      /* decode only the rows/columns the crop needs */
  uint64_t max_pixels;
  /* NOTE [decode budget]: the bytes an image's decode allocates (libjpeg's whole-image
   * coefficient buffer for a progressive or multi-scan JPEG, the decoded rows the crop needs,
   * planes) are taken from this budget, shared by the pool's threads (and its Pillow path),
   * before they are allocated: a decode waits while others hold too much, and an image
   * that alone needs more than the limit is refused (RC_TOO_LARGE). NULL: no budget. */
  struct rc_budget *budget;
  /* NOTE [whole-stream check] (streamcheck.h): the JPEGs known whole; a crop decode of any
   * other reads its whole stream first. NULL: crops read only what they need. */
  struct rc_checked *checked;
  uint64_t extra_bytes; /* the caller's own memory for this image's output, taken with it */
} rc_opts;

typedef struct rc_worker rc_worker;

rc_worker *rc_worker_new(void);
void rc_worker_free(rc_worker *w);

/* Takes need + o->extra_bytes from o->budget for the image w is about to work on (giving back
 * first what w still holds, so that it never waits holding a share). RC_OK, or RC_TOO_LARGE
 * with a message when that alone is over the limit. rc_decode and rc_decode_planes (encode_core.h)
 * call it with their own estimate once the header is read. */
int rc_worker_reserve(rc_worker *w, const rc_opts *o, uint64_t need, const char *what, char *err);
/* Gives back w's budget share and frees scratch buffers over RC_KEEP_BYTES: call after each
 * image, once its output is no longer needed (rc_planes live in the worker until then). */
void rc_worker_release(rc_worker *w);

/* The whole-stream key (streamcheck.h) of the JPEG w decodes next, where its caller computed
 * it in a pass of its own (NOTE [one pass per record] in bind_pool.c); 0: computed when
 * needed. Set it back to 0 after that decode. */
void rc_worker_key(rc_worker *w, uint64_t key);

/* Decodes one image into `out` (this image's slot: out_h*out_w*3 items).
 * crop: {x, y, w, h} in source pixels or NULL for the whole image; clamped to the image.
 * Returns an RC_* status; on failure a message is written to err (RC_ERRLEN bytes). */
int rc_decode(rc_worker *w, const uint8_t *data, size_t len, const int32_t *crop, int flip,
              const rc_opts *o, void *out, char *err);

/* rc_decode with the window and flip of `record` drawn by `draw` (draw.h) from the size in the
 * header, and written to crop and flip (left as they were when the header cannot be read). */
int rc_decode_drawn(rc_worker *w, const uint8_t *data, size_t len, const rc_draw *draw,
                    int64_t record, int32_t crop[4], uint8_t *flip, const rc_opts *o, void *out,
                    char *err);

/* Resamples decoded pixels: the box crop {x, y, w, h} (inside the image) of `rgb` (height
 * rows of `stride` bytes, width packed RGB pixels each) to o->out_w x o->out_h with
 * o->interp, as Pillow's resize(size, box=...) does (the filter may reach past the box into
 * the image). Writes out_w * out_h * 3 bytes to `out`. For images another library decoded
 * (im2rec's PNGs). Returns RC_OK, or RC_BAD_PARAM / RC_NOMEM with a message in err. */
int rc_resize_rgb(rc_worker *w, const uint8_t *rgb, int width, int height, size_t stride,
                  const int32_t *crop, const rc_opts *o, uint8_t *out, char *err);

/* The resample and store of a crop decode over pixels decoded elsewhere: the window
 * {x0, y0, x1, y1} (fractional, inside the image) of `rgb` (height rows of `stride` bytes,
 * width packed RGB pixels each) to o's output (size, filter, layout, dtype, table), mirrored
 * when `flip`: the bytes a decode whose rows are these writes. For measuring the resampler
 * alone (tools/bench_resample.py) and testing it against a reference. Returns RC_OK, or
 * RC_BAD_PARAM / RC_NOMEM with a message in err. */
int rc_resample_window(rc_worker *w, const uint8_t *rgb, int width, int height, size_t stride,
                       const double window[4], int flip, const rc_opts *o, void *out, char *err);

/* Reads the header only. Returns RC_OK and sets width/height, or a status. */
int rc_image_size(rc_worker *w, const uint8_t *data, size_t len, int *width, int *height,
                  char *err);

/* 1 when recio's Huffman decoder takes the scan of this JPEG (NOTE [entropy decode]): one
 * baseline scan, its framing intact. */
int rc_own_entropy(rc_worker *w, const uint8_t *data, size_t len);

/* How many decodes in this process ran a second pass with libjpeg's Huffman decoder because
 * recio's stopped or did not take the scan (RC_DECODE_AGAIN): damaged data, or framing recio's
 * decoder leaves to libjpeg (0xFF fill bytes). An intact one-scan baseline JPEG without fill
 * bytes never adds to it, so a test can see a decode falling off the fast path, which the
 * pixels (libjpeg's either way) hide. */
uint64_t rc_second_decodes(void);

/* The planes a worker keeps for encode_core.c's plane decode (rc_decode_planes): Y, Cb, Cr. */
#define RC_MAX_PLANES 3

/* The DCT scale numerator (over 8) chosen for a crop of cw x ch going to ow x oh. */
int rc_dct_scale_num(int cw, int ch, int ow, int oh, int dct_mode);

#endif
