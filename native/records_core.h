/* recio's RecordIO framing in C: the magic, frames written (im2rec's records) and walked (their
 * checksums), and a record's frame and IRHeader read in place for the decode threads (NOTE
 * [batch parse] in recio/records/batch.py, in C). The rule is recio/records/format.py's
 * (encode_record, walk_frames): a payload split at every magic word at an aligned offset, each
 * piece one frame (magic, cflag << 29 | length, data padded to 4), cflag 0 for a whole record,
 * else 1, 2..., 3. No Python here: the bindings hand it the buffers they hold.
 */
#ifndef RECIO_RECORDS_CORE_H
#define RECIO_RECORDS_CORE_H

#include <stddef.h>
#include <stdint.h>

#define RC_RECORD_MAGIC 0xCED7230Au
#define RC_FRAME_HEADER 8               /* magic, lrec */
#define RC_MAX_PAYLOAD ((1u << 29) - 1) /* payloads (and frames): the 29-bit length */

/* Bytes encode_record() makes of a payload of len bytes: frame headers (one more for every
 * RecordIO magic at a 4-byte-aligned offset), the data, padding to 4. */
size_t rc_frames_size(const uint8_t *payload, size_t len);

/* encode_record(payload) into out (rc_frames_size bytes); returns the bytes written and sets
 * *crc to the sidecar's checksum of the record (its frames without the final padding). */
size_t rc_write_frames(const uint8_t *payload, size_t len, uint8_t *out, uint32_t *crc);

/* Where the frames of the record at `offset` of base[0:size) end (its last frame's data),
 * or -1 if they do not chain (bad magic, cflag, or past the end). */
int64_t rc_frames_end(const uint8_t *base, size_t size, size_t offset);

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
  const int64_t *offsets; /* [n] */
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
