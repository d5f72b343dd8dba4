-- Window Top-N: in each 10 s tumbling window, the 3 auctions with the largest SUM(price).
-- The query of queries/top3.weir.sql in Flink SQL (Flink's window Top-N after a window
-- aggregation: the ranking runs in the window operator's wake, once per window); the sink
-- table is `results` (RESULT is a reserved word in Flink). The sink's options (compare.py
-- fills them in): the blackhole sink for the timed runs, a CSV filesystem sink for the check;
-- the parallelism is Flink's `parallelism.default`.
CREATE TABLE results (
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  auction      BIGINT,
  bids         BIGINT,
  total        BIGINT,
  rn           BIGINT
) WITH (${sink_options});

INSERT INTO results
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
