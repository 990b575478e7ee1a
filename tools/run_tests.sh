#!/usr/bin/env bash
# Install recio with its test extras, start the test servers (S3, HDFS) on
# 127.0.0.1, run the whole test suite except what needs a GPU, stop the servers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh "test,s3,hdfs,dali,train,plot"
if [ -x tools/ci_services.sh ]; then
  bash tools/ci_services.sh start
  trap 'bash tools/ci_services.sh stop' EXIT
fi
python3 -m pytest -m "not gpu" "$@"
