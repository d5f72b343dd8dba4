-- A GROUP BY without a window (docs/sql.md, "Updating results"): per auction the number of
-- bids, their total and the largest price, over every bid (no row is late: nothing waits for
-- the watermark). The results update as bids arrive (+I, then -U/+U per change); the table
-- they leave is one row per auction (10,000). The result table's options (compare.py fills
-- them in): the blackhole sink for the timed runs, a 'changelog-json' filesystem sink for the
-- check, which compare.py materializes; the parallelism comes from `weir run -p`.
CREATE TABLE result (
  auction BIGINT,
  bids    BIGINT,
  total   BIGINT,
  top     BIGINT
) WITH (${sink_options});

INSERT INTO result
SELECT auction, COUNT(*) AS bids, SUM(price) AS total, MAX(price) AS top
FROM bids
GROUP BY auction;
