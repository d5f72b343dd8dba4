#!/usr/bin/env bash
# Crash soak: the crash harness (crates/weir-cli/tests/crash.rs) with many kills. `weir run` is
# SIGKILLed at random moments and at named fail points and restored until its input is done;
# every round's published rows must equal those of a run that never failed.
#
# Usage: scripts/crash-soak.sh [KILLS]   (default 300; WEIR_CRASH_SEED fixes the kill schedule)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/weir-target}"
mkdir -p "$CARGO_TARGET_DIR"
kills="${1:-300}"
log="$(mktemp "${TMPDIR:-/tmp}/weir-crash-soak.XXXXXX")"
trap 'rm -f "$log"' EXIT
status=0
WEIR_CRASH_KILLS="$kills" cargo test -p weir-cli --test crash -- --nocapture 2>&1 \
    | tee "$log" || status=$?
echo
if summary="$(grep -E '^crash harness: [0-9]+ kills' "$log")"; then
    echo "$summary"
else
    echo "crash soak: no summary line; the harness failed before the end (see above)" >&2
fi
grep -E '^crash harness: seed' "$log" || true
exit "$status"
