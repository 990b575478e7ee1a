#!/usr/bin/env bash
# Install (cached under ~/.cache/recio-servers) and start, or stop, both storage test servers.
# usage: tools/ci_services.sh start | stop | status | env
#   env   the running servers' endpoints as shell assignments (RECIO_S3_ENDPOINT=...,
#         RECIO_HDFS_URL=..., RECIO_WEBHDFS_URL=...), for this state dir and owner only
# The S3 install runs while the HDFS sdist downloads; both servers then start side by side.
# The servers belong to the state dir and owner token in the environment (RECIO_SERVERS_STATE,
# RECIO_SERVERS_OWNER; see tools/s3_server.sh): stop stops only what they started.
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
  stop)
    rc=0
    "$here/s3_server.sh" stop || rc=$?
    "$here/hdfs_server.sh" stop || rc=$?
    exit $rc
    ;;
  status) "$here/s3_server.sh" status; "$here/hdfs_server.sh" status ;;
  env)
    "$here/s3_server.sh" owns | grep -E '^RECIO_S3_ENDPOINT='
    "$here/hdfs_server.sh" owns | grep -E '^RECIO_(WEB)?HDFS_URL='
    ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
