-- The bids table every query reads (scripts/compare/README.md). compare.py puts this file in
-- front of each query's script and fills in the path (one CSV, Parquet or JSON-lines file),
-- the format (csv, parquet or json) and, with --split-size, the 'split-size' option. All seven
-- columns are declared: CSV columns map by position; the source decodes only the columns the
-- query uses. The watermark (5 s behind the largest event time, emitted every 200 ms of event
-- time by default) is what reference.py reads to compute the expected results: about 1% of
-- the rows are 10 to 60 s late.
CREATE TABLE bids (
  auction   BIGINT NOT NULL,
  bidder    BIGINT NOT NULL,
  price     BIGINT NOT NULL,
  channel   VARCHAR NOT NULL,
  url       VARCHAR NOT NULL,
  date_time BIGINT NOT NULL,
  extra     VARCHAR NOT NULL,
  ts AS TO_TIMESTAMP_MILLIS(date_time),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (
  'connector' = 'filesystem',
  'path' = '${bids_path}',
  'format' = '${bids_format}'${bids_options}
);
