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
#
# cargo-modules draws an import from a `use` declaration only; a module that names
# another inline (`crate::report::fleet::stat(..)`, `super::text::entry_json(..)` in an
# expression or a type) imports it as much: scripts/inline-paths.py reads those paths
# from the sources, and their edges join cargo-modules' before `tsort`.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo modules --version >/dev/null 2>&1; then
  echo "== installing cargo-modules (the module graph)"
  # 0.27 is the newest release that builds with Rust 1.95.
  cargo install -q --locked cargo-modules --version 0.27.0
fi
# The inline path reader, on a crate of its own whose edges are known.
python3 scripts/inline-paths.py --self-test
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
tar --exclude=./target --exclude=./.git -cf - . | tar -xf - -C "$copy"
find "$copy/crates" -name '*.rs' -exec sed -i -E '/^[[:space:]]*#!?\[cfg\(not\(loom\)\)\][[:space:]]*$/d' {} +

# Which graphs to check: "lib" (the library), "cli" (the command), "tracing" (the
# tracing layer), "ffi" (the C API), "ship" (the Kafka agent), "export" (the
# exporters); all by default ("export" where its crate is in the workspace).
defaults="lib cli tracing ffi ship"
[ ! -e crates/ringtrace-export/Cargo.toml ] || defaults="$defaults export"
# Each graph: cargo-modules' selection | its root file | the features it is built with.
targets=()
for which in "${@:-$defaults}"; do
  for w in $which; do
    case $w in
      lib) targets+=("-p ringtrace --lib --features tokio|crates/ringtrace/src/lib.rs|tokio") ;;
      cli) targets+=("-p ringtrace-cli --bin ringtrace --features kafka|crates/ringtrace-cli/src/main.rs|kafka") ;;
      tracing) targets+=("-p ringtrace-tracing --lib|crates/ringtrace-tracing/src/lib.rs|") ;;
      ffi) targets+=("-p ringtrace-ffi --lib|crates/ringtrace-ffi/src/lib.rs|") ;;
      ship) targets+=("-p ringtrace-ship --lib --features kafka,command,otlp|crates/ringtrace-ship/src/lib.rs|kafka command otlp") ;;
      export) targets+=("-p ringtrace-export --lib|crates/ringtrace-export/src/lib.rs|") ;;
      *) echo "acyclic: unknown graph $w (lib, cli, tracing, ffi, ship or export)" >&2; exit 2 ;;
    esac
  done
done
status=0
for spec in "${targets[@]}"; do
  IFS='|' read -r target root features <<<"$spec"
  # shellcheck disable=SC2086
  dot=$(cargo modules dependencies --manifest-path "$copy/Cargo.toml" $target --no-externs --no-sysroot \
    --no-fns --no-types --no-traits --no-owns 2>/dev/null) || true
  edges=$(printf '%s\n' "$dot" | sed -n 's/^ *"\([^"]*\)" -> "\([^"]*\)" \[label="uses".*/\1 \2/p' | awk '$1 != $2')
  if [ -z "$edges" ]; then
    echo "acyclic: cargo modules printed no module imports for $target" >&2
    status=1
    continue
  fi
  # The inline paths' edges, the modules named as cargo-modules names them.
  crate=$(printf '%s\n' "$dot" | sed -n 's/^ *"\([^"]*\)" \[label="crate|.*/\1/p' | head -n 1)
  # shellcheck disable=SC2086
  inline=$(python3 scripts/inline-paths.py "$copy/$root" "$crate" $features)
  edges=$(printf '%s\n%s\n' "$edges" "$inline" | awk 'NF == 2 && $1 != $2' | sort -u)
  if loops=$(printf '%s\n' "$edges" | tsort 2>&1 >/dev/null) && [ -z "$loops" ]; then
    echo "acyclic: $target: $(printf '%s\n' "$edges" | wc -l) imports between modules ($(printf '%s' "$inline" | grep -c .) of them inline paths), no cycle"
  else
    echo "acyclic: $target: modules that import each other in a circle (each group after a 'loop' line):" >&2
    printf '%s\n' "$loops" | sed 's/^tsort: /  /' >&2
    status=1
  fi
done
exit $status
