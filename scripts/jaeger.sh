#!/usr/bin/env bash
# Jaeger v2 (the trace store built on the OpenTelemetry Collector) on this machine's
# loopback, for the OTLP export's round-trip tests: built once per version from its Go
# module and cached, started with in-memory storage on ports of its own, stopped by the
# pid this script wrote.
#
#   bash scripts/jaeger.sh build        # go get + go build, once per version (about 4 min)
#   bash scripts/jaeger.sh start DIR    # starts it, waits until it is ready; prints the ports
#   bash scripts/jaeger.sh stop DIR     # stops the process this script started in DIR
#
# `start` prints one line: otlp-grpc=HOST:PORT otlp-http=HOST:PORT query=URL health=URL
#
# The binary: ${RINGTRACE_CACHE:-~/.cache/ringtrace}/jaeger-VERSION, built in a private
# temporary directory and renamed into place, so two builds at once each finish with a
# whole binary. Building needs Go 1.24.6 or newer (the `go` line of the module's go.mod;
# `go get -tool` itself is Go 1.24's).
#
# Ports, from BASE = ${JAEGER_BASE_PORT:-24310}: OTLP gRPC BASE+7, OTLP HTTP BASE+8, the
# query API BASE+6 (HTTP) and BASE+5 (gRPC), health BASE+3 (`/status`, the healthcheckv2
# extension's default path: 200 once every component reports OK, 503 while starting);
# all on 127.0.0.1. `start` refuses to run when any of them already accepts connections
# (a Jaeger left running, or anything else), and is ready when the health endpoint
# answers 200, both OTLP ports accept connections and the query API answers. Jaeger
# traces itself by default (`jaeger_query`'s `enable_tracing`, sent to 127.0.0.1:4317):
# that and its metrics are turned off here, so it sends nothing anywhere, listens on no
# other port, and its store holds only what a test sent.
set -euo pipefail

VERSION=v1.76.0
GO_NEEDED=1.24.6
MODULE=github.com/jaegertracing/jaeger
CACHE=${RINGTRACE_CACHE:-$HOME/.cache/ringtrace}
BIN=$CACHE/jaeger-$VERSION
BASE=${JAEGER_BASE_PORT:-24310}
HOST=127.0.0.1
PORTS="$((BASE + 3)) $((BASE + 5)) $((BASE + 6)) $((BASE + 7)) $((BASE + 8))"
READY_SECONDS=120

die() {
  echo "jaeger.sh: $*" >&2
  exit 1
}

# Seconds since boot, with hundredths: a monotonic clock for deadlines.
now() { awk '{print $1}' /proc/uptime; }
deadline() { awk -v s="$1" -v n="$(now)" 'BEGIN { printf "%.2f", n + s }'; }
# Whether monotonic time $1 has passed.
passed() { awk -v d="$1" -v n="$(now)" 'BEGIN { exit !(n >= d) }'; }

# Whether something accepts TCP connections on 127.0.0.1:$1.
listening() { timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$1" 2>/dev/null; }

# Whether pid $1 is a live process (a zombie left unreaped counts as gone).
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# Fails with one line unless `go` is at least the version Jaeger's go.mod declares.
need_go() {
  command -v go >/dev/null ||
    die "building Jaeger $VERSION needs Go $GO_NEEDED or newer, and no 'go' is on PATH"
  local have v
  have=$(go env GOVERSION 2>/dev/null) ||
    die "building Jaeger $VERSION needs Go $GO_NEEDED or newer; 'go env GOVERSION' failed (Go older than 1.16?)"
  v=${have#go}
  v=${v%%[!0-9.]*} # go1.25rc1 -> 1.25
  [ -n "$v" ] && printf '%s\n%s\n' "$GO_NEEDED" "$v" | sort -V -C ||
    die "building Jaeger $VERSION needs Go $GO_NEEDED or newer (its go.mod); 'go' here is $have"
}

build() {
  [ -x "$BIN" ] && return 0
  need_go
  mkdir -p "$CACHE"
  # In the cache's directory, so that the final rename stays on one file system.
  local dir
  dir=$(mktemp -d "$CACHE/.jaeger-$VERSION-build.XXXXXX")
  # shellcheck disable=SC2064 # the path is fixed now
  trap "rm -rf '$dir'" EXIT
  (
    cd "$dir"
    go mod init jaeger-build >/dev/null 2>&1
    go get -tool "$MODULE/cmd/jaeger@$VERSION" >/dev/null
    go build -o "$dir/jaeger" "$MODULE/cmd/jaeger"
  ) || die "building Jaeger $VERSION failed"
  # A rename: whoever starts the binary sees either none or a whole one.
  mv -f "$dir/jaeger" "$BIN"
  rm -rf "$dir"
  trap - EXIT
}

config() {
  cat <<YAML
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    # On by default in v2: the query service's own spans, sent over OTLP to
    # 127.0.0.1:4317 (whatever listens there), and a 10 s flush at shutdown when
    # nothing does.
    enable_tracing: false
    storage:
      traces: memstore
    http:
      endpoint: $HOST:$((BASE + 6))
    grpc:
      endpoint: $HOST:$((BASE + 5))
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  healthcheckv2:
    use_v2: true
    http:
      endpoint: $HOST:$((BASE + 3))
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: $HOST:$((BASE + 7))
      http:
        endpoint: $HOST:$((BASE + 8))
processors:
  batch:
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
YAML
}

# DIR as an absolute path without symlinks (it need not exist yet), so that `start` and
# `stop` name the same config file whatever form DIR was given in.
canonical() { realpath -m "$1"; }

# Whether pid $1 is the Jaeger this script started in DIR $2: its executable is the
# cached binary (both sides with symlinks resolved; " (deleted)" when a newer build was
# renamed over it since) and its command line names DIR's config.
is_ours() {
  local exe want
  exe=$(readlink -f "/proc/$1/exe" 2>/dev/null) || return 1
  exe=${exe% (deleted)}
  want=$(readlink -f "$BIN") || return 1
  [ "$exe" = "$want" ] || return 1
  tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -qxF "$2/config.yaml"
}

# Whether the Jaeger started with pid $1 serves: health 200, OTLP ports open, query API up.
ready() {
  curl -fsS -o /dev/null "http://$HOST:$((BASE + 3))/status" 2>/dev/null &&
    listening $((BASE + 7)) && listening $((BASE + 8)) &&
    curl -fsS -o /dev/null "http://$HOST:$((BASE + 6))/api/services" 2>/dev/null
}

start() {
  local dir pid p
  dir=$(canonical "$1")
  build
  if [ -f "$dir/pid" ]; then
    pid=$(cat "$dir/pid")
    alive "$pid" && is_ours "$pid" "$dir" &&
      die "a Jaeger started in $dir is still running (pid $pid): 'jaeger.sh stop $dir' first"
  fi
  for p in $PORTS; do
    ! listening "$p" ||
      die "$HOST:$p already accepts connections (a Jaeger left running? 'ss -ltnp sport = :$p' names it):" \
        "stop it, or set JAEGER_BASE_PORT"
  done
  mkdir -p "$dir"
  config >"$dir/config.yaml"
  "$BIN" --config "$dir/config.yaml" >"$dir/jaeger.log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/pid"
  local limit
  limit=$(deadline $READY_SECONDS)
  until ready; do
    if ! alive "$pid"; then
      tail -20 "$dir/jaeger.log" >&2
      die "Jaeger exited while starting (log: $dir/jaeger.log)"
    fi
    if passed "$limit"; then
      tail -20 "$dir/jaeger.log" >&2
      stop "$dir"
      die "Jaeger was not ready in $READY_SECONDS s (health, OTLP ports, query API; log: $dir/jaeger.log)"
    fi
    sleep 0.2
  done
  echo "otlp-grpc=$HOST:$((BASE + 7)) otlp-http=$HOST:$((BASE + 8))" \
    "query=http://$HOST:$((BASE + 6)) health=http://$HOST:$((BASE + 3))/status"
}

stop() {
  local dir pid
  dir=$(canonical "$1")
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid")
  if alive "$pid" && is_ours "$pid" "$dir"; then
    kill -TERM "$pid" 2>/dev/null || true
    local limit
    limit=$(deadline 30)
    while alive "$pid" && ! passed "$limit"; do sleep 0.2; done
    if alive "$pid" && is_ours "$pid" "$dir"; then
      kill -KILL "$pid" 2>/dev/null || true
      limit=$(deadline 10)
      while alive "$pid" && ! passed "$limit"; do sleep 0.2; done
    fi
    alive "$pid" && die "Jaeger (pid $pid) did not exit"
  fi
  rm -f "$dir/pid"
}

case "${1:-}" in
  build) build ;;
  start) start "${2:?usage: jaeger.sh start DIR}" ;;
  stop) stop "${2:?usage: jaeger.sh stop DIR}" ;;
  *) die "usage: jaeger.sh build | start DIR | stop DIR" ;;
esac
