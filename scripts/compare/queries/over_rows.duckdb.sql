-- The ROWS OVER aggregation over every row (none late): each bid with the aggregates of the
-- last 10 bids of its auction by date_time. Bids of one auction at the same time are ordered
-- by bidder, then price, as reference.py orders them.
SELECT auction, bidder, price, date_time,
       COUNT(*) OVER w AS bids, (SUM(price) OVER w)::BIGINT AS total, MAX(price) OVER w AS max_price
FROM ${bids}
WINDOW w AS (PARTITION BY auction ORDER BY date_time, bidder, price
             ROWS BETWEEN 9 PRECEDING AND CURRENT ROW)
