#!/usr/bin/env bash
# The test command (README): everything CI runs, on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
if ! command -v cargo >/dev/null; then
  echo "cargo not found: install Rust (rustup) first" >&2
  exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

# The release builds here (tests, examples, the bench's smoke run; not the loom models) compile
# with 16 codegen units, no LTO and no debuginfo: Cargo.toml's release profile (one
# unit, thin LTO, debuginfo for perf) is the benchmark's, and built every test binary of
# the workspace in about 13.5 minutes of this script's 45 on a 2-core machine; this in
# about 9. The tests run optimized either way; none measures speed.
# No debuginfo, the standard library's stripped too, and no incremental state: each test
# binary carried about 45 MB of line tables and std's debuginfo beside 10 MB of code, and
# the workspace's release and debug test binaries filled 20 GB of a CI machine's disk; a
# failing test still names its file and line (the panic's location is not debuginfo).
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_LTO=false
export CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=debuginfo
export CARGO_PROFILE_DEV_DEBUG=false CARGO_PROFILE_DEV_STRIP=debuginfo CARGO_INCREMENTAL=0

# libbpf's own consumer, loaded at run time by the kernel-bpf bench rows and their test.
if ! ldconfig -p 2>/dev/null | grep -q 'libbpf.so.1 '; then
  echo "== installing libbpf1 (libbpf's consumer, compared in the kernel-bpf bench)"
  (apt-get update -qq && apt-get install -y -qq libbpf1) >/dev/null 2>&1 || echo "warning: could not install libbpf1; the libbpf rows are left out and their test fails" >&2
fi

# babeltrace2 (EfficiOS's CTF reader) reads the CTF export in the tests.
if ! command -v babeltrace2 >/dev/null; then
  echo "== installing babeltrace2 (reads the CTF export)"
  (apt-get update -qq && apt-get install -y -qq babeltrace2) >/dev/null 2>&1 || echo "warning: could not install babeltrace2; the CTF checks will fail" >&2
fi

# LTTng-UST's headers and library: the c-api bench's C program is compiled against them.
if [ ! -e "/usr/include/$(gcc -dumpmachine 2>/dev/null)/lttng/tracepoint.h" ] && [ ! -e /usr/include/lttng/tracepoint.h ]; then
  echo "== installing liblttng-ust-dev (the c-api bench's C program compares LTTng-UST tracepoints)"
  (apt-get update -qq && apt-get install -y -qq liblttng-ust-dev) >/dev/null 2>&1 || echo "warning: could not install liblttng-ust-dev; the C bench program is not compiled" >&2
fi

# groff renders every man page in the command's tests, with its warnings on.
if ! command -v groff >/dev/null; then
  echo "== installing groff (the command's man pages are rendered in its tests)"
  (apt-get update -qq && apt-get install -y -qq groff-base) >/dev/null 2>&1 || echo "warning: could not install groff; the man page test will fail" >&2
fi

# ringtrace-ship's Kafka client: rdkafka-sys builds librdkafka from its bundled source
# with cmake. rdkafka-sys 4.10's cmake build (librdkafka 2.12.1) fails without libcurl's
# headers even with curl off (checked on Debian); zstd comes from the system's libzstd
# (pkg-config).
curl_h=no
[ -e "/usr/include/$(gcc -dumpmachine 2>/dev/null)/curl/curl.h" ] || [ -e /usr/include/curl/curl.h ] && curl_h=yes
if ! command -v cmake >/dev/null || [ $curl_h = no ] || ! pkg-config --exists libzstd 2>/dev/null; then
  echo "== installing cmake, libcurl4-openssl-dev and libzstd-dev (librdkafka's build, for ringtrace-ship)"
  (apt-get update -qq && apt-get install -y -qq cmake libcurl4-openssl-dev libzstd-dev pkg-config) >/dev/null 2>&1 || echo "warning: could not install cmake, libcurl's and libzstd's headers; ringtrace-ship will not build" >&2
fi

# Java 17 runs the Kafka cluster below; Maven fetches its jars from Maven Central.
if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
  echo "== installing Java 17 and Maven (the Kafka cluster of ringtrace-ship's tests)"
  (apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless maven) >/dev/null 2>&1 || echo "warning: could not install Java and Maven; the Kafka cluster will not start" >&2
fi

# A three-node Apache Kafka cluster on loopback (scripts/kafka.sh) for ringtrace-ship's
# delivery tests: started now, in the background, so that its start (and, on a fresh
# machine, Maven's download of its jars, cached after) overlaps the builds below; stopped
# at exit by the pids it wrote, whatever happens.
kafka_dir=$PWD/target/kafka-cluster
busy_pids=()
stop_busy() { [ ${#busy_pids[@]} -eq 0 ] || kill "${busy_pids[@]}" 2>/dev/null || true; busy_pids=(); }
stop_kafka() { [ -e "$kafka_dir/pids" ] && bash scripts/kafka.sh stop "$kafka_dir" >/dev/null 2>&1 || true; }
# Jaeger v2 (scripts/jaeger.sh) for the OTLP export's round trip: built once per version
# (about 4 minutes on a fresh machine, in the background now, overlapping the builds
# below), started later, stopped at exit by the pid it wrote.
jaeger_dir=$PWD/target/jaeger
stop_jaeger() { bash scripts/jaeger.sh stop "$jaeger_dir" >/dev/null 2>&1 || true; }
trap 'stop_busy; stop_kafka; stop_jaeger' EXIT
mkdir -p target
bash scripts/jaeger.sh build >target/jaeger-build.log 2>&1 &
jaeger_build=$!
stop_kafka
rm -rf "$kafka_dir"
mkdir -p target
(bash scripts/kafka.sh start "$kafka_dir" >target/kafka-start.log 2>&1; echo $? >target/kafka-start.rc) &
kafka_start=$!

echo "== fmt and clippy"
cargo fmt --all -- --check
# The workspace builds the library with its `tokio` feature (the bench's async rows use
# it); the library alone is checked without it too, as a user without the feature builds it.
# The command is checked with and without its `kafka` feature (kafka:// sources, which
# link librdkafka): the plain command must build without it; the tests run with it.
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy --workspace --all-targets --features ringtrace-cli/kafka -- -D warnings
cargo clippy -p ringtrace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc -p ringtrace --no-deps --document-private-items -q
RUSTDOCFLAGS="-D warnings" cargo doc -p ringtrace --no-deps --document-private-items -q --features tokio
RUSTDOCFLAGS="-D warnings" cargo doc -p ringtrace-tracing -p ringtrace-export -p ringtrace-cli -p ringtrace-ship --no-deps -q --features ringtrace-cli/kafka

echo "== the user crates package and build as published (cargo publish --dry-run)"
# Each user crate is packaged as crates.io would receive it (the files its `include`
# names; path-only dev-dependencies such as ringtrace-fixtures dropped) and built from
# that package alone, the others' packages standing in for crates.io: a file the build
# needs but the package lacks, or a path dependency without a version, fails here. The
# working tree as it is (--allow-dirty); -q, or cargo lists every test and example it
# leaves out. The packages build in target/debug beside the workspace's own debug build.
publish_start=$SECONDS
# Cargo takes a registry package of a given version as immutable: it extracts each
# stand-in once into $CARGO_HOME/registry/src/-HASH/NAME-VERSION and keeps what it built
# from it. On a machine that runs this script more than once, an earlier run's
# extraction and build of the same version would stand in for today's package: both go.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/ringtrace*-[0-9]*
cargo clean -q -p ringtrace -p ringtrace-tracing -p ringtrace-export -p ringtrace-cli -p ringtrace-ffi -p ringtrace-ship
cargo publish --dry-run --allow-dirty -q --workspace --exclude ringtrace-fixtures --exclude ringtrace-bench
echo "publish dry-run step: $((SECONDS - publish_start)) s"

echo "== module graph: imports run one way (no module cycles), inline paths included"
# Every graph: the library, command, tracing layer, C API, agent and exporters.
bash scripts/acyclic.sh

echo "== no library file over 500 lines (test modules aside)"
bash scripts/file-length.sh

echo "== README's benchmark count is the one docs/benchmark.md's verdict tables give"
python3 scripts/bench-summary.py --check

# The kernel and TSC tests fail, rather than skip, where BPF, perf_event_open or an
# invariant TSC is missing, or where they need root (docs/verification.md): this runs as root on x86-64, which
# has all four. The libbpf consumer's test needs libbpf.so.1, and the CTF tests
# babeltrace2, both installed above: `libbpf`, `babeltrace2`.
# `RINGTRACE_REQUIRE= bash scripts/test.sh` lets them skip elsewhere.
export RINGTRACE_REQUIRE=${RINGTRACE_REQUIRE-bpf,perf,tsc,root,libbpf,babeltrace2}

echo "== the Kafka cluster for ringtrace-ship's tests"
wait "$kafka_start" || true
if [ "$(cat target/kafka-start.rc 2>/dev/null)" != 0 ]; then
  cat target/kafka-start.log >&2
  echo "the Kafka cluster did not start" >&2
  exit 1
fi
RINGTRACE_KAFKA_BROKERS=$(tail -n 1 target/kafka-start.log)
export RINGTRACE_KAFKA_BROKERS
# The fault tests SIGKILL and start nodes of this cluster (kafka.sh kill, revive).
export RINGTRACE_KAFKA_DIR=$kafka_dir
echo "brokers: $RINGTRACE_KAFKA_BROKERS"

echo "== Jaeger for the OTLP delivery tests and the round trip below"
wait "$jaeger_build" || { cat target/jaeger-build.log; exit 1; }
stop_jaeger
otlp=$(bash scripts/jaeger.sh start "$jaeger_dir")
echo "$otlp"
field() { echo "$otlp" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
RINGTRACE_JAEGER_GRPC=$(field otlp-grpc)
RINGTRACE_JAEGER_HTTP=$(field otlp-http)
RINGTRACE_JAEGER_QUERY=$(field query)
export RINGTRACE_JAEGER_GRPC RINGTRACE_JAEGER_HTTP RINGTRACE_JAEGER_QUERY

echo "== unit, doc, API and stress tests (release: the stress tests move millions of records; the library with its tokio feature, which the workspace turns on)"
idle_start=$SECONDS
RINGTRACE_REQUIRE=$RINGTRACE_REQUIRE${RINGTRACE_REQUIRE:+,}kafka,jaeger cargo test --workspace --release --features ringtrace-cli/kafka
echo "release test step: $((SECONDS - idle_start)) s"
# Nothing else talks to Kafka: its three JVMs go before the loaded and loom steps.
stop_kafka
unset RINGTRACE_KAFKA_BROKERS RINGTRACE_KAFKA_DIR

echo "== hostile ring and channel files, the untrusted readers' fuzz targets and the kernel ring readers, in a debug build (overflow checks on)"
cargo test -p ringtrace --test hostile --test inspect_fuzz --test channel_shm --test kernel_bpf --test kernel_bpf_wakeup --test kernel_perf
# The trace decoder's damaged, cut and hostile inputs, and its record decoder's fuzz target.
cargo test -p ringtrace-tracing --test hostile --lib
# `ship --to otlp://` in the command built without its kafka feature (its own parser).
cargo test -p ringtrace-cli --test otlp ship_to_an_otlp_endpoint
cargo test -p ringtrace --lib kernel::
# Nothing below runs the debug build's tests (the header test builds its few crates again).
rm -rf target/debug

echo "== the timing-sensitive tests again, on a busy machine (two CPU-bound processes)"
# Pause, snapshot, wakeup, crash takeover and follow tests must not depend on how long
# a yield or a spin takes: run them again while two busy loops compete for both cores.
# (The binaries were built by the release test run above: nothing is rebuilt here.)
for _ in 1 2; do
  bash -c 'while :; do :; done' &
  busy_pids+=($!)
done
loaded_start=$SECONDS
# The whole workspace, as built above, with the same features (a narrower package
# selection, or other features, would rebuild with another feature set: leaving out ringtrace-ship alone rebuilt a third of it, 5.5
# minutes): unit and integration tests, no doctests. ringtrace-ship's Kafka tests
# skip here (the cluster is stopped, and this run does not require kafka): they ran
# in the step before.
cargo test --workspace --release --features ringtrace-cli/kafka --lib --tests
stop_busy
echo "loaded-machine step: $((SECONDS - loaded_start)) s"

echo "== wakeup stress with the symmetric fence barrier (no membarrier)"
RINGTRACE_BARRIER=fence cargo test --workspace --release --features ringtrace-cli/kafka --test stress sleeping_consumer

echo "== loom models, exhaustive at LOOM_MAX_PREEMPTIONS=2"
# With Cargo.toml's release profile (one codegen unit, thin LTO): the models run for
# minutes, their build for one, so the build above's quicker settings do not pay here.
CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 CARGO_PROFILE_RELEASE_LTO=thin \
  RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
  cargo test -p ringtrace --lib --release loom

echo "== bench smoke run (one bench, quick)"
cargo run --release -q -p ringtrace-bench -- --quick --filter back-to-back --json target/bench-smoke.json >/dev/null
test "$(wc -l < target/bench-smoke.json)" -ge 5
# The c-api bench's C program compiles (-Wall -Wextra -Werror) against the C API and
# LTTng-UST, where LTTng-UST's headers are installed; it is not run here.
if [ -e "/usr/include/$(gcc -dumpmachine 2>/dev/null)/lttng/tracepoint.h" ] || [ -e /usr/include/lttng/tracepoint.h ]; then
  bash scripts/build-c-bench.sh
else
  echo "warning: liblttng-ust-dev missing; the C bench program was not compiled" >&2
fi

echo "== examples (crates/*/examples, each checks its own results)"
for ex in crates/ringtrace/examples/*.rs crates/ringtrace-tracing/examples/*.rs; do
  crate=$(basename "$(dirname "$(dirname "$ex")")")
  # The library's examples with its optional `tokio` feature (async_agent needs it).
  features=()
  [ "$crate" != ringtrace ] || features=(--features tokio)
  cargo run --release -q -p "$crate" "${features[@]}" --example "$(basename "$ex" .rs)" >/dev/null
done

echo "== the C API: header, C tests and examples under ASan/UBSan"
# A C compiler with the sanitizers' runtimes and pkg-config (install-c.sh's .pc file).
if ! command -v cc >/dev/null || ! command -v pkg-config >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq gcc libc6-dev pkg-config) >/dev/null 2>&1 || echo "warning: could not install gcc and pkg-config; the C tests will fail" >&2
fi
# Valgrind: a C program linked with the library runs under memcheck (test-c.sh).
if ! command -v valgrind >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq valgrind) >/dev/null 2>&1 || echo "warning: could not install valgrind; the valgrind run will fail" >&2
fi
# The committed include/ringtrace.h against cbindgen's output of the current sources.
cargo test -p ringtrace-ffi --test header
bash scripts/test-c.sh

echo "== the Perfetto export read by Perfetto's own message classes (PyPI perfetto), event by event against decode"
python3 -m pip install -q --disable-pip-version-check perfetto protobuf 2>&1 | grep -v "Running pip as the 'root' user" || true
dump=${TMPDIR:-/tmp}/ringtrace-example/dump.rtt   # written by the flight_recorder example above
# and the C example's (typed events from C through the header's macros, test-c.sh).
for d in "$dump" target/c-typed-events.rtt; do
  rm -f target/example.pftrace
  ./target/release/ringtrace export --format perfetto "$d" -o target/example.pftrace 2>/dev/null
  ./target/release/ringtrace decode --format json "$d" > target/example.jsonl 2>/dev/null
  python3 scripts/check-perfetto.py target/example.pftrace target/example.jsonl
done

echo "== the CTF export read by the project's own CTF reader and by babeltrace2, event by event against decode"
for d in "$dump" target/c-typed-events.rtt; do
  rm -rf target/example.ctf
  ./target/release/ringtrace export --format ctf "$d" -o target/example.ctf 2>/dev/null
  ./target/release/ringtrace decode --format json "$d" > target/example.jsonl 2>/dev/null
  python3 scripts/check-ctf.py target/example.ctf target/example.jsonl
done

echo "== the OTLP export read back from Jaeger (OpenTelemetry's trace store), span by span"
# Each trace twice: its OTLP/JSON lines posted by the check, and delivered by
# `export --to` over gRPC under another service name, read back against the same lines.
for d in "$dump" target/c-typed-events.rtt; do
  rm -f target/example.otlp.jsonl target/example.grpc.otlp.jsonl
  ./target/release/ringtrace export --format otlp-json "$d" -o target/example.otlp.jsonl
  python3 scripts/check-jaeger.py target/example.otlp.jsonl "http://$RINGTRACE_JAEGER_HTTP" "$RINGTRACE_JAEGER_QUERY"
  svc=ringtrace-check-grpc-$RANDOM$RANDOM
  ./target/release/ringtrace export --format otlp-json --service "$svc" "$d" -o target/example.grpc.otlp.jsonl
  ./target/release/ringtrace export --to "otlp://$RINGTRACE_JAEGER_GRPC" --service "$svc" --signals traces "$d"
  python3 scripts/check-jaeger.py --no-post target/example.grpc.otlp.jsonl "$RINGTRACE_JAEGER_QUERY"
done
stop_jaeger

echo "== demo smoke run (the README's main job, 1 second; it checks its own accounting)"
cargo run --release -q -p ringtrace-cli --features kafka -- demo --seconds 1 >/dev/null
