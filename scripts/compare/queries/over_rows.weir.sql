-- OVER aggregation with a ROWS frame: each bid with COUNT(*), SUM(price) and MAX(price) over
-- the last 10 bids of its auction in event-time order, itself included (docs/sql.md, "OVER
-- aggregation"): one row out per bid that is not late. A bid waits in keyed state until the
-- watermark passes its time, then is emitted once with its frame's aggregates; a bid at or
-- behind the watermark is late (dropped, counted). The result table's options (compare.py
-- fills them in): the blackhole sink for the timed runs, a Parquet filesystem sink for the
-- check; the parallelism comes from `weir run -p`.
CREATE TABLE result (
  auction   BIGINT,
  bidder    BIGINT,
  price     BIGINT,
  date_time BIGINT,
  bids      BIGINT,
  total     BIGINT,
  max_price BIGINT
) WITH (${sink_options});

INSERT INTO result
SELECT auction, bidder, price, date_time,
       COUNT(*) OVER w, SUM(price) OVER w, MAX(price) OVER w
FROM bids
WINDOW w AS (PARTITION BY auction ORDER BY ts
             ROWS BETWEEN 9 PRECEDING AND CURRENT ROW);
