#!/usr/bin/env bash
# Builds recio._native with AddressSanitizer + UndefinedBehaviorSanitizer and runs the decode,
# transcode and native-boundary tests against it (native and fallback backends), in the
# checkout this script is in (a git worktree too: its recio, not an installed one). Python
# itself is not instrumented, so the ASan runtime is preloaded and leak detection (which would
# report the interpreter) is off.
# Rebuild the normal extension afterwards with: python setup.py build_ext --inplace --force
set -euo pipefail
cd "$(dirname "$0")/.."
RECIO_NATIVE_DEBUG=asan python setup.py build_ext --inplace --force
# the tests must import this checkout's recio (an editable install may point elsewhere)
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0 python -c \
  'import os, recio._native as n; assert n.__file__.startswith(os.getcwd() + os.sep), n.__file__'
LD_PRELOAD="$(gcc -print-file-name=libasan.so)" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  RECIO_FUZZ_EXAMPLES="${RECIO_FUZZ_EXAMPLES:-250}" \
  python -m pytest -q -p no:cacheprovider tests/decode/test_pool.py tests/decode/test_pillow.py \
  tests/decode/test_fuzz.py tests/decode/test_resample.py tests/decode/test_resample_window.py \
  tests/test_native.py \
  tests/pipeline/test_read_decode.py tests/augment/test_geometry.py tests/augment/test_colour.py \
  tests/augment/test_colour_geometry.py tests/augment/test_colour_fused.py tests/augment/test_resample_opencv.py \
  tests/records/test_checksum.py tests/decode/test_restart_cut.py tests/storage/test_mapped.py \
  tests/pipeline/test_damaged_records.py tests/pipeline/test_autotune.py tests/decode/test_entropy.py \
  tests/decode/test_unstuff.py \
  -m "not dali" \
  --deselect tests/decode/test_pool.py::test_no_memory_growth "$@"
# (not DALI's tests: its own libraries abort under the preloaded ASan runtime)
# im2rec's process pool forks (its C batches run here too): in a pytest process of its own,
# with no decode threads of earlier tests alive (GCC 12's ASan allocator deadlocks in a child forked while another
# thread held its lock).
LD_PRELOAD="$(gcc -print-file-name=libasan.so)" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  python -m pytest -q -p no:cacheprovider tests/im2rec/test_encoder.py tests/im2rec/test_transcode.py \
  tests/im2rec/test_batch.py tests/im2rec/test_optimize_jpeg.py tests/im2rec/test_recode.py "$@"
# (not the RSS test: ASan's quarantine holds freed memory, so RSS says nothing under it)
