#!/usr/bin/env bash
# Runs the C bench program (target/release/lttng_vs_ringtrace, built by
# scripts/build-c-bench.sh) inside an LTTng flight-recorder session made for it and
# destroyed afterwards: a snapshot-mode session (`lttng create --snapshot`), one
# user-space overwrite channel of 4 sub-buffers of 256 KiB (per CPU, per user: LTTng's
# defaults for user-space channels), and the `ringtrace_bench:*` events enabled.
# See lttng-create(1), lttng-enable-channel(1), lttng-snapshot(1):
# https://lttng.org/docs/v2.13/#doc-taking-a-snapshot
# Arguments go to the program (--quick, --rounds N, --round K, --only lttng|ringtrace).
# Needs root or membership of the tracing group; starts a session daemon if none runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/lttng_vs_ringtrace
[[ -x $bin ]] || { echo "run-c-bench: $bin missing; run scripts/build-c-bench.sh" >&2; exit 1; }
command -v lttng >/dev/null || { echo "run-c-bench: lttng not installed (apt-get install lttng-tools)" >&2; exit 1; }
if ! lttng list >/dev/null 2>&1; then
    lttng-sessiond --daemonize
fi
session="ringtrace-bench-$$"
out=$(mktemp -d /tmp/ringtrace-bench-lttng.XXXXXX)
cleanup() {
    lttng destroy "$session" >/dev/null 2>&1 || true
    rm -rf "$out"
}
trap cleanup EXIT
lttng create "$session" --snapshot --output="$out" >/dev/null
lttng enable-channel --userspace --session="$session" --overwrite --subbuf-size=256K --num-subbuf=4 rtbench >/dev/null
lttng enable-event --userspace --session="$session" --channel=rtbench 'ringtrace_bench:*' >/dev/null
lttng start "$session" >/dev/null
"$bin" "$@"
lttng stop "$session" >/dev/null
