-- Sliding (hop) windows of 5 s starting every 2 s, per auction.
-- The query of queries/hop5.weir.sql in Flink SQL; the sink table is `results` (RESULT is a
-- reserved word in Flink). Flink's HOP window table function aggregates only windows whose size
-- is a multiple of the slide (2.3: "HOP table function based aggregate requires size must be an
-- integral multiple of slide"), so this query uses Flink's older group window aggregation,
-- GROUP BY HOP(time attribute, slide, size), with HOP_START and HOP_END as the bounds. The
-- sink's options (compare.py fills them in): the blackhole sink for the timed runs, a CSV
-- filesystem sink for the check; the parallelism is Flink's `parallelism.default`.
CREATE TABLE results (
  auction      BIGINT,
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  bids         BIGINT,
  total        BIGINT,
  max_price    BIGINT
) WITH (${sink_options});

INSERT INTO results
SELECT auction,
       HOP_START(ts, INTERVAL '2' SECOND, INTERVAL '5' SECOND),
       HOP_END(ts, INTERVAL '2' SECOND, INTERVAL '5' SECOND),
       COUNT(*), SUM(price), MAX(price)
FROM bids
GROUP BY auction, HOP(ts, INTERVAL '2' SECOND, INTERVAL '5' SECOND);
