/* recio's record parse (records_core.h): the frame and IRHeader of one record, read in place. */
#include "records_core.h"

#include <string.h>

#include "decode_core.h" /* the RC_* statuses */

#define RECORD_MAGIC 0xCED7230Au
#define FRAME_HEADER 8 /* magic, lrec */
#define IR_HEADER 24   /* flag, label, id, id2 */

static uint32_t word_at(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

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
  if (off < 0 || (off & 3) || off > size - (FRAME_HEADER + IR_HEADER)) return RC_RECORD;
  const uint8_t *p = base + off;
  const uint32_t lrec = word_at(p + 4), flag = word_at(p + 8);
  const int64_t end = off + FRAME_HEADER + (int64_t)lrec; /* cflag 0: lrec is the length */
  const int64_t start = off + FRAME_HEADER + IR_HEADER + 4 * (int64_t)flag;
  int64_t id;
  memcpy(&id, p + 16, 8);
  if (word_at(p) != RECORD_MAGIC || (lrec >> 29) || end > size || start > end || id < 0)
    return RC_RECORD;
  for (int k = 0; k < r->label_width; k++) {
    if (flag == 0) /* the one label, in every column */
      memcpy(labels + k, p + 12, 4);
    else if ((uint32_t)k < flag) /* inside the record: start <= end checked above */
      memcpy(labels + k, p + FRAME_HEADER + IR_HEADER + 4 * k, 4);
    else
      labels[k] = 0;
  }
  r->ids[i] = id;
  r->starts[i] = start;
  r->lengths[i] = end - start;
  *image = (rc_span){p + (start - off), (size_t)(end - start)};
  return RC_OK;
}
