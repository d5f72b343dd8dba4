-- Deduplication keeping the first bid of each bidder in event-time order (ROW_NUMBER() ... = 1
-- over the time attribute ascending; docs/sql.md): 2,000 rows out. A bidder's earliest bid
-- so far waits in keyed state until the watermark passes it, is then emitted once, and the
-- bidder's later bids are duplicates; bids at or behind the watermark are late (dropped and
-- counted). The result table's options (compare.py fills them in): the blackhole sink for the
-- timed runs, a Parquet filesystem sink for the check; the parallelism comes from `weir run -p`.
CREATE TABLE result (
  bidder    BIGINT,
  auction   BIGINT,
  price     BIGINT,
  date_time BIGINT
) WITH (${sink_options});

INSERT INTO result
SELECT bidder, auction, price, date_time
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder ORDER BY ts ASC) AS rn FROM bids)
WHERE rn = 1;
