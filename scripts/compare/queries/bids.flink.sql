-- The bids table of every Flink job (scripts/compare/README.md): the same file and columns as
-- queries/bids.weir.sql, `ts` a TIMESTAMP_LTZ(3) (the session time zone is UTC). compare.py
-- fills in the path, the format and the format's options. Flink's CSV format (2.3) cannot skip
-- a header line: for CSV the options include 'csv.ignore-parse-errors', which turns the header
-- into a row of NULLs. The watermark assigner fails on a NULL time attribute, so `ts` reads a
-- NULL date_time as 0 (the start of 1970: its watermark is far behind the data's), and the view
-- `bids` that the queries read drops the row before any window sees it. The columns are
-- nullable so that the planner keeps that filter. Parquet and JSON lines are read the same way
-- (no row of theirs is NULL).
CREATE TABLE bids_file (
  auction   BIGINT,
  bidder    BIGINT,
  price     BIGINT,
  channel   STRING,
  url       STRING,
  date_time BIGINT,
  extra     STRING,
  ts AS TO_TIMESTAMP_LTZ(COALESCE(date_time, 0), 3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (
  'connector' = 'filesystem',
  'path' = '${bids_path}',
  'format' = '${bids_format}'${bids_options}
);

CREATE TEMPORARY VIEW bids AS
SELECT * FROM bids_file WHERE date_time IS NOT NULL;
