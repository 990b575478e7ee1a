#!/usr/bin/env bash
# Install (cached under ~/.cache/recio-servers) and start, or stop, both storage test servers.
# usage: tools/ci_services.sh start | stop | status
# The S3 install runs while the HDFS sdist downloads; both servers then start side by side.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case "${1:-start}" in
  start)
    "$here/s3_server.sh" install & s3=$!
    "$here/hdfs_server.sh" install
    wait $s3
    "$here/s3_server.sh" start & s3=$!
    "$here/hdfs_server.sh" start
    wait $s3
    ;;
  stop) "$here/s3_server.sh" stop; "$here/hdfs_server.sh" stop ;;
  status) "$here/s3_server.sh" status; "$here/hdfs_server.sh" status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
