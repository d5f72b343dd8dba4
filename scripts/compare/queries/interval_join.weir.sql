-- An interval join of the bids with themselves: each bid with the later bids of its auction
-- within one second (about 1,000,000 pairs from 10,000,000 bids: an auction gets a bid every
-- 10 s on average). The table is read once and feeds both sides. A bid at or behind the
-- watermark is late on each side (docs/sql.md, interval joins): it joins nothing and is
-- dropped twice. The times are the bids' date_time (BIGINT milliseconds), so that neither
-- engine writes a time attribute. The result table's options (compare.py fills them in): the
-- blackhole sink for the timed runs, a Parquet filesystem sink for the check; the parallelism
-- comes from `weir run -p`.
CREATE TABLE result (
  auction  BIGINT,
  a_bidder BIGINT,
  a_price  BIGINT,
  a_time   BIGINT,
  b_bidder BIGINT,
  b_price  BIGINT,
  b_time   BIGINT
) WITH (${sink_options});

INSERT INTO result
SELECT a.auction, a.bidder, a.price, a.date_time, b.bidder, b.price, b.date_time
FROM bids a JOIN bids b ON a.auction = b.auction
  AND b.ts > a.ts AND b.ts <= a.ts + INTERVAL '1' SECOND;
