#!/usr/bin/env bash
# Kafka -> Delta Lake against Kafka -> Parquet (docs/performance.md, "Kafka to Delta Lake"):
# part 5 of the Kafka bench (connectors/weir-kafka/benches/kafka/delta.rs) against one real
# broker (weir_testkit::kafka), the jobs run by a `weir` binary with `weir run --json`.
#
#   5a  RECORDS JSON bids in a 4-partition topic, read by the same SQL job into a Parquet
#       (`filesystem`) table and into a Delta table, checkpoints every 1 s, parallelism 2, 3
#       interleaved rounds: `copy` (every record written) and `window` (10 s tumbling count per
#       auction). Records/s over the process time, the Delta/Parquet ratio (target >= 0.90),
#       commit latency per epoch (DURABLE -> COMMITTED in the epoch log: p50, p99, max), the
#       files the sink left. S3=1 adds the `copy` pair on the test kit's S3 server (moto).
#   5b  MINUTES > 0 (part 6 of the bench): a producer fills a topic at RATE records/s while an unbounded `copy` job
#       writes a Delta table for MINUTES minutes (1 s checkpoints), without and with
#       'auto-compaction'; the table's log read afterwards: commits, files added and bytes
#       written, live files and their sizes, scaled to an hour.
#
# Usage: scripts/bench-delta.sh
# Environment: RECORDS (default 1000000), ROUNDS (3), MINUTES (default 0: no 5b), RATE (5000), S3 (0),
#   PROFILE (release: `cargo build --release -p weir-cli`; dev: `cargo build -p weir-cli`),
#   WEIR (a prebuilt binary instead). The harness itself (it produces the input, spawns the
#   jobs, reads logs) is built in the test profile: `cargo test --bench kafka`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/weir-target}"
profile="${PROFILE:-release}"
if [[ -z "${WEIR:-}" ]]; then
    if [[ "$profile" == dev ]]; then
        cargo build -p weir-cli >&2
        WEIR="$CARGO_TARGET_DIR/debug/weir"
    else
        cargo build --release -p weir-cli >&2
        WEIR="$CARGO_TARGET_DIR/release/weir"
    fi
fi
echo "weir: $WEIR ($(date -u -r "$WEIR" '+%Y-%m-%d %H:%M UTC')), commit $(git rev-parse --short HEAD), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
WEIR_BENCH_KAFKA_WEIR="$WEIR" \
WEIR_BENCH_KAFKA_PARTS="5$([[ "${MINUTES:-0}" != 0 ]] && echo 6)" \
WEIR_BENCH_KAFKA_RECORDS="${RECORDS:-1000000}" \
WEIR_BENCH_KAFKA_DELTA_MINUTES="${MINUTES:-0}" \
WEIR_BENCH_KAFKA_DELTA_ROUNDS="${ROUNDS:-3}" \
WEIR_BENCH_KAFKA_DELTA_RATE="${RATE:-5000}" \
WEIR_BENCH_KAFKA_S3="${S3:-0}" \
    cargo test -p weir-kafka --bench kafka
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
