/* recio restart cut (restart.h, NOTE [restart cut]). */
#include "restart.h"

#include <stdlib.h>
#include <string.h>

static size_t be16(const uint8_t *p) {
  return (size_t)p[0] << 8 | p[1];
}

/* MCUs per row and MCU rows; 0 when the stream is not one interleaved Huffman scan whose
 * MCUs are the iMCUs (the only layout whose segments tile the image as the plan assumes). */
static int mcu_grid(const struct jpeg_decompress_struct *ci, int *cols, int *rows, int *mw,
                    int *mh) {
  if (ci->progressive_mode || ci->arith_code || ci->comps_in_scan != ci->num_components ||
      ci->restart_interval == 0)
    return 0;
  if (ci->num_components == 1 &&
      (ci->comp_info[0].h_samp_factor != 1 || ci->comp_info[0].v_samp_factor != 1))
    return 0; /* a lone component's MCU is one block, whatever its factors say */
  const int pw = ci->max_h_samp_factor * DCTSIZE, ph = ci->max_v_samp_factor * DCTSIZE;
  *cols = (int)((ci->image_width + pw - 1) / pw);
  *rows = (int)((ci->image_height + ph - 1) / ph);
  *mw = ci->max_h_samp_factor * ci->min_DCT_scaled_size; /* an MCU in scaled pixels */
  *mh = ci->max_v_samp_factor * ci->min_DCT_scaled_size;
  return 1;
}

void rc_upsampling(const struct jpeg_decompress_struct *ci, int *fh, int *fv) {
  *fh = *fv = 1;
  const int num_h = ci->max_h_samp_factor * ci->min_DCT_scaled_size;
  const int num_v = ci->max_v_samp_factor * ci->min_DCT_scaled_size;
  for (int c = 0; c < ci->num_components; c++) {
    const jpeg_component_info *p = &ci->comp_info[c];
    const int den_h = p->h_samp_factor * p->DCT_scaled_size;
    const int den_v = p->v_samp_factor * p->DCT_scaled_size;
    const int h = den_h && num_h % den_h == 0 ? num_h / den_h : 0;
    const int v = den_v && num_v % den_v == 0 ? num_v / den_v : 0;
    if (h != 1 && h != 2)
      *fh = 0;
    else if (*fh && h > *fh)
      *fh = h;
    if (v != 1 && v != 2)
      *fv = 0;
    else if (*fv && v > *fv)
      *fv = v;
  }
}

static int floor_to(int v, int step) {
  return v / step * step;
}

static int ceil_to(int v, int step, int limit) {
  const int r = (v + step - 1) / step * step;
  return r < limit ? r : limit;
}

int rc_restart_plan(const struct jpeg_decompress_struct *ci, int x0, int x1, int y0, int y1,
                    rc_cut *cut) {
  int cols, rows, mw, mh;
  if (!mcu_grid(ci, &cols, &rows, &mw, &mh)) return 0;
  const int k = (int)ci->restart_interval;
  /* the crop and the margin its upsampling reads on each side (NOTE [restart cut]) */
  int fh, fv;
  rc_upsampling(ci, &fh, &fv);
  const int mx = fh ? 2 * fh : mw, my = fv ? 2 * fv : mh;
  int c0 = x0 - mx < 0 ? -1 : (x0 - mx) / mw, r0 = y0 - my < 0 ? -1 : (y0 - my) / mh;
  int c1 = (x1 + mx + mw - 1) / mw, r1 = (y1 + my + mh - 1) / mh;
  if (c0 < 0) c0 = 0;
  if (r0 < 0) r0 = 0;
  if (c1 > cols) c1 = cols;
  if (r1 > rows) r1 = rows;
  if (cols % k == 0) { /* segments within rows: columns k MCUs at a time */
    c0 = floor_to(c0, k);
    c1 = ceil_to(c1, k, cols);
    /* libjpeg-turbo upsamples a component at most 2 samples wide without its fancy filter:
     * a window that narrow would not upsample as the whole image does */
    while (c1 - c0 < 3 && (c0 > 0 || c1 < cols)) {
      if (c1 < cols)
        c1 = ceil_to(c1 + 1, k, cols);
      else
        c0 = floor_to(c0 - 1, k);
    }
  } else { /* segments across rows: whole rows, from and to rows where a segment starts */
    int a = k, b = cols;
    while (b) {
      const int t = a % b;
      a = b, b = t;
    }
    const int n = k / a; /* row r starts a segment when r * cols % k == 0 */
    c0 = 0, c1 = cols;
    r0 = floor_to(r0, n);
    r1 = ceil_to(r1, n, rows);
  }
  if (c0 == 0 && c1 == cols && r0 == 0) return 0; /* the decode stops after r1 anyway */
  *cut = (rc_cut){c0, c1, r0, r1};
  return 1;
}

static int grow(uint8_t **buf, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  uint8_t *p = realloc(*buf, need);
  if (!p) return -1;
  *buf = p;
  *cap = need;
  return 0;
}

/* The end of the entropy-coded segment starting at pos: the offset of the marker after it
 * (an RSTn, EOI or any other), with *rst its number (0..7) or -1; len when none follows. */
static size_t segment_end(const uint8_t *data, size_t len, size_t pos, int *rst) {
  for (;;) {
    const uint8_t *p = memchr(data + pos, 0xFF, len - pos);
    if (!p) return *rst = -1, len;
    size_t at = (size_t)(p - data), next = at + 1;
    while (next < len && data[next] == 0xFF) next++; /* fill bytes */
    if (next >= len) return *rst = -1, len;
    if (data[next] == 0x00) { /* a stuffed 0xFF in the data */
      pos = next + 1;
      continue;
    }
    *rst = data[next] >= 0xD0 && data[next] <= 0xD7 ? data[next] - 0xD0 : -1;
    return next - 1; /* the marker's own 0xFF (fill bytes stay with the segment) */
  }
}

/* The cut's header into *buf (room for len + 16 bytes): its length, 0 where the stream is not
 * as the plan expects; *scan: where the source's entropy-coded data starts. */
static size_t cut_header(const struct jpeg_decompress_struct *ci, const uint8_t *data, size_t len,
                         const rc_cut *cut, uint8_t **buf, size_t *cap, size_t *scan) {
  int cols, rows, mw, mh;
  if (!mcu_grid(ci, &cols, &rows, &mw, &mh) || grow(buf, cap, len + 16)) return 0;
  uint8_t *out = *buf;
  size_t o = 0, pos = 2;
  out[o++] = 0xFF, out[o++] = 0xD8;
  /* The header: the tables, frame, restart interval and scan, and the JFIF and Adobe
   * segments (they decide the colour transform); not EXIF, ICC or comments. */
  const int pw = ci->max_h_samp_factor * DCTSIZE, ph = ci->max_v_samp_factor * DCTSIZE;
  const int width =
      cut->c1 == cols ? (int)ci->image_width - cut->c0 * pw : (cut->c1 - cut->c0) * pw;
  const int height =
      cut->r1 == rows ? (int)ci->image_height - cut->r0 * ph : (cut->r1 - cut->r0) * ph;
  int sof = 0;
  for (;;) {
    while (pos < len && data[pos] == 0xFF && pos + 1 < len && data[pos + 1] == 0xFF) pos++;
    if (pos + 4 > len || data[pos] != 0xFF) return 0;
    const int marker = data[pos + 1];
    const size_t seg = 2 + be16(data + pos + 2);
    if (pos + seg > len) return 0;
    const int keep = marker == 0xDB || marker == 0xC4 || marker == 0xDD || marker == 0xDA ||
                     marker == 0xC0 || marker == 0xC1 || marker == 0xE0 || marker == 0xEE;
    if (keep) {
      memcpy(out + o, data + pos, seg);
      if ((marker == 0xC0 || marker == 0xC1) && seg >= 9) {
        out[o + 5] = (uint8_t)(height >> 8), out[o + 6] = (uint8_t)height;
        out[o + 7] = (uint8_t)(width >> 8), out[o + 8] = (uint8_t)width;
        sof = 1;
      }
      o += seg;
    }
    pos += seg;
    if (marker == 0xDA) break;
  }
  if (!sof) return 0;
  *scan = pos;
  return o;
}

size_t rc_restart_header(const struct jpeg_decompress_struct *ci, const uint8_t *data, size_t len,
                         const rc_cut *cut, uint8_t **buf, size_t *cap, size_t *scan) {
  size_t o = cut_header(ci, data, len, cut, buf, cap, scan);
  if (!o) return 0;
  (*buf)[o++] = 0xFF, (*buf)[o++] = 0xD9;
  return o;
}

int rc_restart_window(const struct jpeg_decompress_struct *ci, const rc_cut *cut,
                      rc_unstuff_window *w) {
  int cols, rows, mw, mh;
  if (!mcu_grid(ci, &cols, &rows, &mw, &mh)) return 0;
  *w = (rc_unstuff_window){(size_t)cols,    (size_t)rows,    ci->restart_interval, (size_t)cut->c0,
                           (size_t)cut->c1, (size_t)cut->r0, (size_t)cut->r1};
  return 1;
}

size_t rc_restart_cut(const struct jpeg_decompress_struct *ci, const uint8_t *data, size_t len,
                      const rc_cut *cut, uint8_t **buf, size_t *cap) {
  int cols, rows, mw, mh;
  size_t pos;
  size_t o = cut_header(ci, data, len, cut, buf, cap, &pos);
  if (!o || !mcu_grid(ci, &cols, &rows, &mw, &mh)) return 0;
  uint8_t *out = *buf;
  /* The segments, in order: find each one's start, copy the window's. */
  const int k = (int)ci->restart_interval;
  const long total = ((long)cols * rows + k - 1) / k;
  int written = 0;
  long s = 0;
  size_t start = pos;
  /* whole rows: one run of segments; else each row's */
  const int whole = cut->c0 == 0 && cut->c1 == cols;
  for (int r = cut->r0; r < (whole ? cut->r0 + 1 : cut->r1); r++) {
    const long first = ((long)r * cols + cut->c0) / k;
    const long last = whole ? ((long)cut->r1 * cols - 1) / k : ((long)r * cols + cut->c1 - 1) / k;
    for (long want = first; want <= last; want++) {
      int rst;
      size_t end = segment_end(data, len, start, &rst);
      while (s < want) { /* skip the segments before it */
        if (rst != (int)(s & 7)) return 0;
        start = end + 2;
        s++;
        end = segment_end(data, len, start, &rst);
      }
      if (s < total - 1 && rst != (int)(s & 7)) return 0; /* a marker missing */
      if (end == len) return 0;                           /* cut short */
      if (written) out[o++] = 0xFF, out[o++] = (uint8_t)(0xD0 + ((written - 1) & 7));
      if (grow(buf, cap, o + (end - start) + 8)) return 0;
      out = *buf;
      memcpy(out + o, data + start, end - start);
      o += end - start;
      written++;
      start = end + 2;
      s++;
    }
  }
  out[o++] = 0xFF, out[o++] = 0xD9;
  return o;
}
