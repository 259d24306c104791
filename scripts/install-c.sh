#!/usr/bin/env bash
# Builds the C library (release) and installs it into PREFIX:
#   PREFIX/lib/libringtrace.so, PREFIX/lib/libringtrace.a,
#   PREFIX/include/ringtrace.h, PREFIX/lib/pkgconfig/ringtrace.pc
# then:  PKG_CONFIG_PATH=PREFIX/lib/pkgconfig cc prog.c $(pkg-config --cflags --libs ringtrace)
# (static: cc -static prog.c $(pkg-config --static --cflags --libs ringtrace); or, in a
# program linked dynamically, $(pkg-config --variable=staticlib ringtrace) named instead of
# -lringtrace).
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 PREFIX" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
mkdir -p "$1"
prefix=$(cd "$1" && pwd)
cargo build --release -p ringtrace-ffi
target=${CARGO_TARGET_DIR:-target}/release
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
install -d "$prefix/lib/pkgconfig" "$prefix/include"
install -m 0755 "$target/libringtrace.so" "$prefix/lib/libringtrace.so"
install -m 0644 "$target/libringtrace.a" "$prefix/lib/libringtrace.a"
install -m 0644 crates/ringtrace-ffi/include/ringtrace.h "$prefix/include/ringtrace.h"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" crates/ringtrace-ffi/ringtrace.pc.in \
  >"$prefix/lib/pkgconfig/ringtrace.pc"
echo "installed libringtrace $version into $prefix"
