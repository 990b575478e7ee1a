#!/usr/bin/env bash
# Install recio with its test extras (in .venv: tools/setup.sh), start this run's own test servers (S3, HDFS) on free
# ports of 127.0.0.1, run the whole test suite except what needs a GPU, stop those servers.
# The servers live in a fresh state dir with an owner token of this run (RECIO_SERVERS_STATE,
# RECIO_SERVERS_OWNER), so the EXIT trap and the restart tests stop only them, never a server
# someone else started; the tests find them through RECIO_S3_ENDPOINT / RECIO_HDFS_URL /
# RECIO_WEBHDFS_URL. The installs stay cached in ~/.cache/recio-servers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh "test,lint,s3,cloud,hdfs,dali,train,plot,frameworks,cluster,gpu"
# valgrind's callgrind: the instruction counts tests/tools/test_bench_peers.py checks
if ! command -v valgrind >/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq valgrind >/dev/null
fi
# the virtual environment setup.sh installed into: its python3, pytest and recio from here on
# shellcheck disable=SC1091
. "${RECIO_VENV:-.venv}/bin/activate"
if [ -x tools/ci_services.sh ]; then
  state=$(mktemp -d "${TMPDIR:-/tmp}/recio-servers.XXXXXX")
  export RECIO_SERVERS_STATE=$state RECIO_SERVERS_OWNER="run_tests-$$-${state##*.}"
  export RECIO_SERVERS_PORTS=auto
  stop_servers() {
    local rc=$?
    # only what this run started; its data goes with it
    if bash tools/ci_services.sh stop; then rm -rf "$state"; fi
    exit $rc
  }
  trap stop_servers EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  bash tools/ci_services.sh start
  eval "$(bash tools/ci_services.sh env | sed 's/^/export /')"
fi
python3 -m pytest -m "not gpu" "$@"
