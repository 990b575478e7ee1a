/* recio's RecordIO framing (records_core.h): frames written and walked, and the frame and
 * IRHeader of one record read in place. */
#include "records_core.h"

#include <string.h>

#include "crc32c.h"
#include "decode_core.h" /* the RC_* statuses */

#define IR_HEADER 24 /* flag, label, id, id2 */
#define LENGTH_MASK RC_MAX_PAYLOAD
enum { CFLAG_WHOLE = 0, CFLAG_FIRST = 1, CFLAG_MIDDLE = 2, CFLAG_LAST = 3 };

static uint32_t word_at(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v; /* little-endian hosts only, as the rest of recio's native code */
}

/* ---- frames written: dmlc's RecordIOWriter (encode_record) ---- */

/* A payload is split at every magic word at an aligned offset, the whole words scanned only. */
size_t rc_frames_size(const uint8_t *p, size_t len) {
  size_t frames = 1;
  for (size_t i = 0; i + 4 <= len; i += 4) frames += word_at(p + i) == RC_RECORD_MAGIC;
  const size_t data = len - 4 * (frames - 1);
  return RC_FRAME_HEADER * frames + data + (-data & 3);
}

static uint8_t *put_header(uint8_t *out, uint32_t cflag, size_t length) {
  const uint32_t h[2] = {RC_RECORD_MAGIC, cflag << 29 | (uint32_t)length};
  memcpy(out, h, RC_FRAME_HEADER);
  return out + RC_FRAME_HEADER;
}

size_t rc_write_frames(const uint8_t *p, size_t len, uint8_t *out, uint32_t *crc) {
  uint8_t *o = out;
  size_t start = 0;
  for (size_t i = 0; i + 4 <= len; i += 4) {
    if (word_at(p + i) != RC_RECORD_MAGIC) continue;
    o = put_header(o, start == 0 ? CFLAG_FIRST : CFLAG_MIDDLE, i - start);
    memcpy(o, p + start, i - start);
    o += i - start;
    start = i + 4;
  }
  o = put_header(o, start ? CFLAG_LAST : CFLAG_WHOLE, len - start);
  memcpy(o, p + start, len - start);
  o += len - start;
  *crc = rc_crc32c(0, out, (size_t)(o - out));
  const size_t pad = -(len - start) & 3;
  memset(o, 0, pad);
  return (size_t)(o - out) + pad;
}

/* ---- frames walked (the checksums' extent) ---- */

int64_t rc_frames_end(const uint8_t *base, size_t size, size_t offset) {
  size_t pos = offset;
  for (int first = 1;; first = 0) {
    if (pos > size || size - pos < RC_FRAME_HEADER || word_at(base + pos) != RC_RECORD_MAGIC)
      return -1;
    const uint32_t lrec = word_at(base + pos + 4);
    const uint32_t cflag = lrec >> 29, length = lrec & LENGTH_MASK;
    /* a start is whole or first, then middles and a last */
    if (cflag > CFLAG_LAST || first != (cflag <= CFLAG_FIRST)) return -1;
    if (size - pos - RC_FRAME_HEADER < length) return -1;
    const size_t end = pos + RC_FRAME_HEADER + length;
    if (cflag == CFLAG_WHOLE || cflag == CFLAG_LAST) return (int64_t)end;
    pos = end + (-length & 3);
  }
}

/* ---- one record read in place (the decode threads' parse) ---- */

/* NOTE [batch parse] in recio/records/batch.py, in C: a record that is plainly fine (aligned, one
 * frame with the magic, inside the base, room for the IRHeader and its labels, an id below
 * 2**63) is parsed here; any other gets RC_RECORD, for the reader's exact parse. */
int rc_parse_record(const rc_records *r, size_t i, rc_span *image) {
  const int64_t off = r->offsets[i];
  const uint8_t *base = r->extents ? r->extents[i].buf : r->base;
  const int64_t size = r->extents ? (int64_t)r->extents[i].len : r->size;
  r->ids[i] = -1;
  r->starts[i] = r->lengths[i] = 0;
  float *labels = r->labels + i * (size_t)r->label_width;
  if (off < 0 || (off & 3) || off > size - (RC_FRAME_HEADER + IR_HEADER)) return RC_RECORD;
  const uint8_t *p = base + off;
  const uint32_t lrec = word_at(p + 4), flag = word_at(p + 8);
  const int64_t end = off + RC_FRAME_HEADER + (int64_t)lrec; /* cflag 0: lrec is the length */
  const int64_t start = off + RC_FRAME_HEADER + IR_HEADER + 4 * (int64_t)flag;
  int64_t id;
  memcpy(&id, p + 16, 8);
  if (word_at(p) != RC_RECORD_MAGIC || (lrec >> 29) || end > size || start > end || id < 0)
    return RC_RECORD;
  for (int k = 0; k < r->label_width; k++) {
    if (flag == 0) /* the one label, in every column */
      memcpy(labels + k, p + 12, 4);
    else if ((uint32_t)k < flag) /* inside the record: start <= end checked above */
      memcpy(labels + k, p + RC_FRAME_HEADER + IR_HEADER + 4 * k, 4);
    else
      labels[k] = 0;
  }
  r->ids[i] = id;
  r->starts[i] = start;
  r->lengths[i] = end - start;
  *image = (rc_span){p + (start - off), (size_t)(end - start)};
  return RC_OK;
}
