#!/usr/bin/env bash
# Checks that the modules of the library and of the command import each other one way
# only: no module cycles. The module graph's "uses" edges come from cargo-modules
# (https://github.com/regexident/cargo-modules); `tsort` (coreutils) finds the cycles.
#
# Two things differ from `cargo modules dependencies --acyclic`, which checks the graph
# of every item: that graph has a cycle for every type whose methods name the type
# (`Core` -> `Core::new` -> `Core`), so here it is filtered to modules first. And
# rust-analyzer, which cargo-modules runs on, keeps the items of a module declared under
# `#[cfg(not(loom))]` but drops the module itself, folding its items into its parent;
# so the graph is taken from a copy of the workspace with those attributes removed:
# the modules and imports of a normal (not loom) build.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo modules --version >/dev/null 2>&1; then
  echo "== installing cargo-modules (the module graph)"
  # 0.27 is the newest release that builds with Rust 1.95.
  cargo install -q --locked cargo-modules --version 0.27.0
fi
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
tar --exclude=./target --exclude=./.git -cf - . | tar -xf - -C "$copy"
find "$copy/crates" -name '*.rs' -exec sed -i -E '/^[[:space:]]*#!?\[cfg\(not\(loom\)\)\][[:space:]]*$/d' {} +

# Which graphs to check: "lib" (the library), "cli" (the command), "tracing" (the
# tracing layer); all by default.
targets=()
for which in "${@:-lib cli tracing ffi ship}"; do
  for w in $which; do
    case $w in
      lib) targets+=("-p ringtrace --lib --features tokio") ;;
      cli) targets+=("-p ringtrace-cli --bin ringtrace --features kafka") ;;
      tracing) targets+=("-p ringtrace-tracing --lib") ;;
      ffi) targets+=("-p ringtrace-ffi --lib") ;;
      ship) targets+=("-p ringtrace-ship --lib") ;;
      *) echo "acyclic: unknown graph $w (lib, cli, tracing, ffi or ship)" >&2; exit 2 ;;
    esac
  done
done
status=0
for target in "${targets[@]}"; do
  # shellcheck disable=SC2086
  edges=$(cargo modules dependencies --manifest-path "$copy/Cargo.toml" $target --no-externs --no-sysroot \
    --no-fns --no-types --no-traits --no-owns 2>/dev/null |
    sed -n 's/^ *"\([^"]*\)" -> "\([^"]*\)" \[label="uses".*/\1 \2/p' | awk '$1 != $2')
  if [ -z "$edges" ]; then
    echo "acyclic: cargo modules printed no module imports for $target" >&2
    status=1
    continue
  fi
  if loops=$(printf '%s\n' "$edges" | tsort 2>&1 >/dev/null) && [ -z "$loops" ]; then
    echo "acyclic: $target: $(printf '%s\n' "$edges" | wc -l) imports between modules, no cycle"
  else
    echo "acyclic: $target: modules that import each other in a circle (each group after a 'loop' line):" >&2
    printf '%s\n' "$loops" | sed 's/^tsort: /  /' >&2
    status=1
  fi
done
exit $status
