/* recio's libjpeg glue: the error manager and the memory destination every libjpeg object of
 * recio uses (the decoder in decode_core.c, the encoder in encode_core.c, the lossless
 * transcode in lossless.c). No Python here.
 *
 * Errors never exit and never print: error_exit keeps libjpeg's message and longjmps to the
 * caller's setjmp(rc_jpeg_err.jb). Warnings (level -1) are counted; the first one the caller's
 * classifier calls damaging (a non-zero status) is kept with its text, so a decode that
 * libjpeg carried on through can still be refused after it. Trace messages are dropped.
 */
#ifndef RECIO_JPEG_GLUE_H
#define RECIO_JPEG_GLUE_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

/* What a warning means to its caller: 0 (harmless), or a non-zero status (RC_* codes) for
 * one that damages the image. */
typedef int (*rc_jpeg_classify_fn)(j_common_ptr ci);

typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
  char msg[JMSG_LENGTH_MAX]; /* the error's text (error_exit) */
  rc_jpeg_classify_fn classify;
  int warning_status;            /* 0, or the classifier's status for the first kept warning */
  char warning[JMSG_LENGTH_MAX]; /* that warning's text */
} rc_jpeg_err;

/* Sets up e (classify: NULL keeps no warning, only counts them) and returns the struct
 * jpeg_error_mgr to put in a libjpeg object's err. */
struct jpeg_error_mgr *rc_jpeg_err_init(rc_jpeg_err *e, rc_jpeg_classify_fn classify);

/* Before each image: no error text, no warning counted or kept. */
void rc_jpeg_err_reset(rc_jpeg_err *e);

/* A destination that grows a malloc'd buffer with realloc, so that an error at any point leaves
 * one buffer to free (libjpeg's jpeg_mem_dest frees and replaces its buffer as it grows, which
 * leaves the caller a dangling pointer when compression fails midway). Out of memory while
 * growing is libjpeg's JERR_OUT_OF_MEMORY error. */
typedef struct {
  struct jpeg_destination_mgr pub;
  uint8_t *buf;
  size_t cap;
} rc_jpeg_dest;

/* Makes d the destination of ci (once, after jpeg_create_compress). */
void rc_jpeg_dest_attach(rc_jpeg_dest *d, j_compress_ptr ci);

/* A first buffer of cap bytes for the next image: 0, or -1 when malloc fails. */
int rc_jpeg_dest_open(rc_jpeg_dest *d, size_t cap);

/* After jpeg_finish_compress: the JPEG written (the caller frees it) and its length; d holds no
 * buffer after. */
uint8_t *rc_jpeg_dest_take(rc_jpeg_dest *d, size_t *len);

/* Frees what d holds (after a failed compression, or at the end). */
void rc_jpeg_dest_drop(rc_jpeg_dest *d);

#endif
