-- The first bid of each bidder by date_time, over every row (none late). Equal times are
-- ranked by auction, then price, as reference.py breaks them.
SELECT bidder, auction, price, date_time
FROM ${bids}
QUALIFY ROW_NUMBER() OVER (PARTITION BY bidder ORDER BY date_time, auction, price) = 1
