-- The interval join as a batch query over every row: each bid with the later bids of its
-- auction within 1000 ms. A plain join on auction with the time range as a filter compares
-- every pair of bids of an auction (about 10^10 pairs at 10,000,000 rows: 165 s in
-- docs/performance.md), so the join is on (auction, 1-second bucket): a later bid within
-- 1000 ms of `a` is in a's bucket or the next one, so `a` is put in both, and every pair is
-- found exactly once (b has one bucket).
SELECT a.auction,
       a.bidder AS a_bidder, a.price AS a_price, a.date_time AS a_time,
       b.bidder AS b_bidder, b.price AS b_price, b.date_time AS b_time
FROM (SELECT auction, bidder, price, date_time,
             unnest([date_time // 1000, date_time // 1000 + 1]) AS bucket
      FROM ${bids}) a
JOIN (SELECT auction, bidder, price, date_time, date_time // 1000 AS bucket
      FROM ${bids}) b
  ON a.auction = b.auction AND a.bucket = b.bucket
WHERE b.date_time > a.date_time AND b.date_time <= a.date_time + 1000
