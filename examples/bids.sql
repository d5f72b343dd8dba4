-- The bundled SQL example: bids per auction per 10-second window, written to Parquet.
-- Run it with: cargo run -p weir-cli -- run examples/bids.sql
CREATE TABLE bids (
  auction   BIGINT NOT NULL,
  bidder    BIGINT NOT NULL,
  price     BIGINT NOT NULL,
  channel   STRING,
  url       STRING,
  date_time BIGINT NOT NULL,
  ts AS TO_TIMESTAMP_MILLIS(date_time),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'examples/data/bids-*.csv', 'format' = 'csv');

CREATE TABLE bids_per_auction (
  auction      BIGINT,
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  bids         BIGINT,
  total        BIGINT,
  max_price    BIGINT
) WITH ('connector' = 'filesystem', 'path' = 'out/bids-per-auction', 'format' = 'parquet');

SET 'parallelism' = '2';

INSERT INTO bids_per_auction
SELECT auction, window_start, window_end, COUNT(*), SUM(price), MAX(price)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
WHERE channel <> 'api'
GROUP BY auction, window_start, window_end;
