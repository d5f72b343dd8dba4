#!/usr/bin/env bash
# Crash soak: the crash harness with many kills. `weir run` is SIGKILLed at random moments and at
# named fail points and restored until its input is done; every round's output must equal that of
# a run that never failed.
#
# Usage: scripts/crash-soak.sh [KILLS] [ROUND]
#   KILLS  kills per round of the harness (default 300); WEIR_CRASH_SEED fixes the kill schedule
#   ROUND  file  (default) crates/weir-cli/tests/crash.rs: a windowed job into Parquet files
#          joins  crates/weir-cli/tests/crash/joins.rs: an interval join, a deduplication, an
#                 OVER aggregation, a window Top-N and cascading windows into Parquet files
#          redis  crates/weir-cli/tests/crash/redis.rs: the joins round with keyed state in a
#                 real redis-server (Debian's package, fetched once), then one run whose Redis
#                 is restarted mid-run
#          kafka  crates/weir-cli/tests/kafka_crash.rs: a Kafka-to-Kafka exactly-once job on a
#                 real broker (needs Java 17+ and the broker's jars, fetched once with Maven)
#          all    all four, one after the other
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/weir-target}"
mkdir -p "$CARGO_TARGET_DIR"
kills="${1:-300}"
round="${2:-file}"
# Each entry: the test binary and the name filter of the test in it.
case "$round" in
file) tests=("crash killed_and_restored_runs") ;;
joins) tests=("crash killed_and_restored_joins") ;;
redis) tests=("crash with_state_in_redis") ;;
kafka) tests=("kafka_crash kafka") ;;
all) tests=("crash killed_and_restored_runs" "crash killed_and_restored_joins" "crash with_state_in_redis" "kafka_crash kafka") ;;
*)
    echo "crash soak: unknown round '$round' (file, joins, redis, kafka or all)" >&2
    exit 2
    ;;
esac
log="$(mktemp "${TMPDIR:-/tmp}/weir-crash-soak.XXXXXX")"
trap 'rm -f "$log"' EXIT
status=0
for entry in "${tests[@]}"; do
    read -r test filter <<<"$entry"
    WEIR_CRASH_KILLS="$kills" cargo test -p weir-cli --test "$test" "$filter" -- --nocapture 2>&1 \
        | tee -a "$log" || status=$?
done
echo
if summary="$(grep -E '^(kafka |joins |redis )?crash harness: [0-9]+ kills' "$log")"; then
    echo "$summary"
else
    echo "crash soak: no summary line; the harness failed before the end (see above)" >&2
fi
grep -E '^(kafka |joins |redis )?crash harness: seed' "$log" || true
exit "$status"
