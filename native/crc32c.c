/* CRC32C of a buffer (see crc32c.h). */
#include "crc32c.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define RC_HAVE_SSE42 1
#endif

#define POLY 0x82F63B78u /* Castagnoli, reflected */

static uint32_t table[256];
static int use_hw;

static uint32_t crc_table(uint32_t crc, const uint8_t *p, size_t n) {
  crc = ~crc;
  while (n--) crc = table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

/* NOTE [three streams]: crc32 has a latency of three cycles and a throughput of one a cycle, so
 * one chain of it runs at a third of what the instruction allows. A long buffer is taken in
 * rounds of three adjacent pieces of LONG (then SHORT) bytes whose CRCs are three independent
 * chains, run together; the CRC of the first piece is then moved past the second (as if LONG
 * zero bytes followed it: a linear map over GF(2), one lookup in shift tables per byte of it)
 * and the second's added, and the same for the third. Pieces are powers of two, for which the
 * shift tables are made by squaring the one-zero-bit map (rc_crc32c_init). */
#define LONG 8192
#define SHORT 256

static uint32_t shift_long[4][256], shift_short[4][256];

/* The map (32 columns) applied to vec, over GF(2). */
static uint32_t gf2_apply(const uint32_t *map, uint32_t vec) {
  uint32_t sum = 0;
  for (; vec; vec >>= 1, map++)
    if (vec & 1) sum ^= *map;
  return sum;
}

/* square = map applied twice. */
static void gf2_square(uint32_t *square, const uint32_t *map) {
  for (int k = 0; k < 32; k++) square[k] = gf2_apply(map, map[k]);
}

/* The tables that move a CRC past `bytes` zero bytes (a power of two). */
static void make_shift(uint32_t tables[4][256], size_t bytes) {
  uint32_t map[32], next[32];
  map[0] = POLY; /* one zero bit: the reflected CRC shifts right, the low bit feeds POLY */
  for (int k = 1; k < 32; k++) map[k] = 1u << (k - 1);
  for (size_t bits = 1; bits < 8 * bytes; bits <<= 1) {
    gf2_square(next, map);
    memcpy(map, next, sizeof map);
  }
  for (uint32_t b = 0; b < 256; b++)
    for (int k = 0; k < 4; k++) tables[k][b] = gf2_apply(map, b << (8 * k));
}

static uint32_t shift(const uint32_t tables[4][256], uint32_t crc) {
  return tables[0][crc & 0xFF] ^ tables[1][(crc >> 8) & 0xFF] ^ tables[2][(crc >> 16) & 0xFF] ^
         tables[3][crc >> 24];
}

#ifdef RC_HAVE_SSE42
static uint64_t word64(const uint8_t *p) {
  uint64_t w;
  memcpy(&w, p, 8);
  return w;
}

/* Rounds of three `piece`-byte chains (NOTE [three streams]) while 3 * piece bytes are left. */
__attribute__((target("sse4.2"))) static uint64_t crc_rounds(uint64_t c, const uint8_t **p,
                                                             size_t *n, size_t piece,
                                                             const uint32_t tables[4][256]) {
  for (; *n >= 3 * piece; *n -= 3 * piece, *p += 3 * piece) {
    const uint8_t *a = *p, *end = a + piece;
    uint64_t c1 = 0, c2 = 0;
    for (; a < end; a += 8) {
      c = _mm_crc32_u64(c, word64(a));
      c1 = _mm_crc32_u64(c1, word64(a + piece));
      c2 = _mm_crc32_u64(c2, word64(a + 2 * piece));
    }
    c = shift(tables, (uint32_t)c) ^ (uint32_t)c1;
    c = shift(tables, (uint32_t)c) ^ (uint32_t)c2;
  }
  return c;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n) {
  uint64_t c = ~crc;
  for (; n && ((uintptr_t)p & 7); n--) c = _mm_crc32_u8((uint32_t)c, *p++);
  c = crc_rounds(c, &p, &n, LONG, shift_long);
  c = crc_rounds(c, &p, &n, SHORT, shift_short);
  for (; n >= 8; n -= 8, p += 8) c = _mm_crc32_u64(c, word64(p));
  for (; n; n--) c = _mm_crc32_u8((uint32_t)c, *p++);
  return ~(uint32_t)c;
}
#endif

/* a * b mod P, both reflected (bit 31 is x^0): b times each bit of a, without branches. */
static uint32_t mul_mod(uint32_t a, uint32_t b) {
  uint32_t p = 0;
  for (int k = 31; k >= 0; k--) {
    p ^= b & (0u - ((a >> k) & 1));
    b = (b >> 1) ^ (POLY & (0u - (b & 1)));
  }
  return p;
}

/* x^(8 b 256^k) mod P for each byte b of a 32-bit length: x to the bits of `len` zero bytes
 * is the product of four of them, where squarings would take one a bit. */
static uint32_t zeros_pow[4][256];

uint32_t rc_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint32_t len_b) {
  uint32_t shift_by = zeros_pow[0][len_b & 0xFF];
  for (int k = 1; k < 4; k++) shift_by = mul_mod(zeros_pow[k][(len_b >> 8 * k) & 0xFF], shift_by);
  return mul_mod(shift_by, crc_a) ^ crc_b;
}

/* zeros_pow: row k from x^(8 * 256^k), each entry the one before times it. */
static void make_zeros_pow(void) {
  uint32_t step = 1u << 23; /* x^8: one zero byte */
  for (int k = 0; k < 4; k++) {
    zeros_pow[k][0] = 1u << 31; /* x^0 */
    for (int b = 1; b < 256; b++) zeros_pow[k][b] = mul_mod(zeros_pow[k][b - 1], step);
    step = mul_mod(zeros_pow[k][255], step); /* x^(8 * 256^(k + 1)) */
  }
}

const char *rc_crc32c_init(void) {
  make_zeros_pow();
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (POLY & (0u - (c & 1)));
    table[i] = c;
  }
  make_shift(shift_long, LONG);
  make_shift(shift_short, SHORT);
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
