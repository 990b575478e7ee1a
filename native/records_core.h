/* recio's record parse for the decode threads: a RecordIO record's frame and IRHeader, read in
 * place (NOTE [batch parse] in recio/records/batch.py, in C). No Python here: the bindings
 * (bind_pool.c) hand it the buffers they hold.
 */
#ifndef RECIO_RECORDS_CORE_H
#define RECIO_RECORDS_CORE_H

#include <stddef.h>
#include <stdint.h>

/* Where one encoded image's (or record's) bytes are, inside a buffer the caller holds. */
typedef struct {
  const uint8_t *buf;
  size_t len;
} rc_span;

/* Where decode_records finds a batch's records: record i starts at base[offsets[i]], or, with
 * extents (one buffer per record: a remote batch as fetched, never joined into one), at
 * extents[i][offsets[i]]. Each decode thread parses its records' headers itself, into labels,
 * ids and the image spans (then inside the record's own buffer). */
typedef struct {
  const uint8_t *base;
  int64_t size;
  const rc_span *extents; /* [n], or NULL: every record in base */
  const int64_t *offsets;   /* [n] */
  int label_width;
  float *labels;    /* [n][label_width] */
  int64_t *ids;     /* [n] */
  int64_t *starts;  /* [n]: the image, base[starts[i] : starts[i] + lengths[i]] */
  int64_t *lengths; /* [n] */
} rc_records;

/* Parses record i of r into labels, ids, starts and lengths [i], and points *image at its image:
 * RC_OK, or RC_RECORD (ids[i] -1, the span empty) where the record is not plainly one frame
 * with its IRHeader inside its buffer, for the caller's exact parse. */
int rc_parse_record(const rc_records *r, size_t i, rc_span *image);

#endif
