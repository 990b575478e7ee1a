#!/usr/bin/env bash
# GPU check of the DALI stage, offline, on one GPU (budget: under 8 minutes).
#
#   tools/dali_gpu_check.sh [CORPUS_DIR]      # class folders of JPEGs; default: synthetic images
#
# Needs Python with PyTorch and CUDA. Installs recio and DALI from the wheels in .whl/
# (no network), then runs tools/dali_check.py: GPU output against the CPU reference
# (ImageRecordIter, same crop windows), record ids per rank and after resume, corrupt
# records, and images/s of recio -> DALI (mixed decode + GPU augmentation) against DALI's own
# fn.readers.mxnet with the same graph on the same .rec (target: at least 0.95x).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}

if ! "$PY" -c "import nvidia.dali" 2>/dev/null; then
  "$PY" -m pip install --no-index --find-links "$WHEELS" nvidia-dali-cuda130
fi
if ! "$PY" -c "import recio._native" 2>/dev/null; then
  "$PY" -m pip install --no-index --find-links "$WHEELS" --no-deps recio
fi
"$PY" -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA device'"

args=()
if [[ $# -ge 1 ]]; then args+=(--corpus "$1"); fi
timeout 450 "$PY" tools/dali_check.py "${args[@]}" --seconds "${SECONDS_PER_ROUND:-5}"
