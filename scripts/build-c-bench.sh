#!/usr/bin/env bash
# Builds the C bench program crates/ringtrace-bench/c/lttng_vs_ringtrace.c into
# target/release/lttng_vs_ringtrace, against ringtrace's C library (the ringtrace-ffi
# crate, built here in release) and LTTng-UST (Debian: liblttng-ust-dev). The
# ringtrace-bench `c-api` rows run that binary; scripts/run-c-bench.sh runs it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -e /usr/include/lttng/tracepoint.h && ! -e /usr/include/$(gcc -dumpmachine 2>/dev/null)/lttng/tracepoint.h ]]; then
    echo "build-c-bench: lttng/tracepoint.h not found (apt-get install liblttng-ust-dev)" >&2
    exit 1
fi
cargo build --release -q -p ringtrace-ffi
lib=$PWD/target/release
src=crates/ringtrace-bench/c
${CC:-cc} -O2 -g -Wall -Wextra -Werror -std=gnu11 \
    -I crates/ringtrace-ffi/include -I "$src" \
    -o "$lib/lttng_vs_ringtrace" "$src/lttng_vs_ringtrace.c" "$src/tp.c" \
    -L "$lib" -lringtrace -llttng-ust -ldl -lpthread -Wl,-rpath,"$lib"
echo "built $lib/lttng_vs_ringtrace"
