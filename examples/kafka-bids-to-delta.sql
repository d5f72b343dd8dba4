-- Kafka to a Delta Lake table, exactly once: bids as JSON from Kafka, counted per auction in
-- 10-second event-time windows, written to a Delta table on S3 (one Delta commit per
-- checkpoint, every second). Checkpoints live on S3 too; the SET 's3.*' options reach both.
-- The addresses are those of a local test setup; see the README section "Kafka to Delta Lake".
SET 'job.name' = 'kafka-bids-to-delta';
SET 'parallelism' = '2';
SET 'checkpoint.interval' = '1s';
SET 'checkpoint.dir' = 's3://weir-example/checkpoints';
SET 's3.endpoint' = 'http://127.0.0.1:9000';
SET 's3.region' = 'us-east-1';
SET 's3.access-key' = 'weir-test';
SET 's3.secret-key' = 'weir-test-secret';
SET 's3.path.style.access' = 'true';

CREATE TABLE bids (
  auction BIGINT NOT NULL,
  bidder BIGINT NOT NULL,
  price BIGINT NOT NULL,
  date_time BIGINT NOT NULL,
  ts AS TO_TIMESTAMP_MILLIS(date_time),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'bids',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'format' = 'json',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset'
);

-- The day and hour of each window are columns of the table, so readers can filter on them.
-- (The table is not partitioned by them yet: PARTITIONED BY is not in Weir's SQL yet.)
CREATE TABLE bids_per_auction (
  auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
  bids BIGINT, max_price BIGINT, dt STRING, `hour` INT
) WITH (
  'connector' = 'delta',
  'path' = 's3://weir-example/bids-per-auction',
  -- Merge the small files of one-second commits as they pile up.
  'auto-compaction' = 'true'
);

INSERT INTO bids_per_auction
SELECT auction, window_start, window_end, COUNT(*), MAX(price),
  DATE_FORMAT(window_start, 'yyyy-MM-dd'), EXTRACT(HOUR FROM window_start)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
