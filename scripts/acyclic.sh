#!/usr/bin/env bash
# Checks that the modules of the library and of the command import each other one way
# only: no module cycles. The module graph's "uses" edges come from cargo-modules
# (https://github.com/regexident/cargo-modules); `tsort` (coreutils) finds the cycles.
# (`cargo modules dependencies --acyclic` itself also counts a type and its own methods
# as a cycle, so the graph is filtered to modules first.)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo modules --version >/dev/null 2>&1; then
  echo "== installing cargo-modules (module graph)"
  # 0.27 is the last release that builds with Rust 1.95.
  cargo install -q --locked cargo-modules --version 0.27.0
fi
status=0
for target in "-p ringtrace --lib" "-p ringtrace-cli --bin ringtrace"; do
  # shellcheck disable=SC2086
  edges=$(cargo modules dependencies $target --no-externs --no-sysroot --no-fns --no-types \
    --no-traits --no-owns 2>/dev/null | sed -n 's/^ *"\([^"]*\)" -> "\([^"]*\)" \[label="uses".*/\1 \2/p')
  if [ -z "$edges" ]; then
    echo "acyclic: cargo modules printed no edges for $target" >&2
    status=1
    continue
  fi
  if loops=$(printf '%s\n' "$edges" | tsort 2>&1 >/dev/null) && [ -z "$loops" ]; then
    echo "acyclic: $target: $(printf '%s\n' "$edges" | wc -l) module imports, no cycle"
  else
    echo "acyclic: $target: modules that import each other in a circle:" >&2
    printf '%s\n' "$loops" | sed 's/^tsort: /  /' >&2
    status=1
  fi
done
exit $status
