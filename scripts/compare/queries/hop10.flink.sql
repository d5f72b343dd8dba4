-- Sliding (hop) windows of 10 s starting every 2 s, per auction.
-- The query of queries/hop10.weir.sql in Flink SQL; the sink table is `results` (RESULT is a
-- reserved word in Flink). The sink's options (compare.py fills them in): the blackhole sink
-- for the timed runs, a CSV filesystem sink for the check; the parallelism is Flink's
-- `parallelism.default`.
CREATE TABLE results (
  auction      BIGINT,
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  bids         BIGINT,
  total        BIGINT,
  max_price    BIGINT
) WITH (${sink_options});

INSERT INTO results
SELECT auction, window_start, window_end, COUNT(*), SUM(price), MAX(price)
FROM TABLE(HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
