-- A window join of the bids with themselves: in each 10 s tumbling window, every Google bid of
-- an auction with every Apple bid of the same auction and window (about 63,000 pairs per
-- million bids: an auction gets a bid of each channel every 40 s on average). Two window TVFs
-- over the same table, each filtered on a channel, joined on window_start, window_end and
-- auction (docs/sql.md, "Window joins"). A bid whose window had already ended against the
-- watermark when it came (its window's last millisecond at or behind it) is late on the side
-- that reads it: dropped, counted, joined with nothing. The result table's options (compare.py
-- fills them in): the blackhole sink for the timed runs, a Parquet filesystem sink for the
-- check; the parallelism comes from `weir run -p`.
CREATE TABLE result (
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  auction      BIGINT,
  l_bidder     BIGINT,
  l_price      BIGINT,
  l_time       BIGINT,
  r_bidder     BIGINT,
  r_price      BIGINT,
  r_time       BIGINT
) WITH (${sink_options});

INSERT INTO result
SELECT L.window_start, L.window_end, L.auction, L.bidder, L.price, L.date_time,
       R.bidder, R.price, R.date_time
FROM (SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
      WHERE channel = 'Google') L
JOIN (SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
      WHERE channel = 'Apple') R
  ON L.window_start = R.window_start AND L.window_end = R.window_end
  AND L.auction = R.auction;
