#!/usr/bin/env bash
# The C API's tests and examples: builds libringtrace (release), compiles every C file
# under crates/ringtrace-ffi/c/{tests,examples} with warnings as errors and
# AddressSanitizer + UndefinedBehaviorSanitizer against the shared library and the
# header, and runs each (it checks its own results and exits nonzero on a mismatch);
# then runs four of them under valgrind's memcheck. The C++ examples (*.cpp) are built
# as C++17 the same way. Tests that read a recorder back run the `ringtrace` command
# (RINGTRACE_CLI); the typed_events example's dump is kept as target/c-typed-events.rtt
# for the Perfetto and CTF checks of scripts/test.sh.
set -euo pipefail
shopt -s nullglob
cd "$(dirname "$0")/.."
cc=${CC:-cc}
cargo build --release -p ringtrace-ffi -p ringtrace-cli
target=${CARGO_TARGET_DIR:-target}/release
export RINGTRACE_CLI="$PWD/$target/ringtrace"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cflags=(-std=c11 -Wall -Wextra -Werror -fsanitize=address,undefined -fno-omit-frame-pointer -g
  -I crates/ringtrace-ffi/include)
export LD_LIBRARY_PATH="$PWD/$target${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
failed=()
for src in crates/ringtrace-ffi/c/tests/*.c crates/ringtrace-ffi/c/examples/*.c; do
  name=$(basename "$src" .c)
  exe="$out/$name"
  echo "-- $src"
  "$cc" "${cflags[@]}" -o "$exe" "$src" -L "$target" -lringtrace -lpthread
  # Each program runs in its own scratch directory (ring and snapshot files).
  if ! (cd "$out" && RINGTRACE_TEST_EXE="$exe" timeout 300 "$exe"); then
    failed+=("$src")
  fi
done
# C++17: the same macros, with RAII spans (RINGTRACE_SPAN_SCOPE).
cxx=${CXX:-c++}
for src in crates/ringtrace-ffi/c/examples/*.cpp; do
  name=$(basename "$src" .cpp)
  exe="$out/$name-cpp"
  echo "-- $src"
  "$cxx" -std=c++17 -pedantic "${cflags[@]:1}" -o "$exe" "$src" -L "$target" -lringtrace -lpthread
  if ! (cd "$out" && timeout 300 "$exe" "$name-cpp.rtt" && "$RINGTRACE_CLI" decode "$name-cpp.rtt" >"$name-cpp.txt" &&
    grep -q 'request{id=99 path="/item/99"}: cpp_example: slow request ms=12.5' "$name-cpp.txt"); then
    failed+=("$src")
  fi
done
# The header's macros in ISO C99 and C++11, warnings as errors.
"$cc" -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only -I crates/ringtrace-ffi/include \
  crates/ringtrace-ffi/c/tests/events.c || failed+=("events.c as C99")
"$cxx" -std=c++11 -pedantic -Wall -Wextra -Werror -fsyntax-only -I crates/ringtrace-ffi/include \
  crates/ringtrace-ffi/c/examples/typed_events.cpp || failed+=("typed_events.cpp as C++11")
cp "$out/typed-events.rtt" "$target/../c-typed-events.rtt" 2>/dev/null || failed+=("typed_events.c wrote no dump")
# Valgrind's memcheck, as C users debug: the library must run under it (rustix reads the
# auxiliary vector through libc, see crates/ringtrace/Cargo.toml), and these programs
# must run clean. Built without the sanitizers, which valgrind cannot run beside.
if command -v valgrind >/dev/null; then
  # misuse: handles of the wrong type, whose tag must be read before any other byte.
  for name in minimal threads channels misuse; do
    src=crates/ringtrace-ffi/c/examples/$name.c
    [ -e "$src" ] || src=crates/ringtrace-ffi/c/tests/$name.c
    echo "-- $src under valgrind"
    "$cc" -std=c11 -Wall -Wextra -Werror -g -O1 -I crates/ringtrace-ffi/include -o "$out/vg-$name" "$src" \
      -L "$target" -lringtrace -lpthread
    if ! (cd "$out" && timeout 600 valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
      "$out/vg-$name" >/dev/null); then
      failed+=("$src under valgrind")
    fi
  done
else
  echo "valgrind not found: the valgrind run fails" >&2
  failed+=("valgrind (not installed)")
fi
# The installed library: install into a scratch prefix, build the smallest example with
# pkg-config's flags alone (shared, then static) and run it.
echo "-- install-c.sh and pkg-config"
bash scripts/install-c.sh "$out/prefix" >/dev/null
pc() { PKG_CONFIG_PATH="$out/prefix/lib/pkgconfig" pkg-config "$@"; }
if command -v pkg-config >/dev/null; then
  # shellcheck disable=SC2046
  "$cc" -std=c11 -Wall -Wextra -Werror $(pc --cflags --libs ringtrace) -o "$out/minimal-pc" \
    crates/ringtrace-ffi/c/examples/minimal.c
  (unset LD_LIBRARY_PATH; "$out/minimal-pc") || failed+=("minimal.c via pkg-config (shared)")
  # The static library in a dynamically linked program: named by the staticlib variable.
  # shellcheck disable=SC2046
  "$cc" -std=c11 -Wall -Wextra -Werror -o "$out/minimal-static" crates/ringtrace-ffi/c/examples/minimal.c \
    $(pc --cflags ringtrace) "$(pc --variable=staticlib ringtrace)" $(pc --static --libs-only-l ringtrace | sed 's/-lringtrace//')
  (unset LD_LIBRARY_PATH; "$out/minimal-static") || failed+=("minimal.c via pkg-config (static library)")
  # A static program, from pkg-config's flags alone (no libgcc_s, which -static cannot link),
  # where the C library has a static form (Debian's libc6-dev has; some systems do not).
  echo 'int main(void) { return 0; }' >"$out/empty.c"
  if ! "$cc" -static -o "$out/empty" "$out/empty.c" 2>/dev/null; then
    echo "cc -static cannot link a program here (no static C library): the -static check is skipped" >&2
  else
  # shellcheck disable=SC2046
  "$cc" -static -std=c11 -Wall -Wextra -Werror -o "$out/minimal-all-static" crates/ringtrace-ffi/c/examples/minimal.c \
    $(pc --static --cflags --libs ringtrace) 2>"$out/static-link.log" || { cat "$out/static-link.log"; failed+=("minimal.c linked -static"); }
  if [ -x "$out/minimal-all-static" ]; then
    ! readelf -d "$out/minimal-all-static" | grep -q NEEDED || failed+=("minimal.c -static needs shared libraries")
    (unset LD_LIBRARY_PATH; "$out/minimal-all-static") || failed+=("minimal.c linked -static")
  fi
  fi
else
  echo "pkg-config not found: the installed library's check is skipped" >&2
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "C tests failed: ${failed[*]}" >&2
  exit 1
fi
echo "all C tests and examples passed"
