/* recio unstuff (unstuff.h). */
#include "unstuff.h"

#include <stdlib.h>
#include <string.h>

static int grow(void **p, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  void *q = realloc(*p, need);
  if (!q) return -1;
  *p = q;
  *cap = need;
  return 0;
}

int rc_unstuff_begin(rc_unstuff *u, const uint8_t *src, size_t n, size_t nseg) {
  /* (all the room at once: the reader's pointers into the copy stay valid as it grows) */
  if (grow((void **)&u->data, &u->cap, n + RC_UNSTUFF_PAD) ||
      grow((void **)&u->seg, &u->seg_cap, (nseg + 1) * sizeof *u->seg))
    return -1;
  u->src = src;
  u->n = n;
  u->next = 0;
  u->len = 0;
  u->nseg = nseg;
  u->found = 0;
  u->seg[0] = 0;
  u->eoi = 0;
  u->state = RC_UNSTUFF_MORE;
  u->windowed = 0;
  return 0;
}

/* The source segments of run r of a window: first..last. */
static void window_run(const rc_unstuff_window *w, size_t r, size_t *first, size_t *last) {
  if (w->c0 == 0 && w->c1 == w->cols) { /* whole rows: one run */
    *first = w->r0 * w->cols / w->interval;
    *last = (w->r1 * w->cols - 1) / w->interval;
  } else {
    const size_t row = w->r0 + r;
    *first = (row * w->cols + w->c0) / w->interval;
    *last = (row * w->cols + w->c1 - 1) / w->interval;
  }
}

/* Passes over the source's segments from u->src_seg (starting at src[*at]) to `first`, each
 * one's marker checked: 0, or -1 where the framing is not as expected. */
static int pass_over(rc_unstuff *u, size_t *at, size_t first) {
  const uint8_t *p = u->src;
  const size_t n = u->n;
  size_t i = *at;
  while (u->src_seg < first) {
    const uint8_t *ff = memchr(p + i, 0xFF, n - i);
    if (!ff) return -1;
    size_t k = (size_t)(ff - p) + 1;
    while (k < n && p[k] == 0xFF) k++; /* fill bytes */
    if (k >= n) return -1;
    i = k + 1;
    if (p[k] == 0) continue; /* a stuffed 0xFF */
    if (p[k] != 0xD0 + (u->src_seg & 7)) return -1;
    u->src_seg++;
  }
  *at = i;
  return 0;
}

int rc_unstuff_begin_window(rc_unstuff *u, const uint8_t *src, size_t n, const rc_unstuff_window *w,
                            size_t *nseg) {
  if (!w->interval || w->c1 <= w->c0 || w->r1 <= w->r0 || w->c1 > w->cols || w->r1 > w->rows)
    return -1;
  const size_t runs = w->c0 == 0 && w->c1 == w->cols ? 1 : w->r1 - w->r0;
  size_t count = 0, first, last;
  for (size_t r = 0; r < runs; r++) {
    window_run(w, r, &first, &last);
    count += last - first + 1;
  }
  if (rc_unstuff_begin(u, src, n, count)) return -1;
  *nseg = count;
  u->windowed = 1;
  u->win = *w;
  u->src_segs = (w->cols * w->rows + w->interval - 1) / w->interval;
  u->run = 0;
  u->runs = runs;
  u->src_seg = 0;
  window_run(w, 0, &first, &u->run_last);
  if (pass_over(u, &u->next, first)) u->state = RC_UNSTUFF_BAD;
  return 0;
}

/* A window's copy at the marker p[k] after its source segment: checked, then the next
 * segment of the window found (those between passed over). The state. */
static int window_marker(rc_unstuff *u, const uint8_t *p, size_t k, size_t *i) {
  const size_t s = u->src_seg;
  /* (the last source segment may end at any marker, as the restart cut takes it) */
  if (p[k] == 0xFF || (s + 1 < u->src_segs && p[k] != 0xD0 + (s & 7))) return RC_UNSTUFF_BAD;
  u->src_seg = s + 1;
  if (s < u->run_last) return RC_UNSTUFF_MORE;
  if (++u->run == u->runs) return RC_UNSTUFF_DONE;
  size_t first;
  window_run(&u->win, u->run, &first, &u->run_last);
  return pass_over(u, i, first) ? RC_UNSTUFF_BAD : RC_UNSTUFF_MORE;
}

int rc_unstuff_to(rc_unstuff *u, size_t want) {
  if (u->state != RC_UNSTUFF_MORE) return u->state;
  const uint8_t *p = u->src;
  const size_t n = u->n;
  uint8_t *out = u->data;
  size_t i = u->next, o = u->len, found = u->found;
  int state = RC_UNSTUFF_MORE;
  while (o < want) {
    /* the bytes before the next 0xFF are the data's as they are: copied to it, however far
     * past the want (a 0xFF comes every few hundred bytes of a photo's data); the 0xFF is
     * read only while the copy is short of the want */
    const uint8_t *ff = memchr(p + i, 0xFF, n - i);
    if (!ff) {
      state = RC_UNSTUFF_BAD; /* cut short: libjpeg reports it */
      break;
    }
    const size_t j = (size_t)(ff - p);
    memcpy(out + o, p + i, j - i);
    o += j - i;
    i = j;
    if (o >= want) break;
    /* (0xFF 0xFF is refused, not read as fill bytes: libjpeg's two Huffman paths do not
     * read "FF FF 00" alike, so where it appears only libjpeg decodes as libjpeg does) */
    const size_t k = j + 1;
    if (k >= n) {
      state = RC_UNSTUFF_BAD;
      break;
    }
    i = k + 1;
    if (p[k] == 0) { /* a stuffed 0xFF */
      out[o++] = 0xFF;
      continue;
    }
    u->seg[++found] = o;
    if (u->windowed) {
      if ((state = window_marker(u, p, k, &i)) == RC_UNSTUFF_MORE) continue;
      if (state == RC_UNSTUFF_DONE) memset(out + o, 0, RC_UNSTUFF_PAD);
      break;
    }
    if (found < u->nseg) {
      if (p[k] == 0xD0 + ((found - 1) & 7)) continue;
      state = RC_UNSTUFF_BAD;
      break;
    }
    if (p[k] != 0xD9) {
      state = RC_UNSTUFF_BAD;
      break;
    }
    memset(out + o, 0, RC_UNSTUFF_PAD);
    u->eoi = j;
    state = RC_UNSTUFF_DONE;
    break;
  }
  u->next = i;
  u->len = o;
  u->found = found;
  return u->state = state;
}

void rc_unstuff_free(rc_unstuff *u) {
  free(u->data);
  free(u->seg);
  u->data = NULL;
  u->seg = NULL;
  u->cap = u->seg_cap = 0;
}

size_t rc_unstuff_scan(const uint8_t *p, size_t n, size_t nseg, uint8_t **buf, size_t *cap,
                       size_t **seg, size_t *seg_cap) {
  rc_unstuff u = {.data = *buf, .cap = *cap, .seg = *seg, .seg_cap = *seg_cap};
  const int begun = rc_unstuff_begin(&u, p, n, nseg);
  *buf = u.data, *cap = u.cap, *seg = u.seg, *seg_cap = u.seg_cap;
  if (begun || rc_unstuff_to(&u, SIZE_MAX) != RC_UNSTUFF_DONE) return (size_t)-1;
  return u.eoi;
}
