/* recio re-code (recode.h, NOTE [re-code]). */
#include "recode.h"

#include "huffstats.h"
#include "unstuff.h"

#include <stdlib.h>
#include <string.h>

#define LOOK 10          /* bits of a code decoded by one table look-up */
#define VALUE_FOLLOWS 64 /* in an AC fast entry: the value's bits come after those it has */

typedef struct {
  uint16_t look[1 << LOOK]; /* length << 8 | symbol; 0: a longer code */
  uint32_t fast[1 << LOOK]; /* code and value bits | symbol << 8 | value << 16; 0: none */
  int32_t maxcode[18];      /* the largest code of each length, -1: none */
  int32_t valoff[18];       /* huffval index of a code of that length, less the code */
  uint8_t huffval[256];
} dtable;

typedef struct {
  uint32_t code[256]; /* shifted left by the size of the symbol's value, to be or'ed in */
  uint8_t size[256];  /* the code's bits and the value's */
} etable;

/* A decoding table from a DHT's bits and values (Annex C, F.2.2.3); -1 if it is not one. */
static int make_dtable(const JHUFF_TBL *t, int dc, dtable *d) {
  if (!t) return -1;
  memset(d->look, 0, sizeof d->look);
  memcpy(d->huffval, t->huffval, sizeof d->huffval);
  int32_t code = 0, p = 0;
  for (int l = 1; l <= 16; l++) {
    const int n = t->bits[l];
    if (p + n > 256) return -1;
    d->valoff[l] = p - code;
    d->maxcode[l] = n ? code + n - 1 : -1;
    for (int i = 0; i < n; i++, code++, p++) {
      if (l <= LOOK)
        for (int j = 0; j < 1 << (LOOK - l); j++)
          d->look[(code << (LOOK - l)) | j] = (uint16_t)(l << 8 | t->huffval[p]);
    }
    if (code > 1 << l) return -1; /* over-subscribed */
    code <<= 1;
  }
  d->maxcode[17] = 0x7FFFFFFF; /* (a sentinel: the search stops) */
  /* a symbol and its value bits at once, where both fit in the look-up; for an AC code
   * that fits but whose value does not, the symbol and VALUE_FOLLOWS (step reads it) */
  for (int i = 0; i < 1 << LOOK; i++) {
    const int e = d->look[i], l = e >> 8, sym = e & 0xFF, s = dc ? sym : sym & 15;
    d->fast[i] = 0;
    if (e && s <= (dc ? 15 : 10) && l + s <= LOOK)
      d->fast[i] = (uint32_t)(l + s) | (uint32_t)sym << 8 |
                   ((unsigned)i >> (LOOK - l - s) & ((1u << s) - 1)) << 16;
    else if (e && !dc && s <= 10)
      d->fast[i] = (uint32_t)l | VALUE_FOLLOWS | (uint32_t)sym << 8;
  }
  return 0;
}

struct rc_dtables {
  struct {
    int valid;
    uint8_t bits[17], huffval[256]; /* the DHT it was built from */
    dtable d;
  } slot[8]; /* DC 0..3, AC 0..3 */
};

/* The decoding table of t (DC: slot 0..3, AC: 4..7), rebuilt only when t is not the last
 * one built in that slot; NULL when t is missing or not a table. */
static const dtable *table_for(rc_recoder *r, const JHUFF_TBL *t, int slot) {
  if (!t || (!r->tables && !(r->tables = calloc(1, sizeof *r->tables)))) return NULL;
  __typeof__(r->tables->slot[0]) *c = &r->tables->slot[slot];
  if (c->valid && !memcmp(c->bits, t->bits, 17) && !memcmp(c->huffval, t->huffval, 256))
    return &c->d;
  c->valid = 0;
  if (make_dtable(t, slot < 4, &c->d)) return NULL;
  memcpy(c->bits, t->bits, 17);
  memcpy(c->huffval, t->huffval, 256);
  c->valid = 1;
  return &c->d;
}

/* The codes of an optimal table (Annex C.2, C.3). */
static void make_etable(const uint8_t bits[17], const uint8_t *huffval, int dc, etable *e) {
  memset(e->size, 0, sizeof e->size);
  uint32_t code = 0;
  int p = 0;
  for (int l = 1; l <= 16; l++, code <<= 1)
    for (int i = 0; i < bits[l]; i++, p++, code++) {
      const int sym = huffval[p], s = dc ? sym : sym & 15;
      e->code[sym] = code << s;
      e->size[sym] = (uint8_t)(l + s);
    }
}

/* ---- reading the entropy-coded data ---- */

/* The scan's data is read from a copy without its 0xFF00 stuffing (rc_unstuff_scan), one
 * segment (the data between two restart markers) at a time: p moves through it, `end` is
 * where the segment ends. Past `end` the copy goes on (the next segment, then zeros), so a
 * refill never tests how much is left; a decode that read past the end is refused after
 * the block (read_past). */
typedef struct {
  const uint8_t *p, *start, *end; /* start: the copy's first byte */
  uint64_t buf;                   /* the next bits, from the top */
  int bits;                       /* bits in buf */
} reader;

/* 56 to 63 bits in buf: the next eight bytes ORed in where its bits end (the bits a refill
 * repeats are the same ones). */
static inline void fill(reader *b) {
  uint64_t w;
  memcpy(&w, b->p, 8);
  b->buf |= __builtin_bswap64(w) >> b->bits;
  b->p += (63 - b->bits) >> 3;
  b->bits |= 56;
}

/* Bits read up to now, counted from the copy's start. */
static inline size_t bit_pos(const reader *b) {
  return (size_t)(b->p - b->start) * 8 - (size_t)b->bits;
}

static inline int read_past(const reader *b) {
  return bit_pos(b) > (size_t)(b->end - b->start) * 8;
}

/* One Huffman symbol, or -1 for a code the table does not have. */
static inline int symbol(reader *b, const dtable *t) {
  if (b->bits < 32) fill(b);
  const unsigned e = t->look[b->buf >> (64 - LOOK)];
  int l;
  int sym;
  if (e) {
    l = e >> 8;
    sym = e & 0xFF;
  } else {
    l = LOOK + 1;
    while ((int32_t)(b->buf >> (64 - l)) > t->maxcode[l]) l++;
    if (l > 16) return -1;
    sym = t->huffval[t->valoff[l] + (int32_t)(b->buf >> (64 - l))];
  }
  b->buf <<= l;
  b->bits -= l;
  return sym;
}

/* s (1..16) raw bits: there are at least 16 after symbol(). */
static inline unsigned raw(reader *b, int s) {
  const unsigned v = (unsigned)(b->buf >> (64 - s));
  b->buf <<= s;
  b->bits -= s;
  return v;
}

static inline int extend(unsigned v, int s) { /* (no branch: the sign is a coin toss) */
  return (int)v + (((int)v - (1 << (s - 1))) >> 31 & ((int)(~0u << s) + 1));
}

static inline int nbits(int v) {
  const unsigned a = (unsigned)(v < 0 ? -v : v);
  return a ? 32 - __builtin_clz(a) : 0;
}

/* Past the current segment's last bits, with no whole byte of its data left over: the
 * reader moves to the segment starting at `next` (NULL: the scan is over). */
static int next_segment(reader *b, const uint8_t *next, const uint8_t *next_end) {
  const size_t left = (size_t)(b->end - b->start) * 8 - bit_pos(b);
  if (read_past(b) || left >= 8) return -1;
  if (next) b->p = next, b->end = next_end, b->buf = 0, b->bits = 0;
  return 0;
}

/* ---- writing ---- */

typedef struct {
  uint8_t *o;
  uint64_t acc; /* the last n bits written, in the low end (above them: older bits) */
  int n;        /* < 32 between calls */
} writer;

static inline void put_byte(writer *w, uint8_t c) {
  *w->o++ = c;
  if (c == 0xFF) *w->o++ = 0; /* stuffed */
}

/* len <= 27 bits. Bits go out 32 at a time in one 4-byte store, made on every call and kept
 * (the pointer moves on) only once 32 bits are there, so that no branch goes either way;
 * only 32 bits with a 0xFF byte among them, which needs a stuffed zero, go byte by byte. */
static inline void put(writer *w, uint32_t v, int len) {
  w->acc = w->acc << len | v;
  w->n += len;
  const int full = w->n >> 5; /* (n < 59) */
  const uint32_t x = (uint32_t)(w->acc >> (w->n & 31));
  if (__builtin_expect(full && ((~x - 0x01010101u) & x & 0x80808080u), 0)) {
    for (int i = 24; i >= 0; i -= 8) put_byte(w, (uint8_t)(x >> i));
  } else {
    const uint32_t be = __builtin_bswap32(x);
    memcpy(w->o, &be, 4);
    w->o += 4 * full;
  }
  w->n &= 31;
}

static void flush(writer *w) {
  for (; w->n >= 8; w->n -= 8) put_byte(w, (uint8_t)(w->acc >> (w->n - 8)));
  if (w->n) put_byte(w, (uint8_t)(w->acc << (8 - w->n) | (0xFFu >> w->n))); /* ones */
  w->n = 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : 1024;
  while (n < need) n *= 2;
  void *q = realloc(*p, n * size);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

void rc_recoder_free(rc_recoder *r) {
  free(r->data);
  free(r->seg);
  free(r->tables);
  free(r->blocks);
  free(r->tokens);
  memset(r, 0, sizeof *r);
}

/* The scan's layout: per block of an MCU, its component (scan order) and place in the MCU. */
typedef struct {
  int nc, cols, rows, nblk;
  int comp[10], dx[10], dy[10];
  int wb[4], hb[4], h[4], v[4];
  int dc[4], ac[4]; /* table numbers */
} layout;

static int get_layout(const struct jpeg_decompress_struct *s, layout *L) {
  if (s->progressive_mode || s->arith_code || s->data_precision != 8 ||
      s->comps_in_scan != s->num_components || s->num_components < 1 || s->num_components > 4)
    return -1;
  const int nc = L->nc = s->comps_in_scan;
  int max_h = 1, max_v = 1;
  for (int c = 0; c < nc; c++) {
    const jpeg_component_info *p = s->cur_comp_info[c];
    if (p->h_samp_factor < 1 || p->h_samp_factor > 4 || p->v_samp_factor < 1 ||
        p->v_samp_factor > 4 || p->dc_tbl_no < 0 || p->dc_tbl_no > 3 || p->ac_tbl_no < 0 ||
        p->ac_tbl_no > 3)
      return -1;
    if (p->h_samp_factor > max_h) max_h = p->h_samp_factor;
    if (p->v_samp_factor > max_v) max_v = p->v_samp_factor;
  }
  const long W = (long)s->image_width, H = (long)s->image_height;
  L->nblk = 0;
  for (int c = 0; c < nc; c++) {
    const jpeg_component_info *p = s->cur_comp_info[c];
    L->h[c] = nc == 1 ? 1 : p->h_samp_factor; /* a lone component's MCU is one block */
    L->v[c] = nc == 1 ? 1 : p->v_samp_factor;
    L->wb[c] = (int)((W * p->h_samp_factor + 8L * max_h - 1) / (8L * max_h));
    L->hb[c] = (int)((H * p->v_samp_factor + 8L * max_v - 1) / (8L * max_v));
    L->dc[c] = p->dc_tbl_no;
    L->ac[c] = p->ac_tbl_no;
    for (int y = 0; y < L->v[c]; y++)
      for (int x = 0; x < L->h[c]; x++) {
        if (L->nblk == 10) return -1;
        L->comp[L->nblk] = c, L->dx[L->nblk] = x, L->dy[L->nblk] = y, L->nblk++;
      }
  }
  L->cols = nc == 1 ? L->wb[0] : (int)((W + 8L * max_h - 1) / (8L * max_h));
  L->rows = nc == 1 ? L->hb[0] : (int)((H + 8L * max_v - 1) / (8L * max_v));
  return L->cols > 0 && L->rows > 0 ? 0 : -1;
}

/* The header segments before the scan: *hdr_end is where the entropy-coded data starts;
 * *dqt the quantisation tables and *dht the Huffman tables (AC: << 4) they define. */
static int scan_start(const uint8_t *data, size_t len, size_t *hdr_end, int *dqt, int *dht) {
  size_t pos = 2;
  *dqt = *dht = 0;
  for (;;) {
    while (pos + 1 < len && data[pos] == 0xFF && data[pos + 1] == 0xFF) pos++;
    if (pos + 4 > len || data[pos] != 0xFF) return -1;
    const int m = data[pos + 1];
    const size_t seg = 2 + ((size_t)data[pos + 2] << 8 | data[pos + 3]);
    if (seg < 4 || pos + seg > len) return -1;
    if (m >= 0xC0 && m <= 0xCF && m != 0xC0 && m != 0xC1 && m != 0xC4 && m != 0xC8 && m != 0xCC)
      return -1; /* another kind of frame */
    if (m == 0xDC || m == 0xD8 || (m >= 0xD0 && m <= 0xD9)) return -1;
    for (size_t q = pos + 4; m == 0xDB && q < pos + seg;) { /* precision, number, values */
      *dqt |= 1 << (data[q] & 3);
      q += 1 + (data[q] >> 4 ? 128 : 64);
    }
    for (size_t q = pos + 4; m == 0xC4 && q + 17 <= pos + seg;) { /* class, number, counts */
      *dht |= 1 << ((data[q] >> 4 & 1) * 4 + (data[q] & 3));
      size_t n = 0;
      for (int i = 1; i <= 16; i++) n += data[q + i];
      q += 17 + n;
    }
    pos += seg;
    if (m == 0xDA) return *hdr_end = pos, 0;
  }
}

/* One block's AC coefficients: its tokens and their symbols counted; the number of tokens
 * and *last the last one's position, or -1. The output's symbol of a token is the source's
 * (its run is the gap less 16 a ZRL), so it is counted as read; ZRLs count when a
 * coefficient follows them (the output has none before an EOB). (restrict: the stores to the
 * tokens and counts must not make the compiler reload the bit buffer.) */
/* One symbol with its value bits: the fast table's entry, or the search's, packed alike
 * (bits << 0 | symbol << 8 | value << 16); 0 for a bad code. */
static inline uint32_t step(reader *restrict b, const dtable *restrict ac, uint64_t *buf,
                            int *bits) {
  uint32_t f = ac->fast[*buf >> (64 - LOOK)];
  if (f & VALUE_FOLLOWS) { /* a code of up to LOOK bits, a value past them */
    const int l = (int)(f & 63), s = (int)(f >> 8 & 15);
    const uint32_t v = (uint32_t)((*buf << l) >> (64 - s));
    *buf <<= l + s;
    *bits -= l + s;
    return (uint32_t)(l + s) | (f & 0xFF00) | v << 16;
  }
  if (f) {
    *buf <<= f & 63; /* (the length in the low bits: no shift to get it) */
    *bits -= (int)(f & 63);
    return f;
  }
  b->buf = *buf, b->bits = *bits;
  const int rs = symbol(b, ac);
  if (rs < 0 || (rs & 15) > 10) return 0;
  const unsigned v = rs & 15 ? raw(b, rs & 15) : 0;
  *buf = b->buf, *bits = b->bits;
  return 1 | (uint32_t)rs << 8 | v << 16;
}

__attribute__((noinline)) static int decode_ac(reader *restrict b, const dtable *restrict ac,
                                               uint32_t *restrict tok, long *restrict acn,
                                               int *restrict last) {
  uint64_t buf = b->buf; /* (in registers: the loop's few values all are) */
  int bits = b->bits, n = 0, at = 0, k = 1;
  uint32_t zrls = 0, pending = 0; /* (added up here: a count stored per ZRL would chain) */
  /* Two symbols per refill (at most 26 bits each; a refill leaves 57 but near a 0xFF): the
   * refill runs at a steady pace, not on a test of the bits left that goes either way. */
#define ONE()                                                  \
  do {                                                         \
    const uint32_t f = step(b, ac, &buf, &bits);               \
    if (!f) return -1;                                         \
    const int rs = f >> 8 & 0xFF;                              \
    if (!(rs & 15)) {                                          \
      if (rs != 0xF0) goto done; /* EOB */                     \
      k += 16, pending++;        /* ZRL */                     \
    } else {                                                   \
      at = k += rs >> 4;                                       \
      acn[rs]++;                                               \
      tok[n++] = pending << 24 | (uint32_t)rs << 16 | f >> 16; \
      zrls += pending, pending = 0;                            \
      k++;                                                     \
    }                                                          \
    if (k >= 64) goto done;                                    \
  } while (0)
  for (;;) {
    b->buf = buf, b->bits = bits, fill(b), buf = b->buf, bits = b->bits;
    ONE();
    if (bits < 26) b->buf = buf, b->bits = bits, fill(b), buf = b->buf, bits = b->bits;
    ONE();
  }
#undef ONE
done:
  b->buf = buf, b->bits = bits;
  acn[0xF0] += zrls;
  *last = at;
  return at > 63 ? -1 : n; /* (a coefficient past 63: libjpeg would keep it silently) */
}

/* Decodes the scan into r's lists, counting the output's symbols. */
static int decode_scan(rc_recoder *r, const struct jpeg_decompress_struct *s, const layout *L,
                       const uint8_t *data, size_t start, size_t len, long interval,
                       long dcount[4][256], long acount[4][256], size_t *nblocks, size_t *ntokens) {
  const dtable *dt[4] = {0}, *at[4] = {0};
  for (int c = 0; c < L->nc; c++)
    if (!(dt[L->dc[c]] = table_for(r, s->dc_huff_tbl_ptrs[L->dc[c]], L->dc[c])) ||
        !(at[L->ac[c]] = table_for(r, s->ac_huff_tbl_ptrs[L->ac[c]], 4 + L->ac[c])))
      return -1;
  const long src_interval = (long)s->restart_interval;
  uint32_t junk[64]; /* a dummy block's tokens and counts: not the output's */
  long junk_counts[256] = {0};
  const size_t mcus = (size_t)L->rows * L->cols;
  const size_t nseg = src_interval ? (mcus + (size_t)src_interval - 1) / (size_t)src_interval : 1;
  if (rc_unstuff_scan(data + start, len - start, nseg, &r->data, &r->data_cap, &r->seg,
                      &r->seg_cap) == (size_t)-1)
    return -1; /* cut short, a marker out of place: libjpeg's path says what */
  reader b = {r->data, r->data, r->data + r->seg[1], 0, 0};
  size_t segment = 0;
  int src_pred[4] = {0}, out_pred[4] = {0};
  size_t nb = 0, nt = 0;
  long mcu = 0;
  for (int mr = 0; mr < L->rows; mr++)
    for (int mc = 0; mc < L->cols; mc++, mcu++) {
      if (src_interval && mcu && mcu % src_interval == 0) {
        segment++;
        if (next_segment(&b, r->data + r->seg[segment], r->data + r->seg[segment + 1])) return -1;
        memset(src_pred, 0, sizeof src_pred);
      }
      if (interval && mcu % interval == 0) memset(out_pred, 0, sizeof out_pred);
      if (grow((void **)&r->blocks, &r->blocks_cap, nb + L->nblk, sizeof *r->blocks) ||
          grow((void **)&r->tokens, &r->tokens_cap, nt + 63 * (size_t)L->nblk, sizeof *r->tokens))
        return -1;
      for (int k = 0; k < L->nblk; k++) {
        const int c = L->comp[k];
        const int real = mr * L->v[c] + L->dy[k] < L->hb[c] && mc * L->h[c] + L->dx[k] < L->wb[c];
        const dtable *ac = at[L->ac[c]];
        long *dcn = dcount[L->dc[c]], *acn = acount[L->ac[c]];
        const dtable *dct = dt[L->dc[c]];
        if (b.bits < 32) fill(&b);
        int diff;
        const uint32_t f = dct->fast[b.buf >> (64 - LOOK)];
        if (f) {
          const int sz = f >> 8 & 0xFF;
          if (sz > 11) return -1;
          diff = sz ? extend(f >> 16, sz) : 0;
          b.buf <<= f & 63, b.bits -= (int)(f & 63);
        } else {
          const int sz = symbol(&b, dct);
          if (sz < 0 || sz > 11) return -1;
          diff = sz ? extend(raw(&b, sz), sz) : 0;
        }
        const int dc = src_pred[c] += diff;
        if (dc < -32768 || dc > 32767) return -1;
        int prev;
        const int n = real ? decode_ac(&b, ac, r->tokens + nt, acn, &prev)
                           : decode_ac(&b, ac, junk, junk_counts, &prev);
        if (n < 0) return -1;
        if (read_past(&b)) return -1;
        if (!real) { /* libjpeg's dummy block: DC difference 0, EOB */
          dcn[0]++, acn[0x00]++;
          continue;
        }
        if (prev < 63) acn[0x00]++;
        const int cat = nbits(dc - out_pred[c]);
        if (cat > 11) return -1;
        dcn[cat]++;
        out_pred[c] = dc;
        r->blocks[nb++] = (uint16_t)(int16_t)dc | (uint32_t)n << 16 | (uint32_t)(prev < 63) << 22;
        nt += (size_t)n;
      }
    }
  if (next_segment(&b, NULL, NULL)) return -1; /* (rc_unstuff_scan saw the EOI after it) */
  *nblocks = nb, *ntokens = nt;
  return 0;
}

static uint8_t *put16(uint8_t *o, unsigned v) {
  *o++ = (uint8_t)(v >> 8);
  *o++ = (uint8_t)v;
  return o;
}

int rc_recode(rc_recoder *r, const struct jpeg_decompress_struct *s, const uint8_t *data,
              size_t len, int restart, uint8_t **out, size_t *outlen) {
  layout L;
  size_t hdr_end;
  int dqt, dht;
  if (get_layout(s, &L) || len < 4 || scan_start(data, len, &hdr_end, &dqt, &dht)) return -1;
  /* every table from this file (libjpeg would reuse a table an earlier image defined) */
  for (int c = 0; c < L.nc; c++)
    if (!(dqt >> s->cur_comp_info[c]->quant_tbl_no & 1) || !(dht >> L.dc[c] & 1) ||
        !(dht >> (4 + L.ac[c]) & 1))
      return -1;
  long interval = restart < 0 ? (long)-restart * L.cols : restart;
  if (interval > 65535) interval = 65535; /* as libjpeg caps it */
  long dcount[4][256], acount[4][256];
  memset(dcount, 0, sizeof dcount);
  memset(acount, 0, sizeof acount);
  size_t nb, nt;
  if (decode_scan(r, s, &L, data, hdr_end, len, interval, dcount, acount, &nb, &nt)) return -1;

  /* the tables, and what the output may need at most */
  etable de[4], ae[4];
  uint8_t dbits[4][17], abits[4][17], dval[4][256], aval[4][256];
  int used_dc = 0, used_ac = 0;
  for (int c = 0; c < L.nc; c++) used_dc |= 1 << L.dc[c], used_ac |= 1 << L.ac[c];
  for (int t = 0; t < 4; t++) {
    if (used_dc >> t & 1)
      rc_huff_table(dcount[t], dbits[t], dval[t]), make_etable(dbits[t], dval[t], 1, &de[t]);
    if (used_ac >> t & 1)
      rc_huff_table(acount[t], abits[t], aval[t]), make_etable(abits[t], aval[t], 0, &ae[t]);
  }
  const size_t per_mcu = (size_t)L.nblk * 440 + 16; /* 16 + 11 bits, 63 x 26, stuffed */
  size_t cap = hdr_end + 8 * 280 + 64 + (len - hdr_end) + (len - hdr_end) / 8 + per_mcu;
  uint8_t *buf = malloc(cap);
  if (!buf) return -1;
  /* the header: the source's, less its DHT, DRI and SOS; then new ones */
  uint8_t *o = buf;
  *o++ = 0xFF, *o++ = 0xD8;
  for (size_t pos = 2; pos < hdr_end;) {
    while (data[pos] == 0xFF && data[pos + 1] == 0xFF) pos++;
    const int m = data[pos + 1];
    const size_t seg = 2 + ((size_t)data[pos + 2] << 8 | data[pos + 3]);
    if (m != 0xC4 && m != 0xDD && m != 0xDA) memcpy(o, data + pos, seg), o += seg;
    pos += seg;
  }
  for (int t = 0; t < 8; t++) {
    const int ac = t >= 4, n = t & 3;
    if (!((ac ? used_ac : used_dc) >> n & 1)) continue;
    const uint8_t *bits = ac ? abits[n] : dbits[n], *val = ac ? aval[n] : dval[n];
    int count = 0;
    for (int l = 1; l <= 16; l++) count += bits[l];
    *o++ = 0xFF, *o++ = 0xC4;
    o = put16(o, (unsigned)(3 + 16 + count));
    *o++ = (uint8_t)(ac << 4 | n);
    memcpy(o, bits + 1, 16), o += 16;
    memcpy(o, val, (size_t)count), o += count;
  }
  if (interval) *o++ = 0xFF, *o++ = 0xDD, o = put16(o, 4), o = put16(o, (unsigned)interval);
  *o++ = 0xFF, *o++ = 0xDA;
  o = put16(o, (unsigned)(6 + 2 * L.nc));
  *o++ = (uint8_t)L.nc;
  for (int c = 0; c < L.nc; c++)
    *o++ = (uint8_t)s->cur_comp_info[c]->component_id, *o++ = (uint8_t)(L.dc[c] << 4 | L.ac[c]);
  *o++ = 0, *o++ = 63, *o++ = 0;

  /* the entropy-coded data */
  writer w = {o, 0, 0};
  int out_pred[4] = {0};
  const uint32_t *blk = r->blocks, *tok = r->tokens;
  long mcu = 0;
  int rst = 0;
  for (int mr = 0; mr < L.rows; mr++)
    for (int mc = 0; mc < L.cols; mc++, mcu++) {
      if (interval && mcu && mcu % interval == 0) {
        flush(&w);
        *w.o++ = 0xFF, *w.o++ = (uint8_t)(0xD0 + rst);
        rst = (rst + 1) & 7;
      }
      if (interval && mcu % interval == 0) memset(out_pred, 0, sizeof out_pred);
      const size_t at = (size_t)(w.o - buf);
      if (at + per_mcu > cap) {
        size_t ncap = cap * 2;
        uint8_t *nbuf = realloc(buf, ncap);
        if (!nbuf) return free(buf), -1;
        buf = nbuf, cap = ncap, w.o = buf + at;
      }
      for (int k = 0; k < L.nblk; k++) {
        const int c = L.comp[k];
        const etable *dce = &de[L.dc[c]], *ace = &ae[L.ac[c]];
        if (!(mr * L.v[c] + L.dy[k] < L.hb[c] && mc * L.h[c] + L.dx[k] < L.wb[c])) {
          put(&w, dce->code[0], dce->size[0]);
          put(&w, ace->code[0], ace->size[0]);
          continue;
        }
        const uint32_t e = *blk++;
        const int dc = (int16_t)(e & 0xFFFF), n = (int)(e >> 16 & 63);
        const int diff = dc - out_pred[c], sz = nbits(diff);
        out_pred[c] = dc;
        const uint32_t bits = (uint32_t)(diff < 0 ? diff - 1 : diff) & ((1u << sz) - 1);
        put(&w, dce->code[sz] | bits, dce->size[sz]);
        for (int i = 0; i < n; i++) {
          const uint32_t t = *tok++;
          for (uint32_t z = t >> 24; z; z--) put(&w, ace->code[0xF0], ace->size[0xF0]);
          const int sym = (int)(t >> 16 & 0xFF);
          put(&w, ace->code[sym] | (t & 0xFFFF), ace->size[sym]);
        }
        if (e >> 22 & 1) put(&w, ace->code[0], ace->size[0]); /* EOB */
      }
    }
  flush(&w);
  *w.o++ = 0xFF, *w.o++ = 0xD9;
  (void)nb, (void)nt;
  *out = buf;
  *outlen = (size_t)(w.o - buf);
  return 0;
}
