/* recio's libjpeg glue (see jpeg_glue.h). */
#include "jpeg_glue.h"

#include <stdlib.h>

#include <jerror.h>

static void error_exit(j_common_ptr ci) {
  rc_jpeg_err *e = (rc_jpeg_err *)ci->err;
  ci->err->format_message(ci, e->msg);
  longjmp(e->jb, 1);
}

static void output_message(j_common_ptr ci) {
  (void)ci; /* nothing printed */
}

static void emit_message(j_common_ptr ci, int level) {
  if (level >= 0) return; /* trace messages */
  rc_jpeg_err *e = (rc_jpeg_err *)ci->err;
  e->pub.num_warnings++;
  if (e->classify && e->warning_status == 0 && (e->warning_status = e->classify(ci)) != 0)
    e->pub.format_message(ci, e->warning);
}

struct jpeg_error_mgr *rc_jpeg_err_init(rc_jpeg_err *e, rc_jpeg_classify_fn classify) {
  struct jpeg_error_mgr *pub = jpeg_std_error(&e->pub);
  pub->error_exit = error_exit;
  pub->output_message = output_message;
  pub->emit_message = emit_message;
  e->classify = classify;
  rc_jpeg_err_reset(e);
  return pub;
}

void rc_jpeg_err_reset(rc_jpeg_err *e) {
  e->msg[0] = 0;
  e->warning[0] = 0;
  e->warning_status = 0;
  e->pub.num_warnings = 0;
}

static void dest_init(j_compress_ptr ci) {
  rc_jpeg_dest *d = (rc_jpeg_dest *)ci->dest;
  d->pub.next_output_byte = d->buf;
  d->pub.free_in_buffer = d->cap;
}

static boolean dest_empty(j_compress_ptr ci) {
  rc_jpeg_dest *d = (rc_jpeg_dest *)ci->dest;
  const size_t cap = d->cap * 2;
  uint8_t *p = realloc(d->buf, cap);
  if (!p) ERREXIT1(ci, JERR_OUT_OF_MEMORY, 0);
  d->pub.next_output_byte = p + d->cap;
  d->pub.free_in_buffer = cap - d->cap;
  d->buf = p;
  d->cap = cap;
  return TRUE;
}

static void dest_term(j_compress_ptr ci) {
  (void)ci; /* the length is read from free_in_buffer (rc_jpeg_dest_take) */
}

void rc_jpeg_dest_attach(rc_jpeg_dest *d, j_compress_ptr ci) {
  d->pub.init_destination = dest_init;
  d->pub.empty_output_buffer = dest_empty;
  d->pub.term_destination = dest_term;
  ci->dest = &d->pub;
}

int rc_jpeg_dest_open(rc_jpeg_dest *d, size_t cap) {
  d->cap = cap;
  d->buf = malloc(cap);
  return d->buf ? 0 : -1;
}

uint8_t *rc_jpeg_dest_take(rc_jpeg_dest *d, size_t *len) {
  uint8_t *buf = d->buf;
  *len = d->cap - d->pub.free_in_buffer;
  d->buf = NULL;
  return buf;
}

void rc_jpeg_dest_drop(rc_jpeg_dest *d) {
  free(d->buf);
  d->buf = NULL;
}
