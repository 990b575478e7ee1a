/* recio stream check: the JPEGs whose whole entropy-coded data a decode has read cleanly.
 *
 * NOTE [whole-stream check]: a crop decode leaves entropy data unread: the rows below the
 * crop (libjpeg stops after its last row) and, with restart markers, the segments outside it
 * (NOTE [restart cut]). Damage there would make a record's status depend on its crop: good in
 * one epoch, bad in the next. So the first decode of a JPEG by a pool reads its whole stream
 * (the rows past the crop skipped, entropy-decoded without IDCT; no cut) and gives the
 * status of all of it; when that is clean, its key (CRC32C and length of the bytes) goes into
 * the pool's set, and later decodes of the same bytes take the shortcuts. A damaged JPEG is
 * never in the set: every decode of it reads it whole and reports the same damage. The cost
 * is the first epoch's (no cut, every row entropy-decoded) and, after, a CRC32C per image
 * (SSE4.2: some microseconds for 100 KB) and 16 bytes of set per JPEG.
 */
#ifndef RECIO_STREAMCHECK_H
#define RECIO_STREAMCHECK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rc_checked {
  pthread_mutex_t mu;
  uint64_t *slots; /* open addressing, 0 = empty */
  size_t cap, n;
} rc_checked;

void rc_checked_init(rc_checked *s);
void rc_checked_destroy(rc_checked *s);
/* The key of a JPEG's bytes (never 0). */
uint64_t rc_checked_key(const uint8_t *data, size_t len);
int rc_checked_has(rc_checked *s, uint64_t key);
/* Adds key (nothing where memory runs out: the JPEG is then checked again next time). */
void rc_checked_add(rc_checked *s, uint64_t key);

#endif
