#!/usr/bin/env bash
# Shared by tools/s3_server.sh and tools/hdfs_server.sh (sourced, not run): free ports, the
# owner token and state directory a server belongs to, start, stop, status. Each script
# sets NAME, DIR, OWNER, PORT_VARS, GRPC_OFFSET, START_TICKS and the functions main_url,
# log_tail, after_stop and install_check (and its own launch/ready) before calling these.

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
