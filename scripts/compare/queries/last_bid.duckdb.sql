-- The latest bid of each auction by date_time, over every row. Equal times are ranked by
-- bidder, then price, as reference.py breaks them.
SELECT auction, bidder, price, date_time
FROM ${bids}
QUALIFY ROW_NUMBER() OVER (PARTITION BY auction ORDER BY date_time DESC, bidder, price) = 1
