/* recio unstuff: a scan's entropy-coded data copied without its 0xFF00 stuffing, as far as a
 * reader asks for it.
 *
 * The copy is made from just after the SOS, a piece at a time (rc_unstuff_to): each call goes
 * on where the last stopped, so a decode that needs only the scan's first rows copies little
 * more than those (NOTE [entropy decode]). As it goes it checks the framing: the segments are
 * RST markers in sequence apart and an EOI follows the last, each right after the data (no
 * 0xFF fill bytes). Anything else (a marker out of place, data cut short, 0xFF 0xFF) makes the
 * copy bad, wherever in the scan it is met, so that only libjpeg decodes such a scan. A
 * restart cut's window is copied so too, its segments alone (rc_unstuff_begin_window). */
#ifndef RECIO_UNSTUFF_H
#define RECIO_UNSTUFF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

/* Bytes a copy keeps after the data once it is whole: what a reader may load past a
 * segment's end before it sees that it read past it (an MCU's blocks, each 64 codes and
 * values of at most 31 bits, and an 8-byte load). Before the copy is whole, a reader keeps
 * this far from the copy's end (rc_unstuff.len). */
#define RC_UNSTUFF_PAD (D_MAX_BLOCKS_IN_MCU * 64 * 31 / 8 + 8)

enum { RC_UNSTUFF_MORE, RC_UNSTUFF_DONE, RC_UNSTUFF_BAD };

/* A window of a restart-marked scan (NOTE [restart cut]): its MCUs a grid cols x rows, a
 * marker every `interval`; the segments that cover MCU columns c0..c1 of rows r0..r1 (ends
 * excluded), whole rows (c0 0, c1 cols) as one run from a segment's start to one's end. */
typedef struct {
  size_t cols, rows, interval, c0, c1, r0, r1;
} rc_unstuff_window;

typedef struct {
  const uint8_t *src; /* the scan's data, src[0:n] from just after its SOS */
  size_t n, next;     /* the next source byte to copy */
  uint8_t *data;      /* the copy so far, data[0:len]; RC_UNSTUFF_PAD zeros after it once done */
  size_t cap, len;
  size_t *seg;    /* seg[0..found]: where the segments found so far start in the copy; */
  size_t seg_cap; /* seg[nseg], once found, where the data ends */
  size_t nseg, found;
  size_t eoi; /* once done: the EOI's offset in src */
  int state;  /* RC_UNSTUFF_MORE, _DONE or _BAD */
  /* a window's segments alone (rc_unstuff_begin_window): the source's segment being copied,
   * the last of its run, the run and how many, the source's segments */
  int windowed;
  rc_unstuff_window win;
  size_t src_seg, run_last, run, runs, src_segs;
} rc_unstuff;

/* Starts the copy of src[0:n], a scan of nseg segments: room for all of it (grown as needed,
 * kept from scan to scan), nothing copied yet. -1 where memory is short. */
int rc_unstuff_begin(rc_unstuff *u, const uint8_t *src, size_t n, size_t nseg);

/* As rc_unstuff_begin, for the segments of src's scan that cover window w alone, copied as the
 * segments of a scan of their own (*nseg of them: seg[] counts those); the others are passed
 * over, their markers checked in sequence (0xFF fill bytes allowed, as the restart cut allows
 * them). -1 where memory is short or the window is not one. */
int rc_unstuff_begin_window(rc_unstuff *u, const uint8_t *src, size_t n, const rc_unstuff_window *w,
                            size_t *nseg);

/* Copies on until the copy holds `want` bytes or more (it goes on to the next 0xFF), or the
 * scan's data (a window's last segment) ends; its state. Data cut short is seen once the copy
 * is asked for more than there is before the last 0xFF. */
int rc_unstuff_to(rc_unstuff *u, size_t want);

void rc_unstuff_free(rc_unstuff *u);

/* The whole scan at once, for a reader of every segment (recode.c): p[0:n] copied into *buf
 * (grown as needed, *cap bytes) with RC_UNSTUFF_PAD zero bytes after it; seg[0..nseg] (grown
 * likewise) where each of its nseg segments starts in the copy and, last, where the data
 * ends. The EOI's offset in p, or (size_t)-1 where the data is not framed so (or memory is
 * short). */
size_t rc_unstuff_scan(const uint8_t *p, size_t n, size_t nseg, uint8_t **buf, size_t *cap,
                       size_t **seg, size_t *seg_cap);

#endif
