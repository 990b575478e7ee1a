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

# --- ports, ownership, start/stop: tools/server_common.sh ---------------------------------------

# shellcheck source=tools/server_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/server_common.sh"


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

# The DataNode registers as host 127.0.0.2 (another loopback address) while its transfer port
# listens on 127.0.0.1, the address the NameNode hands out: clients reach it directly, and a
# client with dfs.client.use.datanode.hostname=true goes to 127.0.0.2:<that port>, where a
# test's delay proxy can listen (tests/delayproxy.py). WebHDFS redirects to the host name,
# so the DataNode's HTTP port listens on 127.0.0.2.
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
 <property><name>dfs.datanode.http.address</name><value>127.0.0.2:$RECIO_HDFS_DN_HTTP_PORT</value></property>
 <property><name>dfs.datanode.ipc.address</name><value>127.0.0.1:$RECIO_HDFS_DN_IPC_PORT</value></property>
 <property><name>dfs.datanode.hostname</name><value>127.0.0.2</value></property>
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
