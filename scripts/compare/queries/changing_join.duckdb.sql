-- Every bid with its auction's highest price, as a batch: the bids joined with their
-- GROUP BY auction (the final table of Weir's and Flink's changes).
SELECT b.auction, b.bidder, b.price, b.date_time, m.top
FROM ${bids} b
JOIN (SELECT auction, MAX(price) AS top FROM ${bids} GROUP BY auction) m
  ON b.auction = m.auction
