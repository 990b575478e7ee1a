#!/usr/bin/env bash
# The decode matrix under valgrind memcheck: every JPEG of tests/data/sampling (each sampling
# factor libjpeg accepts, greyscale, CMYK; baseline and progressive) at every DCT scale, crops
# at every MCU offset and edge (tools/valgrind/decode_matrix.c). AddressSanitizer does not see
# reads of uninitialised memory; memcheck does, and every output byte is checked defined.
# Built from native/ directly (no Python: the interpreter's own noise stays out). libjpeg-turbo's
# SIMD kernels load and store whole vectors past a row's last sample, lanes memcheck cannot
# tell apart from the pixels, so libjpeg runs its C paths here (JSIMD_FORCENONE=1): the same
# pixels. A few minutes; on a report, --track-origins=yes (VALGRIND_OPTS) says where it began.
# Needs valgrind and its headers (Debian: valgrind), installed here when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v valgrind >/dev/null || [ ! -f /usr/include/valgrind/memcheck.h ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get install -y -q valgrind >/dev/null
fi
bin=$(mktemp -d)/decode_matrix
trap 'rm -rf "$(dirname "$bin")"' EXIT
gcc -O1 -g -std=c11 -Wall -Wextra -Wno-unused-parameter -pthread -Inative \
  tools/valgrind/decode_matrix.c native/decode_core.c native/encode_core.c native/jpeg_glue.c \
  native/colour.c native/entropy.c native/pool.c native/resample.c native/restart.c \
  native/warp.c native/draw.c native/streamcheck.c native/crc32c.c native/unstuff.c \
  -ljpeg -lm -o "$bin"
JSIMD_FORCENONE=1 valgrind -q --error-exitcode=3 ${VALGRIND_OPTS:-} "$bin" tests/data/sampling/*.jpg
