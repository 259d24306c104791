#!/usr/bin/env bash
# Checks that no library file grows past 500 lines: a module that would is split into
# submodules, one a concern.
#
# The rule: every `crates/*/src/**/*.rs` file has at most 500 lines, except test
# modules, which are read one test at a time: a file named `tests.rs` or ending in
# `_tests.rs`, or a file under a `tests/` directory of `src/`. Integration tests
# (`crates/*/tests/`), examples and benches are outside `src/` and not checked.
# Every file over the limit is listed, then the check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=500
status=0
while IFS= read -r -d '' f; do
  case $f in
    */tests.rs | *_tests.rs | */src/*/tests/* | */src/tests/*) continue ;;
  esac
  n=$(wc -l <"$f")
  if [ "$n" -gt $limit ]; then
    echo "file-length: $f has $n lines (at most $limit; split it into submodules)" >&2
    status=1
  fi
done < <(find crates/*/src -name '*.rs' -type f -print0 | sort -z)
if [ $status -eq 0 ]; then
  echo "file-length: every library file of crates/*/src has at most $limit lines"
fi
exit $status
