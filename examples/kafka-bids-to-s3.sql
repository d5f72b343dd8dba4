-- Kafka to the lake, exactly once: bids as JSON from Kafka, counted per auction in 10-second
-- event-time windows, written as Parquet to S3. Checkpoints (and the sink's staged output)
-- live on S3 too. The addresses are those of a local test setup; see the README section
-- "Kafka to S3".
SET 'job.name' = 'kafka-bids-to-s3';
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

CREATE TABLE bids_per_auction (
  auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
  bids BIGINT, max_price BIGINT
) WITH (
  'connector' = 'filesystem',
  'path' = 's3://weir-example/bids-per-auction/',
  'format' = 'parquet'
);

INSERT INTO bids_per_auction
SELECT auction, window_start, window_end, COUNT(*), MAX(price)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
