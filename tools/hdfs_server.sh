#!/usr/bin/env bash
# recio's HDFS test server: Apache Hadoop 2.7.3 NameNode + DataNode (with WebHDFS) on 127.0.0.1,
# built only from registry packages:
#   * PyPI   pyspark==2.4.8 sdist (220 MB, cached): deps/jars/ carries hadoop-hdfs-2.7.3.jar (NameNode,
#            DataNode), hadoop-common/auth 2.7.3, jetty 6, protobuf 2.5, guava 14, ...
#   * Debian libjersey1-{core,server,servlet}-java + libjsr311-api-java (WebHDFS needs Jersey 1)
#   * Debian OpenJDK 17 (installed by apt when `java` is missing)
#
# usage: tools/hdfs_server.sh install | start | status | stop | clean
# env:   RECIO_SERVERS_DIR  install + data root (default ~/.cache/recio-servers); the sdist is
#                           cached in $RECIO_SERVERS_DIR/downloads and reused
#        RECIO_HDFS_PORT (9000, NameNode RPC), RECIO_WEBHDFS_PORT (9870, NameNode HTTP),
#        DN_PORT (9866), DN_HTTP_PORT (9864), DN_IPC_PORT (9867)
set -euo pipefail
ROOT=${RECIO_SERVERS_DIR:-$HOME/.cache/recio-servers}
HDFS_HOME=$ROOT/hdfs273
DOWNLOADS=$ROOT/downloads
NN_RPC_PORT=${RECIO_HDFS_PORT:-9000}
NN_HTTP_PORT=${RECIO_WEBHDFS_PORT:-9870}
DN_PORT=${DN_PORT:-9866}
DN_HTTP_PORT=${DN_HTTP_PORT:-9864}
DN_IPC_PORT=${DN_IPC_PORT:-9867}
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

JAVA_OPTS="-Xmx512m -Djava.net.preferIPv4Stack=true -Dhadoop.log.dir=$HDFS_HOME/logs
 -Dhadoop.home.dir=$HDFS_HOME -Dhadoop.root.logger=INFO,console
 --add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED
 --add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED"

cp_of() { local cp="$HDFS_HOME/etc:$HDFS_HOME/res"; for j in "$HDFS_HOME"/lib/*.jar; do cp="$cp:$j"; done; echo "$cp"; }

apt_install() {
  local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get install -y -q --no-install-recommends "$@" >/dev/null 2>&1 \
    || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q --no-install-recommends "$@"; }
}

install() {
  command -v java >/dev/null || apt_install openjdk-17-jre-headless || apt_install default-jre-headless
  [ -f /usr/share/java/jersey1-servlet.jar ] || apt_install libjersey1-core-java \
    libjersey1-server-java libjersey1-servlet-java libjsr311-api-java
  mkdir -p "$HDFS_HOME"/{lib,etc,logs,data} "$DOWNLOADS"
  mkdir -p "$HDFS_HOME"/res/webapps/{hdfs,datanode,secondary,static}
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
  local j d; for j in $DEBIAN_JARS; do ln -sf "$j" "$HDFS_HOME/lib/"; done
  for d in hdfs datanode secondary; do
    echo "<html>$d</html>" > "$HDFS_HOME/res/webapps/$d/index.html"
  done
  cat > "$HDFS_HOME/etc/core-site.xml" <<XML
<configuration>
 <property><name>fs.defaultFS</name><value>hdfs://127.0.0.1:$NN_RPC_PORT</value></property>
 <property><name>hadoop.tmp.dir</name><value>$HDFS_HOME/data/tmp</value></property>
 <property><name>hadoop.http.staticuser.user</name><value>root</value></property>
</configuration>
XML
  cat > "$HDFS_HOME/etc/hdfs-site.xml" <<XML
<configuration>
 <property><name>dfs.replication</name><value>1</value></property>
 <property><name>dfs.namenode.name.dir</name><value>file://$HDFS_HOME/data/nn</value></property>
 <property><name>dfs.datanode.data.dir</name><value>file://$HDFS_HOME/data/dn</value></property>
 <property><name>dfs.namenode.rpc-address</name><value>127.0.0.1:$NN_RPC_PORT</value></property>
 <property><name>dfs.namenode.http-address</name><value>127.0.0.1:$NN_HTTP_PORT</value></property>
 <property><name>dfs.namenode.secondary.http-address</name><value>127.0.0.1:0</value></property>
 <property><name>dfs.datanode.address</name><value>127.0.0.1:$DN_PORT</value></property>
 <property><name>dfs.datanode.http.address</name><value>127.0.0.1:$DN_HTTP_PORT</value></property>
 <property><name>dfs.datanode.ipc.address</name><value>127.0.0.1:$DN_IPC_PORT</value></property>
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
  cat > "$HDFS_HOME/etc/log4j.properties" <<'PROPS'
log4j.rootLogger=INFO,console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
PROPS
  echo "HDFS installed in $HDFS_HOME ($(ls "$HDFS_HOME/lib" | wc -l) jars)"
}

ready() {
  local jmx="http://127.0.0.1:$NN_HTTP_PORT/jmx?qry=Hadoop:service=NameNode,name="
  curl -sf -m 2 "${jmx}FSNamesystemState" | grep -q '"NumLiveDataNodes" : 1' \
    && curl -sf -m 2 "http://127.0.0.1:$NN_HTTP_PORT/webhdfs/v1/?op=GETFILESTATUS&user.name=root" >/dev/null \
    && ! curl -sf -m 2 "${jmx}NameNodeInfo" | grep -q '"Safemode" : "Safe'
}

start() {
  if ready; then echo "HDFS already running: hdfs://127.0.0.1:$NN_RPC_PORT"; return 0; fi
  [ -f "$HDFS_HOME/lib/hadoop-hdfs-2.7.3.jar" ] && [ -f "$HDFS_HOME/etc/hdfs-site.xml" ] || install
  local CP; CP=$(cp_of)
  if [ ! -d "$HDFS_HOME/data/nn/current" ]; then
    # shellcheck disable=SC2086
    java $JAVA_OPTS -cp "$CP" org.apache.hadoop.hdfs.server.namenode.NameNode -format -force \
      -nonInteractive > "$HDFS_HOME/logs/format.log" 2>&1 || { tail -20 "$HDFS_HOME/logs/format.log"; exit 1; }
  fi
  local p
  for p in namenode datanode; do
    local cls=org.apache.hadoop.hdfs.server.namenode.NameNode
    [ $p = datanode ] && cls=org.apache.hadoop.hdfs.server.datanode.DataNode
    # shellcheck disable=SC2086
    setsid java $JAVA_OPTS -cp "$CP" $cls > "$HDFS_HOME/logs/$p.log" 2>&1 < /dev/null &
    echo $! > "$HDFS_HOME/$p.pid"
  done
  local i
  for i in $(seq 1 600); do
    if ready; then
      echo "HDFS ready after $((i / 5)).$((i % 5 * 2))s: hdfs://127.0.0.1:$NN_RPC_PORT" \
        "webhdfs://127.0.0.1:$NN_HTTP_PORT"
      return 0
    fi
    for p in namenode datanode; do
      kill -0 "$(cat "$HDFS_HOME/$p.pid")" 2>/dev/null \
        || { echo "$p died"; tail -30 "$HDFS_HOME/logs/$p.log"; stop; exit 1; }
    done
    sleep 0.2
  done
  echo "HDFS not ready after 120s"; tail -20 "$HDFS_HOME"/logs/{namenode,datanode}.log; stop; exit 1
}

status() {
  if ready; then echo "HDFS running: hdfs://127.0.0.1:$NN_RPC_PORT"; else echo "HDFS not running"; return 1; fi
}

stop() {
  local p pid
  for p in datanode namenode; do
    [ -f "$HDFS_HOME/$p.pid" ] || continue
    pid=$(cat "$HDFS_HOME/$p.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$HDFS_HOME/$p.pid"
  done
}

clean() { stop; rm -rf "$HDFS_HOME/data"; }

case "${1:-start}" in
  install | start | status | stop | clean) "${1:-start}" ;;
  *) echo "usage: $0 install|start|status|stop|clean" >&2; exit 2 ;;
esac
