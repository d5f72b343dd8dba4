-- The RANGE OVER aggregation over every row (none late): each bid with the aggregates of the
-- bids of its auction at most 10000 ms older, bids of the same time included.
SELECT auction, bidder, price, date_time,
       COUNT(*) OVER w AS bids, (SUM(price) OVER w)::BIGINT AS total, MAX(price) OVER w AS max_price
FROM ${bids}
WINDOW w AS (PARTITION BY auction ORDER BY date_time
             RANGE BETWEEN 10000 PRECEDING AND CURRENT ROW)
