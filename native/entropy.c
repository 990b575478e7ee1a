/* recio entropy decoder (entropy.h, NOTE [entropy decode]). */
#include "entropy.h"

#include "unstuff.h"

#include <stdlib.h>
#include <string.h>

#include <jerror.h>

/* libjpeg's entropy decoder interface (jpegint.h, the same since IJG 6b): jpeglib.h only
 * declares it, and jpegint.h is not installed by every libjpeg-turbo build. */
struct jpeg_entropy_decoder {
  void (*start_pass)(j_decompress_ptr cinfo);
  boolean (*decode_mcu)(j_decompress_ptr cinfo, JBLOCKROW *MCU_data);
  boolean insufficient_data;
};

#define RC_FAST_BITS 10
#define FAST_SIZE (1 << RC_FAST_BITS)

/* A whole entry (bits 0-7 not 0) is a step of the decode done: bits 0-7 the bits its code and
 * value take, 8-15 the zeros before the coefficient (63 for the end of the block, so that the
 * step leaves the block), 16-31 the value, signed (each field a whole byte or two, so that
 * reading it takes one instruction). The fast table holds one for each code
 * whose value's bits fit in the RC_FAST_BITS looked up with it, so most coefficients take one
 * lookup and no arithmetic. A part entry (bits 0-7 clear) holds the code and the symbol only:
 * bits 16-20 the code's length, 21-24 the value's size, 25-28 the zero run; complete() reads
 * its value. 0 in the fast table: a code longer than RC_FAST_BITS (complete() decodes it). */
#define E_WHOLE(f) ((f) & 0xFF)
#define WHOLE(total, run, v) \
  ((uint32_t)(total) | (uint32_t)(run) << 8 | (uint32_t)(uint16_t)(int16_t)(v) << 16)
#define E_TOTAL(f) ((int)((f) & 0xFF))
#define E_RUN(f) ((unsigned)((f) >> 8 & 0xFF))
#define E_VALUE(f) ((int)(int16_t)(uint16_t)((f) >> 16))
#define PART(l, s, run) ((uint32_t)(l) << 16 | (uint32_t)(s) << 21 | (uint32_t)(run) << 25)
#define P_CODE(f) ((int)((f) >> 16 & 31))
#define P_SIZE(f) ((int)((f) >> 21 & 15))
#define P_RUN(f) ((int)((f) >> 25 & 15))
#define END_OF_BLOCK 63
/* A table entry is 64 bits: a whole or part entry in the low 32; in a whole one, bits 32-39
 * the bits of its first symbol alone. An AC table's whole entry may hold a second symbol
 * whose code and value fit in the looked-up bits after the first's (a pair, two
 * coefficients for one lookup): then bits 0-7 count both symbols' bits, 40-46 say how far
 * the second moves on from the first (its run + 1) and 48-63 hold its value. A single's
 * 40-46 are 0 and 48-63 the first's value again, so that writing the second changes nothing
 * and the decode needs no branch to tell the two apart. */
#define E_FIRST(f) ((int)((f) >> 32 & 0xFF))
#define E_ADVANCE(f) ((unsigned)((f) >> 40 & 127))
#define E_VALUE2(f) ((int)(int16_t)(uint16_t)((f) >> 48))

/* A DC table's entries, by the next RC_DC_BITS bits: bits 0-4 the code's length, 5-8 its
 * value's size (the value is read from the bits after the code); 0 for a longer code. A DC
 * difference seldom fits in a fast entry with its code, and one lookup a block into a table
 * of 1 kB stays in L1 beside the AC tables, where a DC table of fast entries (8 kB) would
 * keep being evicted by them. */
#define RC_DC_BITS 9
#define DC_CODE(d) ((int)((d) & 31))
#define DC_SIZE(d) ((int)((d) >> 5))

typedef struct {
  uint64_t fast[FAST_SIZE];     /* an AC table's entries, by the next RC_FAST_BITS bits */
  uint16_t dc[1 << RC_DC_BITS]; /* a DC table's entries */
  int32_t maxcode[18];          /* canonical decode of the longer codes, as libjpeg's */
  int32_t valoffset[18];
  uint8_t huffval[256];
  uint8_t bits[17]; /* the JHUFF_TBL it was built from, with huffval */
  int built;        /* from bits and huffval: an image with the same table skips the build */
} htable;

/* The bit reader: buf holds cnt unread bits, first in the top one; p is the next byte to
 * load. A refill ORs in the next eight bytes where the unread bits end (the bits it repeats
 * are the same ones) and leaves 56 to 63 bits. */
typedef struct {
  uint64_t buf;
  int cnt;
  const uint8_t *p;
} bitreader;

struct rc_entropy {
  struct jpeg_entropy_decoder pub; /* first: libjpeg calls through cinfo->entropy */
  rc_unstuff u;                    /* the scan's entropy-coded bytes, unstuffed */
  const uint8_t *data;             /* u.data: segment i is data[u.seg[i] : u.seg[i + 1]] */
  size_t nseg, segment, end_bits;  /* the segment being read, where it ends (in bits) */
  bitreader bits;
  size_t mcus_left;
  size_t interval, restarts_to_go;
  size_t copied_end; /* in bits: an MCU starting past it could read past the copy (note_copy) */
  size_t copied;     /* the segments before it are copied whole, short of copied_end */
  int last_dc[MAX_COMPS_IN_SCAN];
  int member[D_MAX_BLOCKS_IN_MCU];
  uint8_t dc_needed[D_MAX_BLOCKS_IN_MCU], ac_needed[D_MAX_BLOCKS_IN_MCU];
  const htable *dct[D_MAX_BLOCKS_IN_MCU], *act[D_MAX_BLOCKS_IN_MCU];
  htable dc[NUM_HUFF_TBLS], ac[NUM_HUFF_TBLS];
  size_t columns, column;           /* MCUs a row; the next MCU's column */
  size_t first_column, last_column; /* the MCU columns whose coefficients are stored */
  int failed;
  /* (rc_entropy_begin_window's, for its rc_entropy_begin) the window's source scan */
  const rc_unstuff_window *window;
  const uint8_t *window_src;
  size_t window_n;
};

/* zigzag to natural order, then 63 for the steps that go past the end: a run past the 63rd
 * coefficient (libjpeg writes its value there) and END_OF_BLOCK's (a 0, where no step before
 * it wrote: one that had would have ended the block) */
static const uint8_t natural[64 + 64] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
    41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
    30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

rc_entropy *rc_entropy_new(void) {
  return calloc(1, sizeof(rc_entropy));
}

void rc_entropy_free(rc_entropy *e) {
  if (!e) return;
  rc_unstuff_free(&e->u);
  free(e);
}

int rc_entropy_failed(const rc_entropy *e) {
  return e->failed;
}

/* JPEG's signed magnitude (F.2.2.1): the value of the s bits v. */
static inline int extend(int v, int s) {
  /* (libjpeg's HUFF_EXTEND: the sign is a coin toss, so no branch) */
  return v + ((v - (1 << (s - 1))) >> 31 & ((int)(~0u << s) + 1));
}

/* The whole entry of the AC symbol sym after a code of l bits, its value the next bits of b
 * (the code at b's top). */
static inline uint32_t whole(uint64_t b, int l, int sym) {
  const int s = sym & 15;
  if (s) return WHOLE(l + s, sym >> 4, extend((int)((b << l) >> (64 - s)), s));
  /* size 0: sixteen zeros (run 15) or the end of the block */
  return WHOLE(l, sym == 0xF0 ? 15 : END_OF_BLOCK, 0);
}

/* The value of the s bits at b's top (s 0 to 15; 0 bits: 0), as extend(), with no branch
 * on s. */
static inline int value_at(uint64_t b, int s) {
  const int v = (int)(b >> 1 >> (63 - s));
  return v - ((v - ((1 << s) >> 1)) >> 31 & ((1 << s) - 1));
}

/* The 64-bit entry of a whole entry w alone (no second symbol). */
static inline uint64_t single(uint32_t w) {
  return w | (uint64_t)E_TOTAL(w) << 32 | (uint64_t)(w >> 16) << 48;
}

/* Pairs in an AC table (see E_FIRST): each whole entry, the end of the block aside, with the
 * entry of the bits after it where that one is whole within them. */
static void make_pairs(htable *t) {
  for (int x = 0; x < FAST_SIZE; x++) {
    const uint64_t f = t->fast[x];
    if (!E_WHOLE(f) || E_RUN(f) == END_OF_BLOCK) continue;
    const int used = E_TOTAL(f);
    /* (entries made pairs before this one keep their first symbol as it was: E_FIRST) */
    const uint64_t g = t->fast[(x << used) & (FAST_SIZE - 1)];
    if (!E_WHOLE(g) || E_FIRST(g) > RC_FAST_BITS - used) continue;
    t->fast[x] = ((f & 0xFFFFFF00u) | (uint32_t)(used + E_FIRST(g))) | (uint64_t)used << 32 |
                 (uint64_t)(E_RUN(g) + 1) << 40 | (uint64_t)(uint16_t)E_VALUE(g) << 48;
  }
}

/* libjpeg's derived table (jpeg_make_d_derived_tbl) and the fast entries; 0 where the
 * table is not one libjpeg would have accepted. */
static int build_table(htable *t, const JHUFF_TBL *h, int is_dc) {
  if (!h) return 0;
  if (t->built && !memcmp(t->bits, h->bits, sizeof t->bits) &&
      !memcmp(t->huffval, h->huffval, sizeof t->huffval))
    return 1;
  t->built = 0;
  int count = 0, code = 0, p = 0;
  for (int l = 1; l <= 16; l++) count += h->bits[l];
  if (count > 256) return 0;
  if (is_dc)
    memset(t->dc, 0, sizeof t->dc);
  else
    memset(t->fast, 0, sizeof t->fast);
  for (int l = 1; l <= 16; l++) {
    const int n = h->bits[l];
    if (n) {
      t->valoffset[l] = p - code;
      for (int i = 0; i < n; i++, p++, code++) {
        if (code >= 1 << l) return 0; /* an all-ones code, or too many of this length */
        const int sym = h->huffval[p];
        if (is_dc) {
          if (sym > 15) return 0;
          if (l > RC_DC_BITS) continue;
          const int spare = RC_DC_BITS - l;
          for (int x = 0; x < 1 << spare; x++)
            t->dc[(code << spare) + x] = (uint16_t)(l | sym << 5);
          continue;
        }
        if (l > RC_FAST_BITS) continue;
        const int spare = RC_FAST_BITS - l, fits = l + (sym & 15) <= RC_FAST_BITS;
        for (int x = 0; x < 1 << spare; x++) {
          const int bits = (code << spare) + x;
          t->fast[bits] = fits ? single(whole((uint64_t)bits << (64 - RC_FAST_BITS), l, sym))
                               : PART(l, sym & 15, sym >> 4);
        }
      }
      t->maxcode[l] = code - 1;
    } else {
      t->maxcode[l] = -1;
    }
    code <<= 1;
  }
  t->maxcode[17] = 0x7FFFFFFF; /* (never reached: l > 16 fails first) */
  memcpy(t->huffval, h->huffval, sizeof t->huffval);
  if (!is_dc) make_pairs(t);
  memcpy(t->bits, h->bits, sizeof t->bits);
  t->built = 1;
  return 1;
}

static inline void refill(bitreader *r) {
  uint64_t v;
  memcpy(&v, r->p, sizeof v);
  r->buf |= __builtin_bswap64(v) >> r->cnt;
  r->p += (63 - r->cnt) >> 3;
  r->cnt |= 56;
}

static inline void consume(bitreader *r, int n) {
  r->buf <<= n;
  r->cnt -= n;
}

/* The symbol of a code longer than first - 1 bits at b's top, decoded as libjpeg does: its
 * length in bits 0-4, the symbol in 5-12; 0 for a code no table has. */
static unsigned long_code(const htable *t, uint64_t b, int first) {
  for (int l = first; l <= 16; l++) {
    const int32_t code = (int32_t)(b >> (64 - l));
    if (code <= t->maxcode[l])
      return (unsigned)(l | t->huffval[(code + t->valoffset[l]) & 0xFF] << 5);
  }
  return 0;
}

/* The whole entry of the AC code at b's top where the fast table's entry f is not one: a
 * part entry's value read, or a code longer than the table decoded. 0 for a code no table
 * has. */
static uint64_t complete(const htable *t, uint64_t b, uint64_t f) {
  if (f) return single(whole(b, P_CODE(f), P_RUN(f) << 4 | P_SIZE(f)));
  const unsigned c = long_code(t, b, RC_FAST_BITS + 1);
  return c ? single(whole(b, (int)(c & 31), (int)(c >> 5))) : 0;
}

static void stop(j_decompress_ptr ci, rc_entropy *e) {
  e->failed = 1;
  ci->err->msg_code = JWRN_HUFF_BAD_CODE;
  (*ci->err->error_exit)((j_common_ptr)ci);
}

static void start_pass(j_decompress_ptr ci) {
  stop(ci, (rc_entropy *)ci->entropy); /* a single scan has one pass, begun before us */
}

/* One step of a block's AC coefficients, in decode_block's loop: a step from the fast table
 * reads at most RC_FAST_BITS, so the loop checks the bits left once every three steps (a
 * refill leaves 56 or more); complete() reads up to 31, so it refills first where the
 * group's other steps would not find their bits after it. */
#define AC_STEP(keep)                                                         \
  f = t->fast[r->buf >> (64 - RC_FAST_BITS)];                                 \
  if (!E_WHOLE(f)) {                                                          \
    if (r->cnt < 31 + 2 * RC_FAST_BITS) refill(r);                            \
    if (!(f = complete(t, r->buf, f))) return 0;                              \
  }                                                                           \
  k += E_RUN(f);                                                              \
  if (keep) blk[natural[k]] = (JCOEF)E_VALUE(f);                              \
  if (k >= DCTSIZE2 - 1) { /* the end: a pair's second is the next block's */ \
    consume(r, E_FIRST(f));                                                   \
    break;                                                                    \
  }                                                                           \
  consume(r, E_TOTAL(f));                                                     \
  k += E_ADVANCE(f);                                                          \
  if (keep) blk[natural[k]] = (JCOEF)E_VALUE2(f);                             \
  if (++k >= DCTSIZE2) break;

/* One block: its DC coefficient into blk[0] (where the component is needed) and, keep set,
 * its AC coefficients into blk (zeroed by the caller); keep 0, they are only read past (blk:
 * one JCOEF). A step is a whole entry's: the zeros before the coefficient, then it (and a
 * pair's second). 0 on a code no table has. */
static inline __attribute__((always_inline)) int decode_block(rc_entropy *e, bitreader *r, int b_n,
                                                              int keep, JCOEF *blk) {
  if (r->cnt < 32) refill(r); /* a DC code and value: at most 31 bits */
  const htable *t = e->dct[b_n];
  unsigned d = t->dc[r->buf >> (64 - RC_DC_BITS)];
  if (!d && !(d = long_code(t, r->buf, RC_DC_BITS + 1))) return 0;
  const int diff = value_at(r->buf << DC_CODE(d), DC_SIZE(d));
  consume(r, DC_CODE(d) + DC_SIZE(d));
  if (e->dc_needed[b_n]) {
    const int ci = e->member[b_n];
    /* (as libjpeg: the sum may wrap on damaged data; the block keeps its low 16 bits) */
    e->last_dc[ci] = (int)((unsigned)e->last_dc[ci] + (unsigned)diff);
    blk[0] = (JCOEF)e->last_dc[ci];
  }
  t = e->act[b_n];
  uint64_t f;
  unsigned k = 1;
  for (;;) {
    if (r->cnt < 3 * RC_FAST_BITS) refill(r);
    AC_STEP(keep)
    AC_STEP(keep)
    AC_STEP(keep)
  }
  return 1;
}

/* ---- the unstuffed copy, made as the reader reaches it (NOTE [entropy decode]) ---- */

/* How much more is copied when the reader needs more. */
#define UNSTUFF_CHUNK 4096
/* How far short of the copy's end an MCU may start: all it may read (RC_UNSTUFF_PAD), and
 * room for the refills' look-ahead. */
#define UNSTUFF_MARGIN (RC_UNSTUFF_PAD + 64)

/* Where the segment being read ends in the copy (in bits), or SIZE_MAX till the copy meets
 * its marker (till then no MCU can read past it). */
static size_t segment_end(const rc_entropy *e) {
  return e->u.found > e->segment ? e->u.seg[e->segment + 1] * 8 : SIZE_MAX;
}

/* After the copy grew or the reader moved on to a segment: copied_end, where the next MCU
 * could read past the copy (UNSTUFF_MARGIN before its end), and end_bits, which decode_mcu
 * checks the reader against once an MCU: where the segment ends, or copied_end before that. */
static void note_copy(rc_entropy *e) {
  const rc_unstuff *u = &e->u;
  /* (a copy not done holds UNSTUFF_MARGIN bytes or more: copy_ahead asks for them) */
  e->copied_end = u->state == RC_UNSTUFF_DONE ? SIZE_MAX : (u->len - UNSTUFF_MARGIN) * 8;
  /* the segments copied whole short of copied_end: all, once done; else those whose end
   * (seg[t], non-decreasing) is short of it, found by halving */
  size_t lo = e->copied, hi = u->found;
  if (u->state == RC_UNSTUFF_DONE) lo = hi;
  while (lo < hi) {
    const size_t mid = hi - (hi - lo) / 2;
    if (u->seg[mid] * 8 <= e->copied_end)
      lo = mid;
    else
      hi = mid - 1;
  }
  e->copied = lo;
  const size_t end = segment_end(e);
  e->end_bits = e->copied_end < end ? e->copied_end : end;
}

/* The copy made UNSTUFF_MARGIN bytes past `at` and a chunk more; a scan framed otherwise
 * stops the decode, so that libjpeg's decodes the image. */
static void copy_ahead(j_decompress_ptr ci, rc_entropy *e, size_t at) {
  if (rc_unstuff_to(&e->u, at + UNSTUFF_MARGIN + UNSTUFF_CHUNK) == RC_UNSTUFF_BAD) stop(ci, e);
  note_copy(e);
}

/* decode_mcu found the reader at `bits`, past end_bits: past the segment's end (what libjpeg
 * warns about) the decode stops, else the copy goes on for the next MCU. */
static __attribute__((noinline)) void past_end_bits(j_decompress_ptr ci, rc_entropy *e,
                                                    size_t bits) {
  if (bits <= segment_end(e)) copy_ahead(ci, e, bits / 8);
  if (bits > segment_end(e)) stop(ci, e);
}

/* After the scan's last MCU: the copy made to the EOI, where libjpeg reads on (a window's
 * copy: libjpeg's source, the cut's header, is at its EOI already). */
static __attribute__((noinline)) void copy_to_eoi(j_decompress_ptr ci, rc_entropy *e) {
  if (rc_unstuff_to(&e->u, SIZE_MAX) != RC_UNSTUFF_DONE) stop(ci, e);
  if (e->u.windowed) return;
  ci->src->next_input_byte = e->u.src + e->u.eoi;
  ci->src->bytes_in_buffer = e->u.n - e->u.eoi;
}

/* seek's way to a segment not copied whole yet, or past the last. */
static __attribute__((noinline)) void seek_copying(j_decompress_ptr ci, rc_entropy *e,
                                                   size_t segment) {
  if (segment >= e->nseg) stop(ci, e);
  e->segment = segment;
  e->bits.buf = 0;
  e->bits.cnt = 0;
  while (e->u.found < segment) /* the marker before it not copied yet */
    copy_ahead(ci, e, e->u.len);
  const size_t start = e->u.seg[segment];
  e->bits.p = e->data + start;
  note_copy(e);
  if (start * 8 > e->end_bits) copy_ahead(ci, e, start);
}

/* The reader at the start of a segment; past the last, the decode stops. */
static void seek(j_decompress_ptr ci, rc_entropy *e, size_t segment) {
  if (segment >= e->copied) {
    seek_copying(ci, e, segment);
    return;
  }
  e->segment = segment;
  e->bits.buf = 0;
  e->bits.cnt = 0;
  e->bits.p = e->data + e->u.seg[segment];
  e->end_bits = e->u.seg[segment + 1] * 8;
}

static boolean decode_mcu(j_decompress_ptr ci, JBLOCKROW *MCU_data) {
  rc_entropy *e = (rc_entropy *)ci->entropy;
  if (e->restarts_to_go == 0) { /* the next segment: DC predictions from 0 */
    seek(ci, e, e->segment + 1);
    memset(e->last_dc, 0, sizeof e->last_dc);
    e->restarts_to_go = e->interval;
  }
  /* libjpeg reads no coefficient of an MCU outside the columns it IDCTs (rc_entropy_columns),
   * nor any when it skips rows (MCU_data NULL) */
  const size_t column = e->column;
  if (++e->column == e->columns) e->column = 0;
  const int read = MCU_data && column >= e->first_column && column <= e->last_column;
  bitreader r = e->bits;
  for (int n = 0; n < ci->blocks_in_MCU; n++) {
    JCOEF dc = 0;
    int ok;
    if (read && e->ac_needed[n]) {
      ok = decode_block(e, &r, n, 1, MCU_data[n][0]);
    } else {
      ok = decode_block(e, &r, n, 0, &dc);
      if (read && e->dc_needed[n]) MCU_data[n][0][0] = dc;
    }
    if (!ok) stop(ci, e); /* a code no table has: what libjpeg warns about */
  }
  /* bits past the segment (libjpeg warns), or the copy to be made further: checked once an
   * MCU, which may read as far as RC_UNSTUFF_PAD past the data */
  const size_t at = (size_t)(r.p - e->data) * 8 - (size_t)r.cnt;
  if (at > e->end_bits) past_end_bits(ci, e, at);
  e->bits = r;
  e->restarts_to_go--;
  if (--e->mcus_left == 0) copy_to_eoi(ci, e); /* libjpeg reads on at the EOI */
  return TRUE;
}

void rc_entropy_columns(rc_entropy *e, size_t first, size_t last) {
  e->first_column = first;
  e->last_column = last;
}

int rc_entropy_begin(rc_entropy *e, j_decompress_ptr ci) {
  e->failed = 0;
  if (ci->progressive_mode || ci->arith_code || ci->data_precision != 8 ||
      ci->comps_in_scan != ci->num_components || ci->Ss != 0 || ci->Se != DCTSIZE2 - 1 ||
      ci->Ah != 0 || ci->Al != 0 || ci->blocks_in_MCU < 1 ||
      ci->blocks_in_MCU > D_MAX_BLOCKS_IN_MCU || ci->output_scanline != 0 ||
      ci->input_iMCU_row != 0 || !ci->entropy)
    return 0;
  int built_dc = 0, built_ac = 0;
  for (int c = 0; c < ci->comps_in_scan; c++) {
    const jpeg_component_info *p = ci->cur_comp_info[c];
    const int d = p->dc_tbl_no, a = p->ac_tbl_no;
    if (d < 0 || d >= NUM_HUFF_TBLS || a < 0 || a >= NUM_HUFF_TBLS) return 0;
    if (!(built_dc & 1 << d) && !build_table(&e->dc[d], ci->dc_huff_tbl_ptrs[d], 1)) return 0;
    if (!(built_ac & 1 << a) && !build_table(&e->ac[a], ci->ac_huff_tbl_ptrs[a], 0)) return 0;
    built_dc |= 1 << d;
    built_ac |= 1 << a;
  }
  for (int n = 0; n < ci->blocks_in_MCU; n++) {
    const int c = ci->MCU_membership[n];
    const jpeg_component_info *p = ci->cur_comp_info[c];
    e->member[n] = c;
    e->dct[n] = &e->dc[p->dc_tbl_no];
    e->act[n] = &e->ac[p->ac_tbl_no];
    /* as libjpeg: no AC coefficients for a component decoded at 1/8 */
    e->dc_needed[n] = p->component_needed != 0;
    e->ac_needed[n] = p->component_needed && p->DCT_scaled_size > 1;
  }
  const size_t mcus = (size_t)ci->MCUs_per_row * ci->MCU_rows_in_scan;
  e->interval = ci->restart_interval ? ci->restart_interval : mcus;
  e->nseg = (mcus + e->interval - 1) / e->interval;
  if (!mcus) return 0;
  /* the first chunk of the copy: a scan it shows framed otherwise is libjpeg's from the start
   * (a window's must have the segments the cut's header counts) */
  size_t window_segments = e->nseg;
  if ((e->window
           ? rc_unstuff_begin_window(&e->u, e->window_src, e->window_n, e->window, &window_segments)
           : rc_unstuff_begin(&e->u, ci->src->next_input_byte, ci->src->bytes_in_buffer,
                              e->nseg)) ||
      window_segments != e->nseg ||
      rc_unstuff_to(&e->u, UNSTUFF_MARGIN + UNSTUFF_CHUNK) == RC_UNSTUFF_BAD)
    return 0;
  e->data = e->u.data;
  e->mcus_left = mcus;
  e->columns = ci->MCUs_per_row;
  e->column = 0;
  e->first_column = 0;
  e->last_column = e->columns - 1;
  e->copied = 0; /* (seek_copying: the copy's state noted) */
  seek(ci, e, 0);
  e->restarts_to_go = e->interval;
  memset(e->last_dc, 0, sizeof e->last_dc);
  e->pub.start_pass = start_pass;
  e->pub.decode_mcu = decode_mcu;
  e->pub.insufficient_data = FALSE;
  ci->entropy = &e->pub;
  return 1;
}

int rc_entropy_framed(rc_entropy *e) {
  return rc_unstuff_to(&e->u, SIZE_MAX) == RC_UNSTUFF_DONE;
}

int rc_entropy_begin_window(rc_entropy *e, j_decompress_ptr ci, const uint8_t *src, size_t n,
                            const rc_unstuff_window *w) {
  e->window = w;
  e->window_src = src;
  e->window_n = n;
  const int taken = rc_entropy_begin(e, ci);
  e->window = NULL;
  return taken;
}
