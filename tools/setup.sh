#!/usr/bin/env bash
# Install what recio needs on a Debian machine: the system libraries (apt, only when
# missing), then recio itself, editable, with the extras named in $1 (comma-separated, e.g.
# "test,s3"), into a virtual environment: $RECIO_VENV, by default .venv in the checkout.
# Debian's own Python refuses pip installs outside one (PEP 668: externally-managed-
# environment). The environment is made from $PYTHON (default python3) when it is not there;
# `. .venv/bin/activate` puts its python and `recio` on the PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
venv=${RECIO_VENV:-.venv}

sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
need=()
for pkg in libturbojpeg0-dev libjpeg62-turbo-dev gcc; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
# Debian's Python: venv's pip (ensurepip) and the headers the C extension builds against
# come in packages of their own.
if [ ! -x "$venv/bin/python" ] && ! "$python" -c "import ensurepip" 2>/dev/null; then
  need+=(python3-venv)
fi
"$python" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
  || need+=(python3-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing system packages: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
py="$venv/bin/python"
pip=("$py" -m pip install -q --disable-pip-version-check)

extras=${1:-}
# PyTorch: pin the release this project is tested with before pip resolves the extra; an
# open range could otherwise pull a newer multi-GB build.
if [[ ",$extras," == *",train,"* || ",$extras," == *",frameworks,"* || ",$extras," == *",gpu,"* ]] \
  && ! "$py" -c "import torch" 2>/dev/null; then
  "${pip[@]}" "torch==2.13.0"
fi
# torchvision: the release built for that torch, so pip does not move torch to fit a newer one
if [[ ",$extras," == *",gpu,"* ]] && ! "$py" -m pip show -q torchvision 2>/dev/null; then
  "${pip[@]}" "torchvision==0.28.0"
fi
spec="."
[ -n "$extras" ] && spec=".[$extras]"
"${pip[@]}" -e "$spec"
# torchvision's wheel must match the torch build (CUDA or CPU): one built for another
# torch fails at import, and other packages that import it would too. recio.gpu then
# decodes with Pillow on the CPU, so the tests still run.
if [[ ",$extras," == *",gpu,"* ]] && ! "$py" -c "import torchvision.io" 2>/dev/null; then
  echo "torchvision does not load with this torch build: uninstalled (recio.gpu uses Pillow on the CPU)"
  "$py" -m pip uninstall -q -y torchvision
fi
"$py" -c "import recio, recio.decode as d; print('recio', recio.__version__, 'decoder:', d.default_backend(), 'in $venv')" \
  || "$py" -c "import recio; print('recio', recio.__version__, 'installed in $venv')"
