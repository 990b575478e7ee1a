/* recio im2rec core: one list entry's file -> its framed RecordIO record, without Python.
 *
 * What recio/im2rec/transcode.py's make_records does for a plain JPEG (read the file, read
 * its headers, choose the crop and output size, transcode, put the IRHeader before it) and
 * what recio/records/format.py's encode_record and the checksum sidecar do with the payload (frame
 * it, CRC32C the frames), in one call a pool thread makes. NOTE [im2rec in C]: only files
 * that are plainly fine are done here: anything else (not a JPEG, EXIF-rotated, unreadable,
 * damaged, an output size or header the Python code refuses) is left to the Python path,
 * which makes it or says why not.
 */
#ifndef RECIO_IM2REC_CORE_H
#define RECIO_IM2REC_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "decode_core.h"
#include "encode_core.h"

/* The EncodeOptions (recio/im2rec/transcode.py) a C-made record depends on. */
typedef struct {
  int resize;      /* shorter side, 0: keep the size */
  int center_crop; /* keep the centred square */
  int color;       /* 1 colour, 0 grey, -1 as the file is */
  int quality;     /* 1..100 */
  int restart;     /* restart markers, as rc_encoder_set_restart takes */
  uint64_t max_output_bytes;
} rc_im2rec_opts;

/* What jpeg_header() reads from a JPEG. */
typedef struct {
  int width, height;
  int orientation; /* EXIF orientation, 1 = upright */
  int components;  /* sampling factors present in the frame header */
} rc_jpeg_info;

/* jpeg_header() of recio/im2rec/transcode.py in C: 1 with *info set where Python would
 * return a header, 0 where it would raise SkipImage (or where its reading is not plain:
 * a frame header cut short, which Python still reads in part). */
int rc_jpeg_probe(const uint8_t *data, size_t len, rc_jpeg_info *info);

/* The crop (x, y, w, h), output size and grey flag transcode.py's _native_job gives, or 0
 * where it would not give one to C (EXIF-rotated, an output over the limits). */
int rc_im2rec_plan(const rc_jpeg_info *info, const rc_im2rec_opts *o, int32_t crop[4], int *out_w,
                   int *out_h, int *gray);

/* The whole file at path, malloc'd into *data (the caller frees; NULL for an empty file).
 * 0, or -1 with nothing allocated when it cannot be opened or read. */
int rc_read_path(const char *path, uint8_t **data, size_t *len);

/* One entry: rc_read_path, rc_jpeg_probe, rc_im2rec_plan, rc_transcode with base's options
 * (budget, DCT scaling, pixel limit; its size and crop are set here), then the record
 * prefix (IRHeader and labels) + JPEG framed by rc_write_frames (records_core.h) into a malloc'd
 * *frames of *nframes bytes. RC_OK, or RC_UNSUPPORTED (nothing allocated) where the Python path
 * must decide: any failure on the way, whatever its reason. */
int rc_im2rec_record(rc_worker *w, rc_encoder *e, const char *path, const uint8_t *prefix,
                     size_t prefix_len, const rc_im2rec_opts *o, const rc_opts *base,
                     uint8_t **frames, size_t *nframes, uint32_t *crc);

#endif
