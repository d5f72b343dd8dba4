-- OVER aggregation with a ROWS frame: each bid with COUNT(*), SUM(price) and MAX(price) over
-- the last 10 bids of its auction in event-time order. The query of queries/over_rows.weir.sql
-- in Flink SQL (RowTimeRowsBoundedPrecedingFunction); the sink table is `results` (RESULT is a
-- reserved word in Flink). Flink drops a bid as late only when its time is at or behind the
-- last time its auction emitted, not the watermark (scripts/compare/README.md, Flink). The
-- sink's options (compare.py fills them in): the blackhole sink for the timed runs, a CSV
-- filesystem sink for the check; the parallelism is Flink's `parallelism.default`.
CREATE TABLE results (
  auction   BIGINT,
  bidder    BIGINT,
  price     BIGINT,
  date_time BIGINT,
  bids      BIGINT,
  total     BIGINT,
  max_price BIGINT
) WITH (${sink_options});

INSERT INTO results
SELECT auction, bidder, price, date_time,
       COUNT(*) OVER w, SUM(price) OVER w, MAX(price) OVER w
FROM bids
WINDOW w AS (PARTITION BY auction ORDER BY ts
             ROWS BETWEEN 9 PRECEDING AND CURRENT ROW);
