#!/usr/bin/env bash
# Jaeger v2 (the trace store built on the OpenTelemetry Collector) on this machine's
# loopback, for the OTLP export's round-trip tests: built once per version from its Go
# module and cached, started with in-memory storage on ports of its own, stopped by the
# pid this script wrote.
#
#   bash scripts/jaeger.sh build        # go get + go build, once per version (about 4 min)
#   bash scripts/jaeger.sh start DIR    # starts it, waits for its query API; prints the ports
#   bash scripts/jaeger.sh stop DIR     # stops the process this script started in DIR
#
# The binary: ${RINGTRACE_CACHE:-~/.cache/ringtrace}/jaeger-VERSION. Ports, from
# BASE = ${JAEGER_BASE_PORT:-24310}: OTLP gRPC BASE+7, OTLP HTTP BASE+8, the query API
# BASE+6 (HTTP) and BASE+5 (gRPC), health BASE+3, its own metrics BASE+9; all on
# 127.0.0.1. Jaeger traces itself by default: its telemetry is turned off here, so the
# store holds only what a test sent.
set -euo pipefail

VERSION=v1.76.0
MODULE=github.com/jaegertracing/jaeger
CACHE=${RINGTRACE_CACHE:-$HOME/.cache/ringtrace}
BIN=$CACHE/jaeger-$VERSION
BASE=${JAEGER_BASE_PORT:-24310}

die() {
  echo "jaeger.sh: $*" >&2
  exit 1
}

build() {
  [ -x "$BIN" ] && return 0
  command -v go >/dev/null || die "go is not installed: it builds Jaeger from its module"
  local dir=$CACHE/jaeger-build-$VERSION
  mkdir -p "$dir"
  (
    cd "$dir"
    [ -f go.mod ] || go mod init jaeger-build >/dev/null 2>&1
    go get -tool "$MODULE/cmd/jaeger@$VERSION" >/dev/null
    go build -o "$BIN.partial" "$MODULE/cmd/jaeger"
  ) || die "building Jaeger $VERSION failed"
  mv "$BIN.partial" "$BIN"
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
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:$((BASE + 6))
    grpc:
      endpoint: 127.0.0.1:$((BASE + 5))
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:$((BASE + 3))
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$((BASE + 7))
      http:
        endpoint: 127.0.0.1:$((BASE + 8))
processors:
  batch:
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
YAML
}

# Whether pid $1 is the Jaeger this script starts (its executable is the cached binary).
is_ours() {
  [ "$(readlink "/proc/$1/exe" 2>/dev/null)" = "$BIN" ]
}

start() {
  local dir=$1
  build
  mkdir -p "$dir"
  config >"$dir/config.yaml"
  "$BIN" --config "$dir/config.yaml" >"$dir/jaeger.log" 2>&1 &
  echo $! >"$dir/pid"
  local deadline=$((SECONDS + 120))
  until curl -fsS "http://127.0.0.1:$((BASE + 6))/api/services" >/dev/null 2>&1; do
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      tail -20 "$dir/jaeger.log" >&2
      die "Jaeger exited while starting (log: $dir/jaeger.log)"
    fi
    [ $SECONDS -lt $deadline ] || die "Jaeger's query API did not answer in 120 s (log: $dir/jaeger.log)"
    sleep 0.2
  done
  echo "otlp=127.0.0.1:$((BASE + 7)) otlp-http=127.0.0.1:$((BASE + 8)) query=http://127.0.0.1:$((BASE + 6))"
}

stop() {
  local dir=$1
  [ -f "$dir/pid" ] || return 0
  local pid
  pid=$(cat "$dir/pid")
  if is_ours "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    is_ours "$pid" && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/pid"
}

case "${1:-}" in
  build) build ;;
  start) start "${2:?usage: jaeger.sh start DIR}" ;;
  stop) stop "${2:?usage: jaeger.sh stop DIR}" ;;
  *) die "usage: jaeger.sh build | start DIR | stop DIR" ;;
esac
