/* recio im2rec core: a list entry's file -> its framed record (see im2rec_core.h).
 *
 * Every rule here mirrors a line of recio/im2rec/transcode.py or recio/records/format.py, and where
 * the two could differ (a header Python reads in part, a size Python ints hold and C ints
 * do not) the entry goes back to Python: the records C makes are the bytes Python makes.
 */
#define _POSIX_C_SOURCE 200809L /* open(O_CLOEXEC), fstat */
#include "im2rec_core.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "records_core.h"
#define EOI_WINDOW 65536 /* jpeg_header's tail window for the end-of-image marker */

static unsigned be16(const uint8_t *p) {
  return (unsigned)p[0] << 8 | p[1];
}

/* _exif_orientation(tiff): the first orientation tag of type SHORT in IFD0, 1 if none, out
 * of 1..8, or anything is cut short (Python's KeyError and struct.error). */
static int exif_orientation(const uint8_t *t, size_t n) {
  int big;
  if (n >= 2 && t[0] == 'I' && t[1] == 'I')
    big = 0;
  else if (n >= 2 && t[0] == 'M' && t[1] == 'M')
    big = 1;
  else
    return 1;
#define U16(p) (big ? (unsigned)(p)[0] << 8 | (p)[1] : (unsigned)(p)[1] << 8 | (p)[0])
#define U32(p) (big ? (uint32_t)U16(p) << 16 | U16((p) + 2) : (uint32_t)U16((p) + 2) << 16 | U16(p))
  if (n < 8) return 1;
  const uint64_t ifd = U32(t + 4);
  if (ifd + 2 > n) return 1;
  const unsigned count = U16(t + ifd);
  for (unsigned i = 0; i < count; i++) {
    const uint64_t at = ifd + 2 + 12 * (uint64_t)i;
    if (at + 12 > n) return 1;
    if (U16(t + at) == 0x0112 && U16(t + at + 2) == 3) {
      const unsigned v = U16(t + at + 8);
      return v >= 1 && v <= 8 ? (int)v : 1;
    }
  }
  return 1;
#undef U32
#undef U16
}

static int is_sof(unsigned m) {
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

int rc_jpeg_probe(const uint8_t *d, size_t n, rc_jpeg_info *info) {
  if (n < 3 || d[0] != 0xFF || d[1] != 0xD8 || d[2] != 0xFF) return 0;
  /* data.rfind(b"\xff\xd9", max(0, n - 65536)) >= 0 */
  const size_t from = n > EOI_WINDOW ? n - EOI_WINDOW : 0;
  int eoi = 0;
  for (size_t i = n - 1; i > from && !eoi; i--) eoi = d[i - 1] == 0xFF && d[i] == 0xD9;
  if (!eoi) return 0;
  size_t pos = 2;
  int orientation = 1;
  while (pos + 4 <= n) {
    if (d[pos] != 0xFF) return 0;
    const unsigned marker = d[pos + 1];
    if (marker == 0xFF) { /* fill byte */
      pos++;
      continue;
    }
    const size_t length = be16(d + pos + 2);
    if (marker == 0xE1 && pos + 10 <= n && memcmp(d + pos + 4, "Exif\0\0", 6) == 0) {
      const size_t end = pos + 2 + length < n ? pos + 2 + length : n;
      orientation = exif_orientation(d + pos + 10, end > pos + 10 ? end - (pos + 10) : 0);
    } else if (is_sof(marker) && pos + 10 <= n) {
      const int height = (int)be16(d + pos + 5), width = (int)be16(d + pos + 7);
      const size_t ncomp = d[pos + 9];
      /* a frame header cut short: Python counts the factors there are; left to it */
      if (!width || !height || pos + 11 + 3 * ncomp > n) return 0;
      *info = (rc_jpeg_info){width, height, orientation, (int)ncomp};
      return 1;
    }
    pos += 2 + length;
  }
  return 0;
}

int rc_im2rec_plan(const rc_jpeg_info *info, const rc_im2rec_opts *o, int32_t crop[4], int *out_w,
                   int *out_h, int *gray) {
  if (info->orientation != 1) return 0; /* Pillow turns it */
  const int64_t w = info->width, h = info->height;
  int64_t x0 = 0, y0 = 0, cw = w, ch = h; /* crop_box */
  if (o->center_crop && h > w) {
    y0 = (h - w) / 2;
    ch = w;
  } else if (o->center_crop) {
    x0 = (w - h) / 2;
    cw = h;
  }
  if (o->resize < 0 || o->resize > (1 << 28)) return 0; /* sizes C ints may not hold */
  int64_t ow = cw, oh = ch;                             /* output_size */
  if (o->resize && ch > cw) {
    ow = o->resize;
    oh = ch * o->resize / cw;
  } else if (o->resize) {
    ow = cw * o->resize / ch;
    oh = o->resize;
  }
  /* transcode_batch's output limits (Python hands such an image to Pillow), checked first:
   * all that is not made here goes to Python, and the products below then fit */
  if (ow < 1 || oh < 1 || ow > (1 << 28) || oh > (1 << 28) || ow * oh > (1 << 28)) return 0;
  *gray = o->color == 0 || (o->color == -1 && info->components == 1);
  const int64_t channels = *gray ? 1 : 3;
  /* check_output_size: refused there (SkipImage) */
  const uint64_t need = (uint64_t)(ow * oh * channels);
  if (need > o->max_output_bytes && need > (uint64_t)(w * h * channels)) return 0;
  crop[0] = (int32_t)x0;
  crop[1] = (int32_t)y0;
  crop[2] = (int32_t)cw;
  crop[3] = (int32_t)ch;
  *out_w = (int)ow;
  *out_h = (int)oh;
  return 1;
}

int rc_read_path(const char *path, uint8_t **data, size_t *len) {
  *data = NULL;
  *len = 0;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  /* read_file(): the size fstat gives, else (0: unknown) to the end */
  const size_t size = fstat(fd, &st) == 0 && st.st_size > 0 ? (size_t)st.st_size : 0;
  size_t cap = size ? size : 65536, n = 0;
  uint8_t *buf = malloc(cap);
  int rc = buf ? 0 : -1;
  while (rc == 0 && (!size || n < size)) {
    if (n == cap) {
      uint8_t *grown = realloc(buf, cap *= 2);
      if (!grown) {
        rc = -1;
        break;
      }
      buf = grown;
    }
    const ssize_t got = read(fd, buf + n, cap - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) rc = -1;
    if (got <= 0) break;
    n += (size_t)got;
  }
  close(fd);
  if (rc < 0 || n == 0) {
    free(buf);
    return rc;
  }
  *data = buf;
  *len = n;
  return 0;
}

int rc_im2rec_record(rc_worker *w, rc_encoder *e, const char *path, const uint8_t *prefix,
                     size_t prefix_len, const rc_im2rec_opts *o, const rc_opts *base,
                     uint8_t **frames, size_t *nframes, uint32_t *crc) {
  *frames = NULL;
  *nframes = 0;
  uint8_t *data, *jpeg = NULL, *payload = NULL;
  size_t len, jpeg_len = 0;
  if (rc_read_path(path, &data, &len) < 0) return RC_UNSUPPORTED;
  rc_jpeg_info info;
  int32_t crop[4];
  rc_opts opts = *base;
  int gray, st = RC_UNSUPPORTED;
  char err[RC_ERRLEN];
  if (data && rc_jpeg_probe(data, len, &info) &&
      rc_im2rec_plan(&info, o, crop, &opts.out_w, &opts.out_h, &gray)) {
    opts.extra_bytes = (uint64_t)opts.out_w * opts.out_h * 7; /* as transcode_batch takes */
    rc_encoder_set_restart(e, o->restart);
    st = rc_transcode(w, e, data, len, crop, &opts, o->quality, gray, &jpeg, &jpeg_len, err);
    rc_encoder_trim(e);
    rc_worker_release(w);
  }
  free(data);
  if (st == RC_OK && prefix_len + jpeg_len > RC_MAX_PAYLOAD) st = RC_UNSUPPORTED;
  if (st == RC_OK && !(payload = malloc(prefix_len + jpeg_len))) st = RC_UNSUPPORTED;
  if (st == RC_OK) {
    memcpy(payload, prefix, prefix_len);
    memcpy(payload + prefix_len, jpeg, jpeg_len);
    const size_t plen = prefix_len + jpeg_len;
    const size_t size = rc_frames_size(payload, plen);
    if ((*frames = malloc(size)))
      *nframes = rc_write_frames(payload, plen, *frames, crc);
    else
      st = RC_UNSUPPORTED;
  }
  free(payload);
  free(jpeg);
  return st == RC_OK ? RC_OK : RC_UNSUPPORTED;
}
