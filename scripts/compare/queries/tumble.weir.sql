-- Tumbling windows of 10 s per auction. The result table's options (compare.py fills them in):
-- the blackhole sink for the timed runs, a Parquet filesystem sink for the check; the
-- parallelism comes from `weir run -p`.
CREATE TABLE result (
  auction      BIGINT,
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  bids         BIGINT,
  total        BIGINT,
  max_price    BIGINT
) WITH (${sink_options});

INSERT INTO result
SELECT auction, window_start, window_end, COUNT(*), SUM(price), MAX(price)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
