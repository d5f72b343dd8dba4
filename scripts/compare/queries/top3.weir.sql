-- Window Top-N: in each 10 s tumbling window, the 3 auctions with the largest SUM(price)
-- (Flink's window Top-N after a window aggregation; about 3 rows per window, 3,000 at
-- 10,000,000 bids). The aggregation drops late rows as `tumble` does; the ranking then sees
-- each window's final rows. The result table's options (compare.py fills them in): the
-- blackhole sink for the timed runs, a Parquet filesystem sink for the check; the parallelism
-- comes from `weir run -p`.
CREATE TABLE result (
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  auction      BIGINT,
  bids         BIGINT,
  total        BIGINT,
  rn           BIGINT
) WITH (${sink_options});

INSERT INTO result
SELECT window_start, window_end, auction, bids, total, rn
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY total DESC) AS rn
  FROM (
    SELECT window_start, window_end, auction, COUNT(*) AS bids, SUM(price) AS total
    FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
    GROUP BY window_start, window_end, auction
  )
)
WHERE rn <= 3;
