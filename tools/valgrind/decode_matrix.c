/* The decode matrix under valgrind memcheck (tools/valgrind_test.sh builds and runs it).
 *
 * For each JPEG named on the command line: every DCT scale (1/8 .. 8/8), crops starting at
 * every pixel offset of an MCU and crops reaching the right and bottom edges, flipped and
 * not, through rc_decode (RGB, crop-aware row reads; each file read whole first, NOTE
 * [whole-stream check]) and rc_decode_planes (im2rec's planes); on the SSE2 passes, then, on
 * a CPU with AVX2, a few crops on the AVX2 ones with the float32 NCHW store.
 * Every output byte is checked to be defined (a copy of an uninitialised byte raises no
 * memcheck error by itself; VALGRIND_CHECK_MEM_IS_DEFINED does). Exits 1 on a decode that
 * does not return RC_OK; valgrind's --error-exitcode reports the rest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <valgrind/memcheck.h>

#include "crc32c.h"
#include "decode_core.h"
#include "encode_core.h" /* rc_decode_planes */
#include "resample.h"
#include "streamcheck.h"

static rc_checked checked; /* as a pool's: each file's first decode reads its whole stream */

/* The store the decodes write: uint8 NHWC, or (after rc_simd_init, the AVX2 passes) float32
 * NCHW through a table and its line (NOTE [float store] in resample.h). */
static int float_store;
static float table[3 * 256];
static const double line[3 * 2] = {1.0 / 64, -2, 1.0 / 64, -2, 1.0 / 64, -2};

static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  const long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = (size_t)n;
  return buf;
}

/* One crop at one output size: 0, or 1 with a message. */
static int decode_one(rc_worker *w, const char *path, const unsigned char *data, size_t len,
                      const int32_t crop[4], int out_w, int out_h, int flip, int roi) {
  rc_opts o;
  memset(&o, 0, sizeof o);
  o.out_w = out_w;
  o.out_h = out_h;
  o.layout = float_store ? RC_LAYOUT_NCHW : RC_LAYOUT_NHWC;
  o.itemsize = float_store ? 4 : 1;
  o.lut = float_store ? table : NULL;
  o.lut_line = float_store ? line : NULL;
  o.interp = RC_INTERP_BILINEAR;
  o.dct_mode = RC_DCT_ALL;
  o.roi = roi;
  o.max_pixels = (uint64_t)1 << 32;
  o.checked = &checked;
  char err[RC_ERRLEN];
  const unsigned errors = VALGRIND_COUNT_ERRORS;
  const size_t bytes = (size_t)out_w * out_h * 3 * o.itemsize;
  unsigned char *out = malloc(bytes);
  int status = rc_decode(w, data, len, crop, flip, &o, out, err);
  if (status == RC_OK) VALGRIND_CHECK_MEM_IS_DEFINED(out, bytes);
  rc_worker_release(w);
  free(out);
  if (status != RC_OK) {
    fprintf(stderr, "%s crop %d,%d,%d,%d -> %dx%d: status %d: %s\n", path, crop[0], crop[1],
            crop[2], crop[3], out_w, out_h, status, err);
    return 1;
  }
  rc_planes planes;
  status = rc_decode_planes(w, data, len, crop, &o, 0, &planes, err);
  if (status == RC_OK) {
    for (int c = 0; c < planes.nplanes; c++)
      for (int y = 0; y < planes.height[c]; y++)
        VALGRIND_CHECK_MEM_IS_DEFINED(planes.data[c] + (size_t)y * planes.stride[c],
                                      (size_t)planes.width[c]);
  }
  rc_worker_release(w);
  if (VALGRIND_COUNT_ERRORS != errors) /* where memcheck's reports above come from */
    fprintf(stderr, "memcheck errors: %s crop %d,%d,%d,%d -> %dx%d flip %d\n", path, crop[0],
            crop[1], crop[2], crop[3], out_w, out_h, flip);
  if (status != RC_OK && status != RC_UNSUPPORTED) { /* (CMYK: the RGB way only) */
    fprintf(stderr, "%s planes crop %d,%d,%d,%d: status %d: %s\n", path, crop[0], crop[1], crop[2],
            crop[3], status, err);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  int failed = 0, decodes = 0;
  rc_crc32c_init();
  rc_checked_init(&checked);
  rc_worker *w = rc_worker_new();
  if (!w) return 2;
  for (int v = 0; v < 3 * 256; v++) table[v] = (float)((v % 256 - 128) / 64.0);
  /* the SSE2 passes over the whole matrix, then the AVX2 ones and the float store over the
   * first MCU's offsets */
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) {
      if (strcmp(rc_simd_init(), "avx2") != 0) break;
      float_store = 1;
      if (!rc_line_exact(table, line)) {
        fprintf(stderr, "the float store's line misses its table\n");
        return 2;
      }
    }
    for (int a = 1; a < argc; a++) {
      size_t len;
      unsigned char *data = read_file(argv[a], &len);
      int W, H;
      char err[RC_ERRLEN];
      if (!data || rc_image_size(w, data, len, &W, &H, err) != RC_OK) {
        fprintf(stderr, "%s: not readable\n", argv[a]);
        return 2;
      }
      const int mcu = pass ? 4 : 32; /* the largest MCU (4x sampling): every offset of it */
      for (int d = 0; d < mcu; d++) {
        const int x = d % W, y = (d * 5) % H;
        const int32_t crops[3][4] = {
            {x, y, W / 2 > 1 ? W / 2 : 1, H / 2 > 1 ? H / 2 : 1}, /* inside */
            {x, y, W - x, H - y},             /* to the right and bottom edges */
            {W - 1 - x % 8, 0, 1 + x % 8, H}, /* a thin column at the edge */
        };
        for (int k = 0; k < (d < 8 ? 3 : 2); k++) { /* (the column repeats past x = 7) */
          for (int num = 1; num <= 8; num++) {      /* the output size that gives scale num/8 */
            const int ow = crops[k][2] * num / 8 > 0 ? crops[k][2] * num / 8 : 1;
            const int oh = crops[k][3] * num / 8 > 0 ? crops[k][3] * num / 8 : 1;
            failed |= decode_one(w, argv[a], data, len, crops[k], ow, oh, (d + num) & 1, 1);
            decodes++;
          }
        }
      }
      free(data);
    }
  }
  rc_worker_free(w);
  rc_checked_destroy(&checked);
  printf("%d decodes, %s\n", decodes, failed ? "some failed" : "all ok");
  return failed;
}
