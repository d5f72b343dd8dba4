-- Filter and project: the bids above 90,000 (prices are 1..100,000, so about 10% pass). The
-- result table's options (compare.py fills them in): the blackhole sink for the timed runs, a
-- Parquet filesystem sink for the check; the parallelism comes from `weir run -p`.
CREATE TABLE result (
  auction   BIGINT,
  bidder    BIGINT,
  price     BIGINT,
  date_time BIGINT
) WITH (${sink_options});

INSERT INTO result
SELECT auction, bidder, price, date_time
FROM bids
WHERE price > 90000;
