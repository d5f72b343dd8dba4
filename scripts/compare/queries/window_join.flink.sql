-- A window join of the bids with themselves: in each 10 s tumbling window, every Google bid of
-- an auction with every Apple bid of the same auction and window. The query of
-- queries/window_join.weir.sql in Flink SQL (Flink's window join, WindowJoinOperator: a row
-- whose window's last millisecond is at or behind the operator's watermark is late and
-- dropped); the sink table is `results` (RESULT is a reserved word in Flink). The sink's
-- options (compare.py fills them in): the blackhole sink for the timed runs, a CSV filesystem
-- sink for the check; the parallelism is Flink's `parallelism.default`.
CREATE TABLE results (
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

INSERT INTO results
SELECT L.window_start, L.window_end, L.auction, L.bidder, L.price, L.date_time,
       R.bidder, R.price, R.date_time
FROM (SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
      WHERE channel = 'Google') L
JOIN (SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
      WHERE channel = 'Apple') R
  ON L.window_start = R.window_start AND L.window_end = R.window_end
  AND L.auction = R.auction;
