-- Session windows per bidder with a gap of 3 s. The result table's options (compare.py fills
-- them in): the blackhole sink for the timed runs, a Parquet filesystem sink for the check; the
-- parallelism comes from `weir run -p`.
CREATE TABLE result (
  bidder       BIGINT,
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  bids         BIGINT,
  max_price    BIGINT
) WITH (${sink_options});

INSERT INTO result
SELECT bidder, window_start, window_end, COUNT(*), MAX(price)
FROM TABLE(SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(ts), INTERVAL '3' SECOND))
GROUP BY bidder, window_start, window_end;
