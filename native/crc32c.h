/* recio record checksums: CRC32C (Castagnoli) of a buffer.
 *
 * The same value as the PyPI crc32c package's crc32c(data) (checked by a test): SSE4.2's
 * crc32 instruction where the CPU has it (chosen once, at import), else a table. A record's
 * checksum covers its frames as stored: from its first frame header to the end of its last
 * frame's data (NOTE [checksum sidecar] in recio/records/checksum.py; where they end is
 * records_core.h's rc_frames_end).
 */
#ifndef RECIO_CRC32C_H
#define RECIO_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Choose the implementation (once, before any thread computes): "sse4.2" or "table"
 * (also where RECIO_CRC32C=table is set). */
const char *rc_crc32c_init(void);

/* CRC32C of n bytes at p, continuing `crc` (0 for a new one), as crc32c.crc32c(data, crc). */
uint32_t rc_crc32c(uint32_t crc, const uint8_t *p, size_t n);

/* The CRC32C of A followed by B, from crc_a = CRC32C(A), crc_b = CRC32C(B) and B's length
 * (zlib's crc32_combine): crc_a moved past len_b zero bytes (times x^(8 len_b) mod P, four
 * products of table entries), then crc_b added. A record's sidecar checksum from its header's
 * and its JPEG's (NOTE [one pass per record] in bind_pool.c). */
uint32_t rc_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint32_t len_b);

#endif
