-- OVER aggregation with a RANGE frame: each bid with COUNT(*), SUM(price) and MAX(price) over
-- the bids of its auction at most 10 s older, itself and every bid of the same time included
-- (docs/sql.md, "OVER aggregation"): one row out per bid that is not late. Late bids as in
-- queries/over_rows.weir.sql. The result table's options (compare.py fills them in): the
-- blackhole sink for the timed runs, a Parquet filesystem sink for the check; the parallelism
-- comes from `weir run -p`.
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
             RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW);
