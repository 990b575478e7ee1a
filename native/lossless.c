/* recio lossless transcode (lossless.h): a decompressor and a compressor sharing one error
 * manager, and a growing malloc'd destination (both jpeg_glue.h's).
 */
#include "lossless.h"

#include "huffstats.h"
#include "jpeg_glue.h"
#include "recode.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

struct rc_lossless {
  struct jpeg_decompress_struct src;
  struct jpeg_compress_struct dst;
  rc_jpeg_err err;
  rc_jpeg_dest dest;
  rc_recoder recoder; /* NOTE [re-code]: the common source's path */
  int created;        /* 1: src made, 2: both */
};

/* Every warning is kept (the first): any of them refuses the source. */
static int source_warning(j_common_ptr ci) {
  return ci->err->msg_code == JWRN_JPEG_EOF ? RC_TRUNCATED : RC_CORRUPT;
}

static int create(rc_lossless *t) {
  t->src.err = t->dst.err = rc_jpeg_err_init(&t->err, source_warning);
  if (setjmp(t->err.jb)) return -1;
  jpeg_create_decompress(&t->src);
  t->created = 1;
  jpeg_create_compress(&t->dst);
  t->created = 2;
  rc_jpeg_dest_attach(&t->dest, &t->dst);
  /* every APPn (EXIF, ICC profile, ...) and COM segment is kept */
  jpeg_save_markers(&t->src, JPEG_COM, 0xFFFF);
  for (int m = 0; m < 16; m++) jpeg_save_markers(&t->src, JPEG_APP0 + m, 0xFFFF);
  return 0;
}

rc_lossless *rc_lossless_new(void) {
  rc_lossless *t = calloc(1, sizeof *t);
  if (t && create(t)) {
    rc_lossless_free(t);
    return NULL;
  }
  return t;
}

void rc_lossless_free(rc_lossless *t) {
  if (!t) return;
  if (t->created >= 2) jpeg_destroy_compress(&t->dst);
  if (t->created >= 1) jpeg_destroy_decompress(&t->src);
  rc_jpeg_dest_drop(&t->dest);
  rc_recoder_free(&t->recoder);
  free(t);
}

/* A saved segment libjpeg writes itself from the parameters (jpegtran's rule): the JFIF
 * APP0 and the Adobe APP14. Copying them too would repeat them. */
static int written_by_libjpeg(const struct jpeg_compress_struct *dst,
                              const jpeg_saved_marker_ptr m) {
  if (dst->write_JFIF_header && m->marker == JPEG_APP0 && m->data_length >= 5 &&
      memcmp(m->data, "JFIF", 5) == 0)
    return 1;
  return dst->write_Adobe_marker && m->marker == JPEG_APP0 + 14 && m->data_length >= 5 &&
         memcmp(m->data, "Adobe", 5) == 0;
}

/* The status of a source libjpeg warned about: cut short, or damaged. */
static int warned(const rc_jpeg_err *e, char *err) {
  const int cut = e->warning_status == RC_TRUNCATED;
  snprintf(err, RC_ERRLEN, "%s JPEG, left as it is: %s", cut ? "truncated" : "damaged", e->warning);
  return e->warning_status;
}

/* One try; `fast`: Huffman tables from rc_huff_optimise, else libjpeg's optimize_coding.
 * *wrote: the failure, if any, was the compressor's. */
static int transcode(rc_lossless *t, rc_worker *w, const rc_opts *o, const uint8_t *data,
                     size_t len, int restart, int fast, uint8_t **out, size_t *outlen, char *err,
                     int *wrote) {
  struct jpeg_decompress_struct *src = &t->src;
  struct jpeg_compress_struct *dst = &t->dst;
  *out = NULL;
  *outlen = 0;
  if (len < 4 || data[0] != 0xFF || data[1] != 0xD8)
    return snprintf(err, RC_ERRLEN, "not a JPEG"), RC_UNSUPPORTED;
  rc_jpeg_err_reset(&t->err);
  volatile int reading = 1; /* a compressor error is an output problem, not the source's */
  if (setjmp(t->err.jb)) {
    jpeg_abort_compress(dst);
    jpeg_abort_decompress(src);
    rc_jpeg_dest_drop(&t->dest);
    snprintf(err, RC_ERRLEN, "%s: %s", reading ? "JPEG read" : "JPEG write", t->err.msg);
    *wrote = !reading;
    return t->err.pub.msg_code == JERR_OUT_OF_MEMORY ? RC_NOMEM : RC_CORRUPT;
  }
  jpeg_mem_src(src, (unsigned char *)data, (unsigned long)len);
  jpeg_read_header(src, TRUE);
  const uint64_t px = (uint64_t)src->image_width * src->image_height;
  if (o->max_pixels && px > o->max_pixels) {
    jpeg_abort_decompress(src);
    snprintf(err, RC_ERRLEN, "%ux%u is over the pixel limit (%llu)", src->image_width,
             src->image_height, (unsigned long long)o->max_pixels);
    return RC_TOO_LARGE;
  }
  /* the coefficients (2 bytes a sample, up to 3 samples a pixel), and the output */
  char what[64];
  snprintf(what, sizeof what, "a %ux%u lossless transcode", src->image_width, src->image_height);
  int st = rc_worker_reserve(w, o, px * 6 + (uint64_t)len * 2, what, err);
  if (st != RC_OK) {
    jpeg_abort_decompress(src);
    return st;
  }
  /* the re-coder where it takes the source (a warning so far: libjpeg's path reports it) */
  if (fast && !t->err.pub.num_warnings &&
      rc_recode(&t->recoder, src, data, len, restart, out, outlen) == 0) {
    jpeg_abort_decompress(src);
    return RC_OK;
  }
  jvirt_barray_ptr *coefs = jpeg_read_coefficients(src);
  if (t->err.pub.num_warnings) {
    jpeg_abort_decompress(src);
    return warned(&t->err, err);
  }
  reading = 0;
  jpeg_copy_critical_parameters(src, dst); /* also: sequential, Huffman, no scan script */
  dst->restart_interval = restart > 0 ? (unsigned)restart : 0;
  dst->restart_in_rows = restart < 0 ? -restart : 0;
  dst->optimize_coding = !fast || rc_huff_optimise(src, dst, coefs) != 0;
  if (rc_jpeg_dest_open(&t->dest, len + len / 8 + 4096)) ERREXIT1(dst, JERR_OUT_OF_MEMORY, 0);
  jpeg_write_coefficients(dst, coefs);
  for (jpeg_saved_marker_ptr m = src->marker_list; m; m = m->next)
    if (!written_by_libjpeg(dst, m)) jpeg_write_marker(dst, m->marker, m->data, m->data_length);
  jpeg_finish_compress(dst);
  jpeg_finish_decompress(src);
  *out = rc_jpeg_dest_take(&t->dest, outlen);
  return RC_OK;
}

int rc_lossless_transcode(rc_lossless *t, rc_worker *w, const rc_opts *o, const uint8_t *data,
                          size_t len, int restart, uint8_t **out, size_t *outlen, char *err) {
  int wrote = 0;
  const int st = transcode(t, w, o, data, len, restart, 1, out, outlen, err, &wrote);
  if (st == RC_OK || !wrote) return st;
  /* (a table rc_huff_optimise got wrong stops the encoder: libjpeg's own pass then) */
  wrote = 0;
  return transcode(t, w, o, data, len, restart, 0, out, outlen, err, &wrote);
}
