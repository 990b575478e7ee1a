/* recio stream check: the JPEGs whose whole entropy-coded data a decode has read cleanly.
 *
 * NOTE [whole-stream check]: a crop decode leaves entropy data unread: the rows below the
 * crop (libjpeg stops after its last row) and, with restart markers, the segments outside it
 * (NOTE [restart cut]). Damage there would make a record's status depend on its crop: good in
 * one epoch, bad in the next. So the first decode of a JPEG in a process reads its whole
 * stream (the rows past the crop skipped, entropy-decoded without IDCT; no cut) and gives the
 * status of all of it; when that is clean, its key (CRC32C and length of the bytes) goes into
 * the process's set, and later decodes of the same bytes, by any pool, take the shortcuts
 * (one set for the process, so an iterator opened again, a resumed run or a benchmark's
 * rounds do not check again what the process has read). A damaged JPEG is
 * never in the set: every decode of it reads it whole and reports the same damage. The cost
 * is the first epoch's (no cut, every row entropy-decoded) and, after, a CRC32C per image
 * (SSE4.2: some microseconds for 100 KB) and 16 bytes of set per JPEG. Where a local file's
 * batch is checked against its checksum sidecar, that CRC32C is the pass the sidecar's check
 * takes from too (NOTE [one pass per record] in bind_pool.c): the key is the same.
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
/* The key of a JPEG's bytes (never 0): their CRC32C and length. */
uint64_t rc_checked_key(const uint8_t *data, size_t len);
/* The same key from the bytes' CRC32C, where the caller has it (NOTE [one pass per record] in
 * bind_pool.c). */
uint64_t rc_checked_key_of(uint32_t crc, size_t len);
int rc_checked_has(rc_checked *s, uint64_t key);
/* Adds key (nothing where memory runs out: the JPEG is then checked again next time). */
void rc_checked_add(rc_checked *s, uint64_t key);
/* The process's set, every pool's. Called with the GIL held (pool creation, and a parent's
 * pool first used in a forked child): in a forked child it starts a set of its own, since the
 * parent's copy may have been mid-change (its lock held) when the process forked. */
rc_checked *rc_checked_process(void);

#endif
