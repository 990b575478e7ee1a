/* recio Huffman statistics (huffstats.h). */
#include "huffstats.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* zigzag position k -> index in the natural (row-major) block */
static const int ZIGZAG[64] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,
                               12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28,
                               35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
                               58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};

/* ZZ_BITS[i][v]: the zigzag mask of natural-order byte i (coefficients 8i..8i+7) being v */
static uint64_t ZZ_BITS[8][256];
static pthread_once_t zz_once = PTHREAD_ONCE_INIT;

static void init_zz(void) {
  int zz_of[64];
  for (int k = 0; k < 64; k++) zz_of[ZIGZAG[k]] = k;
  for (int i = 0; i < 8; i++)
    for (int v = 0; v < 256; v++) {
      uint64_t m = 0;
      for (int b = 0; b < 8; b++)
        if (v >> b & 1) m |= (uint64_t)1 << zz_of[8 * i + b];
      ZZ_BITS[i][v] = m;
    }
}

/* The non-zero coefficients of a block as a mask in zigzag order. */
static uint64_t nonzero_zigzag(const JCOEF *blk) {
  uint64_t natural;
#ifdef __SSE2__
  const __m128i zero = _mm_setzero_si128();
  uint32_t lo = 0, hi = 0;
  for (int i = 0; i < 4; i++) {
    __m128i a = _mm_loadu_si128((const __m128i *)(blk + 16 * i));
    __m128i b = _mm_loadu_si128((const __m128i *)(blk + 16 * i + 8));
    __m128i z = _mm_packs_epi16(_mm_cmpeq_epi16(a, zero), _mm_cmpeq_epi16(b, zero));
    const uint32_t bits = (uint32_t)(~_mm_movemask_epi8(z) & 0xFFFF);
    if (i < 2)
      lo |= bits << (16 * i);
    else
      hi |= bits << (16 * (i - 2));
  }
  natural = (uint64_t)hi << 32 | lo;
#else
  natural = 0;
  for (int i = 0; i < 64; i++) natural |= (uint64_t)(blk[i] != 0) << i;
#endif
  uint64_t m = 0;
  for (int i = 0; i < 8; i++) m |= ZZ_BITS[i][(natural >> (8 * i)) & 0xFF];
  return m;
}

static int nbits(int v) {
  unsigned a = (unsigned)(v < 0 ? -v : v);
  return a ? 32 - __builtin_clz(a) : 0;
}

/* One block's symbols: its DC difference's category, then the AC run/size pairs. */
static void count_block(const JCOEF *blk, int *last_dc, long *dc, long *ac) {
  const int dc_val = blk[0];
  dc[nbits(dc_val - *last_dc)]++;
  *last_dc = dc_val;
  uint64_t m = nonzero_zigzag(blk) & ~(uint64_t)1;
  int prev = 0;
  while (m) {
    const int k = __builtin_ctzll(m);
    m &= m - 1;
    int run = k - prev - 1;
    for (; run > 15; run -= 16) ac[0xF0]++; /* ZRL */
    ac[(run << 4) + nbits(blk[ZIGZAG[k]])]++;
    prev = k;
  }
  if (prev < 63) ac[0x00]++; /* EOB */
}

void rc_huff_table(const long counts[256], uint8_t bits_out[17], uint8_t huffval[256]) {
  long freq[257];
  int codesize[257], others[257], bits[33];
  memcpy(freq, counts, sizeof(long) * 256);
  freq[256] = 1; /* a reserved symbol: no code is all ones */
  for (int i = 0; i < 257; i++) codesize[i] = 0, others[i] = -1;
  memset(bits, 0, sizeof bits);
  /* Merge the two least frequent, ties to the larger symbol (libjpeg's rule, whose linear
   * scans found them): a heap of the symbols with counts, least (frequency, -symbol) first. */
  int heap[257], n = 0;
#define BEFORE(a, b) (freq[a] < freq[b] || (freq[a] == freq[b] && (a) > (b)))
#define SIFT_DOWN(at)                                  \
  for (int i_ = (at);;) {                              \
    int m_ = i_, l_ = 2 * i_ + 1, r_ = l_ + 1;         \
    if (l_ < n && BEFORE(heap[l_], heap[m_])) m_ = l_; \
    if (r_ < n && BEFORE(heap[r_], heap[m_])) m_ = r_; \
    if (m_ == i_) break;                               \
    const int t_ = heap[i_];                           \
    heap[i_] = heap[m_], heap[m_] = t_, i_ = m_;       \
  }
  for (int i = 0; i <= 256; i++)
    if (freq[i]) heap[n++] = i;
  for (int i = n / 2 - 1; i >= 0; i--) SIFT_DOWN(i);
  while (n > 1) {
    int c1 = heap[0];
    heap[0] = heap[--n];
    SIFT_DOWN(0);
    int c2 = heap[0];
    freq[c1] += freq[c2]; /* c2 leaves; c1, now heavier, goes down from the top */
    freq[c2] = 0;
    heap[0] = c1;
    SIFT_DOWN(0);
    codesize[c1]++;
    while (others[c1] >= 0) c1 = others[c1], codesize[c1]++;
    others[c1] = c2;
    codesize[c2]++;
    while (others[c2] >= 0) c2 = others[c2], codesize[c2]++;
  }
#undef SIFT_DOWN
#undef BEFORE
  for (int i = 0; i <= 256; i++)
    if (codesize[i]) bits[codesize[i] > 32 ? 32 : codesize[i]]++;
  for (int i = 32; i > 16; i--) /* limit the lengths to 16 bits */
    while (bits[i] > 0) {
      int j = i - 2;
      while (bits[j] == 0) j--;
      bits[i] -= 2;
      bits[i - 1]++;
      bits[j + 1] += 2;
      bits[j]--;
    }
  int i = 16;
  while (bits[i] == 0) i--;
  bits[i]--; /* the reserved symbol's code */
  bits_out[0] = 0;
  for (int k = 1; k <= 16; k++) bits_out[k] = (uint8_t)bits[k];
  int start[34] = {0}; /* the symbols by code size, then number (a counting sort) */
  for (int s = 0; s <= 255; s++)
    if (codesize[s] >= 1 && codesize[s] <= 32) start[codesize[s] + 1]++;
  for (int len = 1; len <= 32; len++) start[len + 1] += start[len];
  for (int s = 0; s <= 255; s++)
    if (codesize[s] >= 1 && codesize[s] <= 32) huffval[start[codesize[s]]++] = (uint8_t)s;
}

static void make_table(j_compress_ptr ci, JHUFF_TBL **slot, const long counts[256]) {
  if (!*slot) *slot = jpeg_alloc_huff_table((j_common_ptr)ci);
  JHUFF_TBL *t = *slot;
  uint8_t bits[17];
  memset(t->huffval, 0, sizeof t->huffval);
  rc_huff_table(counts, bits, t->huffval);
  for (int k = 0; k <= 16; k++) t->bits[k] = bits[k];
  t->sent_table = FALSE;
}

int rc_huff_optimise(j_decompress_ptr src, j_compress_ptr dst, jvirt_barray_ptr *coefs) {
  const int nc = dst->num_components;
  if (nc < 1 || nc > 4 || dst->progressive_mode || dst->arith_code) return -1;
  pthread_once(&zz_once, init_zz);
  int max_h = 1, max_v = 1;
  for (int c = 0; c < nc; c++) {
    const jpeg_component_info *p = &dst->comp_info[c];
    if (p->dc_tbl_no < 0 || p->dc_tbl_no >= NUM_HUFF_TBLS || p->ac_tbl_no < 0 ||
        p->ac_tbl_no >= NUM_HUFF_TBLS)
      return -1;
    if (p->h_samp_factor > max_h) max_h = p->h_samp_factor;
    if (p->v_samp_factor > max_v) max_v = p->v_samp_factor;
  }
  const long W = (long)dst->image_width, H = (long)dst->image_height;
  /* a lone component's MCU is one block; interleaved: max_h x max_v pixels of blocks */
  const int single = nc == 1;
  int hs[4], vs[4], wb[4], hb[4];
  for (int c = 0; c < nc; c++) {
    const jpeg_component_info *p = &dst->comp_info[c];
    hs[c] = single ? 1 : p->h_samp_factor;
    vs[c] = single ? 1 : p->v_samp_factor;
    wb[c] = (int)((W * p->h_samp_factor + 8L * max_h - 1) / (8L * max_h));
    hb[c] = (int)((H * p->v_samp_factor + 8L * max_v - 1) / (8L * max_v));
  }
  const int cols = single ? wb[0] : (int)((W + 8L * max_h - 1) / (8L * max_h));
  const int rows = single ? hb[0] : (int)((H + 8L * max_v - 1) / (8L * max_v));
  long interval =
      dst->restart_in_rows ? (long)dst->restart_in_rows * cols : (long)dst->restart_interval;
  if (interval > 65535) interval = 65535; /* as jcmaster.c caps it */
  long dc[NUM_HUFF_TBLS][256], ac[NUM_HUFF_TBLS][256];
  memset(dc, 0, sizeof dc);
  memset(ac, 0, sizeof ac);
  int last_dc[4] = {0, 0, 0, 0};
  long mcu = 0;
  for (int mr = 0; mr < rows; mr++) {
    JBLOCKARRAY band[4];
    for (int c = 0; c < nc; c++) /* this MCU row's block rows, all there are of them */
      band[c] = (*src->mem->access_virt_barray)((j_common_ptr)src, coefs[c],
                                                (JDIMENSION)(mr * vs[c]), (JDIMENSION)vs[c], FALSE);
    for (int mc = 0; mc < cols; mc++, mcu++) {
      if (interval && mcu % interval == 0) memset(last_dc, 0, sizeof last_dc);
      for (int c = 0; c < nc; c++) {
        const jpeg_component_info *p = &dst->comp_info[c];
        long *d = dc[p->dc_tbl_no], *a = ac[p->ac_tbl_no];
        for (int y = 0; y < vs[c]; y++) {
          const int by = mr * vs[c] + y;
          for (int x = 0; x < hs[c]; x++) {
            const int bx = mc * hs[c] + x;
            if (by < hb[c] && bx < wb[c]) {
              count_block(band[c][y][bx], &last_dc[c], d, a);
            } else { /* the encoder's dummy block: the last DC again, no AC */
              d[0]++;
              a[0x00]++;
            }
          }
        }
      }
    }
  }
  for (int t = 0; t < NUM_HUFF_TBLS; t++) {
    int used_dc = 0, used_ac = 0;
    for (int c = 0; c < nc; c++) {
      used_dc |= dst->comp_info[c].dc_tbl_no == t;
      used_ac |= dst->comp_info[c].ac_tbl_no == t;
    }
    if (used_dc) make_table(dst, &dst->dc_huff_tbl_ptrs[t], dc[t]);
    if (used_ac) make_table(dst, &dst->ac_huff_tbl_ptrs[t], ac[t]);
  }
  dst->optimize_coding = FALSE;
  return 0;
}
