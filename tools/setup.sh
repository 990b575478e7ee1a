#!/usr/bin/env bash
# Install what recio needs on a Debian machine: the system libraries (apt, only
# when missing), then recio itself, editable, with the extras named in $1
# (comma-separated, e.g. "test,s3").
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
need=()
for pkg in libturbojpeg0-dev libjpeg62-turbo-dev gcc; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing system packages: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

extras=${1:-}
# PyTorch: pin the release this project is tested with before pip resolves the extra; an
# open range could otherwise pull a newer multi-GB build.
if [[ ",$extras," == *",train,"* || ",$extras," == *",frameworks,"* ]] \
  && ! python3 -c "import torch" 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check "torch==2.13.0"
fi
spec="."
[ -n "$extras" ] && spec=".[$extras]"
python3 -m pip install -q --disable-pip-version-check -e "$spec"
python3 -c "import recio, recio.decode as d; print('recio', recio.__version__, 'decoder:', d.default_backend())" \
  || python3 -c "import recio; print('recio', recio.__version__, 'installed')"
