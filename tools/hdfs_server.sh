#!/usr/bin/env bash
# recio's HDFS test server: Apache Hadoop 2.7.3 NameNode + DataNode (with WebHDFS) on 127.0.0.1,
# built only from registry packages:
#   * PyPI   pyspark==2.4.8 sdist (220 MB, cached): deps/jars/ carries hadoop-hdfs-2.7.3.jar (NameNode,
#            DataNode), hadoop-common/auth 2.7.3, jetty 6, protobuf 2.5, guava 14, ...
#   * Debian libjersey1-{core,server,servlet}-java + libjsr311-api-java (WebHDFS needs Jersey 1)
#   * Debian OpenJDK 17 (installed by apt when `java` is missing)
#
# usage: tools/hdfs_server.sh install | start | status | owns | stop | clean
#   (start, owns, stop, clean: as in tools/s3_server.sh -- stop stops only what this owner
#   started from this state dir)
# env:   RECIO_SERVERS_DIR    install cache (default ~/.cache/recio-servers): jars, the sdist in
#                             downloads/; shared by all runs
#        RECIO_SERVERS_STATE  state root (default $RECIO_SERVERS_DIR/state): config, data, logs,
#                             pids, owner and ports of this server in $RECIO_SERVERS_STATE/hdfs
#        RECIO_SERVERS_OWNER  owner token written at start and required by stop (default "default")
#        RECIO_HDFS_PORT (9000, NameNode RPC), RECIO_WEBHDFS_PORT (9870, NameNode HTTP),
#        RECIO_HDFS_DN_PORT (9866), RECIO_HDFS_DN_HTTP_PORT (9864), RECIO_HDFS_DN_IPC_PORT (9867):
#                             a number, or "auto" for a free one
#        RECIO_SERVERS_PORTS=auto  every port not given is picked free; recorded in the state dir
#                             (ports.env) and reused by its later starts
set -euo pipefail
ROOT=${RECIO_SERVERS_DIR:-$HOME/.cache/recio-servers}
HDFS_HOME=$ROOT/hdfs273
DOWNLOADS=$ROOT/downloads
STATE=$(realpath -m "${RECIO_SERVERS_STATE:-$ROOT/state}")
DIR=$STATE/hdfs
OWNER=${RECIO_SERVERS_OWNER:-default}
# the names before RECIO_HDFS_DN_*
RECIO_HDFS_DN_PORT=${RECIO_HDFS_DN_PORT:-${DN_PORT:-}}
RECIO_HDFS_DN_HTTP_PORT=${RECIO_HDFS_DN_HTTP_PORT:-${DN_HTTP_PORT:-}}
RECIO_HDFS_DN_IPC_PORT=${RECIO_HDFS_DN_IPC_PORT:-${DN_IPC_PORT:-}}
PORT_VARS="RECIO_HDFS_PORT:9000 RECIO_WEBHDFS_PORT:9870 RECIO_HDFS_DN_PORT:9866
 RECIO_HDFS_DN_HTTP_PORT:9864 RECIO_HDFS_DN_IPC_PORT:9867"
GRPC_OFFSET=0
NAME=HDFS
SDIST=$DOWNLOADS/pyspark-2.4.8.tar.gz

JARS_FROM_PYSPARK="hadoop-common-2.7.3 hadoop-hdfs-2.7.3 hadoop-auth-2.7.3 hadoop-annotations-2.7.3
 guava-14.0.1 protobuf-java-2.5.0 commons-cli-1.2 commons-codec-1.10 commons-collections-3.2.2
 commons-configuration-1.6 commons-lang-2.6 commons-logging-1.1.3 commons-io-2.4 commons-math3-3.4.1
 commons-net-3.1 commons-compress-1.20 commons-beanutils-1.9.4 commons-digester-1.8
 log4j-1.2.17 slf4j-api-1.7.16 slf4j-log4j12-1.7.16 htrace-core-3.1.0-incubating
 jetty-6.1.26 jetty-util-6.1.26 javax.servlet-api-3.1.0 jackson-core-asl-1.9.13
 jackson-mapper-asl-1.9.13 jackson-jaxrs-1.9.13 jackson-xc-1.9.13 netty-3.9.9.Final
 netty-all-4.1.47.Final xmlenc-0.52 xercesImpl-2.9.1 leveldbjni-all-1.8 jsr305-1.3.9 gson-2.2.4
 httpclient-4.5.6 httpcore-4.4.10 zookeeper-3.4.6 avro-1.8.2 paranamer-2.8 xz-1.5 snappy-java-1.1.8.2
 commons-httpclient-3.1 activation-1.1.1 jaxb-api-2.2.2 stax-api-1.0-2
 apacheds-i18n-2.0.0-M15 apacheds-kerberos-codec-2.0.0-M15 api-asn1-api-1.0.0-M20 api-util-1.0.0-M20"
DEBIAN_JARS="/usr/share/java/jersey1-core.jar /usr/share/java/jersey1-server.jar
 /usr/share/java/jersey1-servlet.jar /usr/share/java/jsr311-api.jar"

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

# --- Hadoop --------------------------------------------------------------------------------------

START_TICKS=600  # 120 s
main_url() { echo "hdfs://127.0.0.1:$RECIO_HDFS_PORT"; }
urls() { echo "RECIO_HDFS_URL=$(main_url)"; echo "RECIO_WEBHDFS_URL=webhdfs://127.0.0.1:$RECIO_WEBHDFS_PORT"; }
log_tail() { local p; for p in namenode datanode; do echo "--- $p"; tail -15 "$DIR/logs/$p.log"; done; }
after_stop() { :; }
install_check() { [ -f "$HDFS_HOME/lib/hadoop-hdfs-2.7.3.jar" ] && [ -f "$HDFS_HOME/res/webapps/hdfs/index.html" ]; }

# -Drecio.state first: the state dir in each JVM's command line is what `ours` checks; Jetty's
# temporary folders go to the state dir too.
java_opts() {
  echo "-Drecio.state=$DIR/ -Xmx512m -Djava.net.preferIPv4Stack=true -Dhadoop.log.dir=$DIR/logs
 -Djava.io.tmpdir=$DIR/tmp
 -Dhadoop.home.dir=$HDFS_HOME -Dhadoop.root.logger=INFO,console
 --add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED
 --add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED"
}

cp_of() { local cp="$DIR/etc:$HDFS_HOME/res" j; for j in "$HDFS_HOME"/lib/*.jar; do cp="$cp:$j"; done; echo "$cp"; }

apt_install() {
  local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get install -y -q --no-install-recommends "$@" >/dev/null 2>&1 \
    || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q --no-install-recommends "$@"; }
}

install() {
  command -v java >/dev/null || apt_install openjdk-17-jre-headless || apt_install default-jre-headless
  [ -f /usr/share/java/jersey1-servlet.jar ] || apt_install libjersey1-core-java \
    libjersey1-server-java libjersey1-servlet-java libjsr311-api-java
  mkdir -p "$HDFS_HOME" "$DOWNLOADS"
  (
    flock 9  # runs that start at once share one install
    mkdir -p "$HDFS_HOME/lib" "$HDFS_HOME"/res/webapps/{hdfs,datanode,secondary,static}
    if [ ! -f "$HDFS_HOME/lib/hadoop-hdfs-2.7.3.jar" ]; then
      local tmp; tmp=$(mktemp -d)
      if [ ! -f "$SDIST" ]; then
        # pyspark 2.4.8's setup.py breaks under pip's isolated build: old setuptools, no isolation.
        python3 -m venv "$tmp/venv"
        "$tmp/venv/bin/pip" install -q "setuptools<70" wheel
        "$tmp/venv/bin/pip" download -q --no-deps --no-build-isolation -d "$tmp" pyspark==2.4.8
        mv "$tmp/pyspark-2.4.8.tar.gz" "$SDIST"
      fi
      local pats="" j; for j in $JARS_FROM_PYSPARK; do pats="$pats pyspark-2.4.8/deps/jars/$j.jar"; done
      # shellcheck disable=SC2086
      tar xzf "$SDIST" -C "$tmp" $pats
      mv "$tmp"/pyspark-2.4.8/deps/jars/*.jar "$HDFS_HOME/lib/"
      rm -rf "$tmp"
    fi
    local j d
    for j in $DEBIAN_JARS; do [ -e "$HDFS_HOME/lib/$(basename "$j")" ] || ln -s "$j" "$HDFS_HOME/lib/"; done
    for d in hdfs datanode secondary; do
      [ -f "$HDFS_HOME/res/webapps/$d/index.html" ] || echo "<html>$d</html>" > "$HDFS_HOME/res/webapps/$d/index.html"
    done
  ) 9> "$HDFS_HOME/.install.lock"
  echo "HDFS installed in $HDFS_HOME ($(ls "$HDFS_HOME/lib" | wc -l) jars)"
}

configure() { # this instance's config (its ports, its data dir), in the state dir
  mkdir -p "$DIR"/{etc,logs,data,tmp}
  cat > "$DIR/etc/core-site.xml" <<XML
<configuration>
 <property><name>fs.defaultFS</name><value>hdfs://127.0.0.1:$RECIO_HDFS_PORT</value></property>
 <property><name>hadoop.tmp.dir</name><value>$DIR/data/tmp</value></property>
 <property><name>hadoop.http.staticuser.user</name><value>root</value></property>
</configuration>
XML
  cat > "$DIR/etc/hdfs-site.xml" <<XML
<configuration>
 <property><name>dfs.replication</name><value>1</value></property>
 <property><name>dfs.namenode.name.dir</name><value>file://$DIR/data/nn</value></property>
 <property><name>dfs.datanode.data.dir</name><value>file://$DIR/data/dn</value></property>
 <property><name>dfs.namenode.rpc-address</name><value>127.0.0.1:$RECIO_HDFS_PORT</value></property>
 <property><name>dfs.namenode.http-address</name><value>127.0.0.1:$RECIO_WEBHDFS_PORT</value></property>
 <property><name>dfs.namenode.secondary.http-address</name><value>127.0.0.1:0</value></property>
 <property><name>dfs.datanode.address</name><value>127.0.0.1:$RECIO_HDFS_DN_PORT</value></property>
 <property><name>dfs.datanode.http.address</name><value>127.0.0.1:$RECIO_HDFS_DN_HTTP_PORT</value></property>
 <property><name>dfs.datanode.ipc.address</name><value>127.0.0.1:$RECIO_HDFS_DN_IPC_PORT</value></property>
 <property><name>dfs.datanode.hostname</name><value>127.0.0.1</value></property>
 <property><name>dfs.namenode.datanode.registration.ip-hostname-check</name><value>false</value></property>
 <property><name>dfs.webhdfs.enabled</name><value>true</value></property>
 <property><name>dfs.permissions.enabled</name><value>false</value></property>
 <property><name>dfs.namenode.safemode.extension</name><value>0</value></property>
 <property><name>dfs.namenode.safemode.min.datanodes</name><value>0</value></property>
 <property><name>dfs.heartbeat.interval</name><value>1</value></property>
 <property><name>dfs.namenode.heartbeat.recheck-interval</name><value>5000</value></property>
 <property><name>dfs.blocksize</name><value>134217728</value></property>
</configuration>
XML
  cat > "$DIR/etc/log4j.properties" <<'PROPS'
log4j.rootLogger=INFO,console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
PROPS
}

ready() {
  local jmx="http://127.0.0.1:$RECIO_WEBHDFS_PORT/jmx?qry=Hadoop:service=NameNode,name="
  curl -sf -m 2 "${jmx}FSNamesystemState" | grep -q '"NumLiveDataNodes" : 1' \
    && curl -sf -m 2 "http://127.0.0.1:$RECIO_WEBHDFS_PORT/webhdfs/v1/?op=GETFILESTATUS&user.name=root" >/dev/null \
    && ! curl -sf -m 2 "${jmx}NameNodeInfo" | grep -q '"Safemode" : "Safe'
}

launch() {
  configure
  local CP opts p cls; CP=$(cp_of); opts=$(java_opts)
  if [ ! -d "$DIR/data/nn/current" ]; then
    # shellcheck disable=SC2086
    java $opts -cp "$CP" org.apache.hadoop.hdfs.server.namenode.NameNode -format -force \
      -nonInteractive > "$DIR/logs/format.log" 2>&1 || { tail -20 "$DIR/logs/format.log"; exit 1; }
  fi
  for p in namenode datanode; do
    cls=org.apache.hadoop.hdfs.server.namenode.NameNode
    [ $p = datanode ] && cls=org.apache.hadoop.hdfs.server.datanode.DataNode
    # shellcheck disable=SC2086
    setsid java $opts -cp "$CP" $cls > "$DIR/logs/$p.log" 2>&1 < /dev/null &
    echo $! > "$DIR/$p.pid"
  done
}

case "${1:-start}" in
  install | start | status | owns | stop | clean) "${1:-start}" ;;
  *) echo "usage: $0 install|start|status|owns|stop|clean" >&2; exit 2 ;;
esac
