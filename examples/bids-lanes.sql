-- A job for the distributed walk-through (docs/distributed.md): the bundled bids, counted per
-- auction per 10-second window, as a job of two lanes. A file source whose watermark a window
-- reads is one ordered stream, so one lane reads both files and the other idles; with a Kafka
-- topic keyed by auction the lanes would share the partitions. Start a Hub and two Agents from
-- the repository's root directory, then:
--   cargo run -p weir-cli -- jobs submit --name bids-lanes examples/bids-lanes.sql
--   cargo run -p weir-cli -- jobs start bids-lanes
-- Lanes checkpoint into weir-checkpoints/bids-lanes under each process's working directory:
-- the same directory when they all run on this machine from the same place (on several
-- machines use storage they all reach, such as s3://bucket/checkpoints).
SET 'job.name' = 'bids-lanes';
SET 'parallelism' = '2';
SET 'checkpoint.interval' = '1s';
SET 'checkpoint.dir' = 'weir-checkpoints/bids-lanes';

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
  max_price    BIGINT
) WITH ('connector' = 'filesystem', 'path' = 'out/bids-lanes', 'format' = 'parquet');

INSERT INTO bids_per_auction
SELECT auction, window_start, window_end, COUNT(*), MAX(price)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
