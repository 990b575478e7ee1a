#!/usr/bin/env bash
# The main job on a built-in default: install (in .venv: tools/setup.sh), make the sample dataset, pack it,
# read it through every stage, and print the throughput.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
exec "${RECIO_VENV:-.venv}/bin/recio" bench "$@"
