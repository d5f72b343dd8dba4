-- Session windows per bidder with a gap of 3 s.
-- The query of queries/session.weir.sql in Flink SQL; the sink table is `results` (RESULT is a
-- reserved word in Flink). The sink's options (compare.py fills them in): the blackhole sink
-- for the timed runs, a CSV filesystem sink for the check; the parallelism is Flink's
-- `parallelism.default`.
CREATE TABLE results (
  bidder       BIGINT,
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  bids         BIGINT,
  max_price    BIGINT
) WITH (${sink_options});

INSERT INTO results
SELECT bidder, window_start, window_end, COUNT(*), MAX(price)
FROM TABLE(SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(ts), INTERVAL '3' SECOND))
GROUP BY bidder, window_start, window_end;
