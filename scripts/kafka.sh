#!/usr/bin/env bash
# A three-node Apache Kafka cluster on this machine's loopback, from Kafka's own release
# jars on Maven Central: a real cluster for trying delivery into Kafka by hand and for
# tests, started and stopped by the pids it wrote. On the 2-core VM it starts in about
# 13 s (and a first Maven resolve) and takes about 300 MB a node.
#
#   bash scripts/kafka.sh start DIR   # fetch (once), format, start; prints the brokers
#                                     # (a DIR of a stopped cluster: starts it on its data)
#   bash scripts/kafka.sh stop DIR    # stops the nodes this script started in DIR
#   bash scripts/kafka.sh brokers     # the bootstrap list, host:port,...
#   bash scripts/kafka.sh topic NAME [PARTITIONS]  # a topic replicated 3 times
#   bash scripts/kafka.sh kill DIR NODE   # SIGKILLs node 1, 2 or 3 (a crash)
#   bash scripts/kafka.sh revive DIR NODE...  # starts them again on their data
#
# Kafka 4.x runs in KRaft mode only (no ZooKeeper): each node is broker and controller
# (`process.roles=broker,controller`), the three a static controller quorum. Replication
# factor 3 and `min.insync.replicas=2` everywhere, internal topics included, so a
# producer with `acks=all` keeps going with one node down and stops with two (checked:
# `kcat -P -X enable.idempotence=true -X acks=all` wrote 1,000 lines with node 1
# SIGKILLed, and all 2,000 of the topic were read back).
#
# The jars' classpath is resolved by Maven once per version and kept under
# ${RINGTRACE_CACHE:-~/.cache/ringtrace}/kafka-VERSION (the jars themselves in ~/.m2).
# Ports: node i (1 to 3) listens on BASE+2i (clients) and BASE+2i+1 (controllers),
# BASE = ${KAFKA_BASE_PORT:-19090}. Nodes are stopped by the pids this script wrote in
# DIR/pids, each checked to still be that node's java before it is signalled; never by
# name.
set -euo pipefail

VERSION=4.1.1
LOG4J=2.24.3
NODES=3
BASE=${KAFKA_BASE_PORT:-19090}
CACHE=${RINGTRACE_CACHE:-$HOME/.cache/ringtrace}/kafka-$VERSION

die() {
  echo "kafka.sh: $*" >&2
  exit 1
}

# Seconds since boot, with hundredths: a monotonic clock for deadlines.
now() { awk '{print $1}' /proc/uptime; }
# Whether monotonic time $1 has passed.
passed() { awk -v d="$1" -v n="$(now)" 'BEGIN { exit !(n >= d) }'; }
deadline() { awk -v s="$1" -v n="$(now)" 'BEGIN { printf "%.2f", n + s }'; }

client_port() { echo $((BASE + 2 * $1)); }
controller_port() { echo $((BASE + 2 * $1 + 1)); }

brokers() {
  local i out=""
  for i in $(seq 1 $NODES); do out+="${out:+,}127.0.0.1:$(client_port "$i")"; done
  echo "$out"
}

# Whether something accepts TCP connections on 127.0.0.1:$1.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The classpath of Kafka's broker, its command-line tools (`TopicCommand`) and a log4j binding for the slf4j 1.7 API it pulls
# (`log4j-slf4j-impl`; the slf4j 2 binding finds no 2.x API and the broker then logs
# nothing), resolved once per set of dependencies.
classpath() {
  local pom
  pom=$(
    cat <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>ringtrace.test</groupId>
  <artifactId>kafka-classpath</artifactId>
  <version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J</version></dependency>
  </dependencies>
</project>
EOF
  )
  if [ -s "$CACHE/cp.txt" ] && [ "$(cat "$CACHE/pom.xml" 2>/dev/null)" = "$pom" ]; then
    cat "$CACHE/cp.txt"
    return
  fi
  command -v mvn >/dev/null || die "mvn not found: Maven resolves Kafka's jars from Maven Central"
  mkdir -p "$CACHE"
  rm -f "$CACHE/cp.txt"
  echo "$pom" >"$CACHE/pom.xml"
  echo "== resolving Apache Kafka $VERSION's jars with Maven (once; cached in $CACHE)" >&2
  (cd "$CACHE" && mvn -q -B -Dstyle.color=never dependency:build-classpath -Dmdep.outputFile=cp.tmp >mvn.log 2>&1) ||
    die "Maven could not resolve org.apache.kafka:kafka_2.13:$VERSION ($CACHE/mvn.log)"
  mv "$CACHE/cp.tmp" "$CACHE/cp.txt"
  cat "$CACHE/cp.txt"
}

write_config() {
  local dir=$1 i=$2 voters="" j
  for j in $(seq 1 $NODES); do voters+="${voters:+,}$j@127.0.0.1:$(controller_port "$j")"; done
  mkdir -p "$dir/node$i/data"
  cat >"$dir/node$i/server.properties" <<EOF
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(client_port "$i"),CONTROLLER://127.0.0.1:$(controller_port "$i")
advertised.listeners=PLAINTEXT://127.0.0.1:$(client_port "$i")
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/node$i/data
num.partitions=6
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
EOF
  cat >"$dir/node$i/log4j2.properties" <<EOF
appender.file.type=File
appender.file.name=file
appender.file.fileName=$dir/node$i/server.log
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=WARN
rootLogger.appenderRef.file.ref=file
EOF
}

# Whether pid $1 is still the java of node directory $2.
is_node() {
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q -- "$2/server.properties"
}

# Starts node $2 of cluster directory $1 (configured and formatted) with classpath $3;
# its pid in LAUNCHED.
launch() {
  local dir=$1 i=$2 cp=$3
  # C1 JIT only and a small heap: three JVMs start on two cores in seconds.
  KAFKA_NODE=$i nohup java -Xms128m -Xmx512m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
    -Dlog4j2.configurationFile="$dir/node$i/log4j2.properties" \
    -cp "$cp" kafka.Kafka "$dir/node$i/server.properties" >>"$dir/node$i/stdout.log" 2>&1 &
  LAUNCHED=$!
}

# The pid line of node $2 in $1/pids: "PID NODEDIR".
node_line() { sed -n "${2}p" "$1/pids"; }

# SIGKILLs node $2 of the cluster in $1 (a crash: no controlled shutdown).
kill_node() {
  local dir=$1 i=$2 pid node
  [ -e "$dir/pids" ] || die "$dir/pids: no cluster started in $dir"
  read -r pid node <<<"$(node_line "$dir" "$i")"
  [ -n "${pid:-}" ] || die "no node $i in $dir/pids"
  is_node "$pid" "$node" || die "node $i (pid $pid) is not running"
  kill -KILL "$pid"
  while is_node "$pid" "$node"; do sleep 0.05; done
}

# Once every node answers on its port: waits until the cluster answers metadata
# requests with all of its brokers registered (Kafka's own tool, a JVM a try: a few
# seconds each), with classpath $1, until monotonic deadline $2; fails after it.
registered() {
  until java -cp "$1" org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$(brokers)" 2>/dev/null |
    grep -c "^127.0.0.1:" | grep -qx "$NODES"; do
    passed "$2" && return 1
    sleep 0.5
  done
}

# Starts nodes $2... of the cluster in $1 again, on their data, and waits until they
# listen. Nodes that must form the controller quorum together (two of three are needed)
# are revived in one call: each is launched before any is waited for.
revive_nodes() {
  local dir=$1 i pid node limit cp
  shift
  [ -e "$dir/pids" ] || die "$dir/pids: no cluster started in $dir"
  cp=$(classpath)
  for i in "$@"; do
    read -r pid node <<<"$(node_line "$dir" "$i")"
    [ -n "${node:-}" ] || die "no node $i in $dir/pids"
    is_node "$pid" "$node" && die "node $i (pid $pid) is running"
    launch "$dir" "$i" "$cp"
    sed -i "${i}s|.*|$LAUNCHED $node|" "$dir/pids"
  done
  limit=$(deadline "${KAFKA_START_TIMEOUT:-120}")
  for i in "$@"; do
    read -r pid node <<<"$(node_line "$dir" "$i")"
    until listening "$(client_port "$i")"; do
      is_node "$pid" "$node" || die "node $i exited while starting: $(tail -5 "$node/server.log" 2>/dev/null)"
      passed "$limit" && die "node $i did not listen on port $(client_port "$i") in ${KAFKA_START_TIMEOUT:-120} s"
      sleep 0.2
    done
  done
  registered "$cp" "$limit" || die "the cluster did not register its $NODES brokers in ${KAFKA_START_TIMEOUT:-120} s"
}

start() {
  local dir=$1 cp id i
  [ -e "$dir/pids" ] && die "$dir/pids exists: a cluster of this directory may be running (kafka.sh stop $dir)"
  command -v java >/dev/null || die "java not found: Kafka $VERSION needs Java 17 or newer"
  for i in $(seq 1 $NODES); do
    listening "$(client_port "$i")" && die "port $(client_port "$i") is taken: set KAFKA_BASE_PORT"
    listening "$(controller_port "$i")" && die "port $(controller_port "$i") is taken: set KAFKA_BASE_PORT"
  done
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  cp=$(classpath)
  # A directory whose nodes were all formatted before holds a stopped cluster: it starts
  # again on its data. Otherwise every node is formatted afresh.
  local formatted=yes
  for i in $(seq 1 $NODES); do
    [ -e "$dir/node$i/data/meta.properties" ] || formatted=no
  done
  if [ $formatted = no ]; then
    id=$(java -cp "$cp" kafka.tools.StorageTool random-uuid)
    for i in $(seq 1 $NODES); do
      rm -rf "$dir/node$i/data"
      write_config "$dir" "$i"
      java -cp "$cp" kafka.tools.StorageTool format -t "$id" -c "$dir/node$i/server.properties" >"$dir/node$i/format.log" 2>&1 ||
        die "formatting node $i failed: $(cat "$dir/node$i/format.log")"
    done
  fi
  : >"$dir/pids"
  for i in $(seq 1 $NODES); do
    launch "$dir" "$i" "$cp"
    echo "$LAUNCHED $dir/node$i" >>"$dir/pids"
  done
  local limit
  limit=$(deadline "${KAFKA_START_TIMEOUT:-120}")
  for i in $(seq 1 $NODES); do
    until listening "$(client_port "$i")"; do
      local pid
      pid=$(sed -n "${i}p" "$dir/pids" | cut -d' ' -f1)
      if ! is_node "$pid" "$dir/node$i"; then
        stop "$dir" >/dev/null 2>&1 || true
        die "node $i exited while starting: $(tail -5 "$dir/node$i/server.log" "$dir/node$i/stdout.log" 2>/dev/null)"
      fi
      if passed "$limit"; then
        stop "$dir" >/dev/null 2>&1 || true
        die "node $i did not listen on port $(client_port "$i") in ${KAFKA_START_TIMEOUT:-120} s"
      fi
      sleep 0.2
    done
  done
  if ! registered "$cp" "$limit"; then
    stop "$dir" >/dev/null 2>&1 || true
    die "the cluster did not register its $NODES brokers in ${KAFKA_START_TIMEOUT:-120} s"
  fi
  brokers
}

# Creates topic $1 with ${2:-6} partitions, replication factor 3, min.insync.replicas 2.
topic() {
  java -cp "$(classpath)" org.apache.kafka.tools.TopicCommand --bootstrap-server "$(brokers)" --create \
    --topic "$1" --partitions "${2:-6}" --replication-factor "$NODES" --config min.insync.replicas=2
}

stop() {
  local dir=$1 pid node limit
  [ -e "$dir/pids" ] || return 0
  while read -r pid node; do
    is_node "$pid" "$node" && kill -TERM "$pid" 2>/dev/null || true
  done <"$dir/pids"
  limit=$(deadline "${KAFKA_STOP_TIMEOUT:-30}")
  while read -r pid node; do
    while is_node "$pid" "$node" && ! passed "$limit"; do sleep 0.2; done
    if is_node "$pid" "$node"; then
      echo "kafka.sh: node $node did not stop in ${KAFKA_STOP_TIMEOUT:-30} s: SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done <"$dir/pids"
  rm -f "$dir/pids"
}

case "${1:-}" in
  start) start "${2:?usage: kafka.sh start DIR}" ;;
  stop) stop "${2:?usage: kafka.sh stop DIR}" ;;
  brokers) brokers ;;
  topic) topic "${2:?usage: kafka.sh topic NAME [PARTITIONS]}" "${3:-6}" ;;
  classpath) classpath ;;
  kill) kill_node "${2:?usage: kafka.sh kill DIR NODE}" "${3:?usage: kafka.sh kill DIR NODE}" ;;
  revive) revive_nodes "${2:?usage: kafka.sh revive DIR NODE...}" "${@:3}" ;;
  *) die "usage: kafka.sh start DIR | stop DIR | kill DIR NODE | revive DIR NODE... | brokers | topic NAME [PARTITIONS] | classpath" ;;
esac
