-- "SQL versus job spec" benchmark (docs/performance.md): the tumbling query of
-- window-tumble.yaml from SQL over the CSV files of gen-bids.yaml. Its twin built through the
-- job spec is spec-tumble-csv.yaml; sql-tumble-parquet.sql reads the Parquet copy.
--
--   export CARGO_TARGET_DIR=/var/tmp/weir-target
--   cargo run -p weir-cli --profile bench -- run examples/bench/gen-bids.yaml   # once, see there
--   cargo run -p weir-cli --profile bench -- run examples/bench/sql-tumble-csv.sql -p 1 --json
--   cargo run -p weir-cli --profile bench -- run examples/bench/sql-tumble-csv.sql -p 2 --json
CREATE TABLE bids (
  auction   BIGINT NOT NULL,
  bidder    BIGINT NOT NULL,
  price     DOUBLE NOT NULL,
  date_time BIGINT NOT NULL,
  ts AS TO_TIMESTAMP_MILLIS(date_time),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (
  'connector' = 'filesystem',
  'path' = 'bench-data/bids-csv',
  'format' = 'csv',
  'watermark.interval' = '1s'
);

CREATE TABLE per_auction (
  auction      BIGINT,
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  bids         BIGINT,
  total        DOUBLE,
  max_price    DOUBLE
) WITH ('connector' = 'blackhole');

SET 'parallelism' = '2';

INSERT INTO per_auction
SELECT auction, window_start, window_end, COUNT(*), SUM(price), MAX(price)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
