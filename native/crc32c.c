/* CRC32C of records' frames (see crc32c.h). */
#include "crc32c.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define RC_HAVE_SSE42 1
#endif

#define POLY 0x82F63B78u /* Castagnoli, reflected */
#define MAGIC 0xCED7230Au
#define LENGTH_MASK ((1u << 29) - 1)

static uint32_t table[256];
static int use_hw;

static uint32_t crc_table(uint32_t crc, const uint8_t *p, size_t n) {
  crc = ~crc;
  while (n--) crc = table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

#ifdef RC_HAVE_SSE42
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n) {
  uint64_t c = ~crc;
  for (; n && ((uintptr_t)p & 7); n--) c = _mm_crc32_u8((uint32_t)c, *p++);
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  for (; n; n--) c = _mm_crc32_u8((uint32_t)c, *p++);
  return ~(uint32_t)c;
}
#endif

const char *rc_crc32c_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (POLY & (0u - (c & 1)));
    table[i] = c;
  }
#ifdef RC_HAVE_SSE42
  const char *forced = getenv("RECIO_CRC32C"); /* "table": the fallback, for its tests */
  __builtin_cpu_init();
  use_hw = !(forced && strcmp(forced, "table") == 0) && __builtin_cpu_supports("sse4.2");
  if (use_hw) return "sse4.2";
#endif
  return "table";
}

uint32_t rc_crc32c(uint32_t crc, const uint8_t *p, size_t n) {
#ifdef RC_HAVE_SSE42
  if (use_hw) return crc_hw(crc, p, n);
#endif
  return crc_table(crc, p, n);
}

static uint32_t word_at(const uint8_t *p) {
  uint32_t w;
  memcpy(&w, p, 4);
  return w; /* little-endian hosts only, as the rest of recio's native code */
}

int64_t rc_frames_end(const uint8_t *base, size_t size, size_t offset) {
  size_t pos = offset;
  for (int first = 1;; first = 0) {
    if (pos > size || size - pos < 8 || word_at(base + pos) != MAGIC) return -1;
    const uint32_t lrec = word_at(base + pos + 4);
    const uint32_t cflag = lrec >> 29, length = lrec & LENGTH_MASK;
    if (cflag > 3 || first != (cflag <= 1)) return -1; /* a start is 0 or 1, then 2 or 3 */
    if (size - pos - 8 < length) return -1;
    const size_t end = pos + 8 + length;
    if (cflag == 0 || cflag == 3) return (int64_t)end;
    pos = end + (-length & 3);
  }
}
