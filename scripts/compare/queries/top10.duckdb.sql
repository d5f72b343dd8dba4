-- The 10 highest bids of each auction, over every row. Equal prices are ranked by bidder, then
-- date_time, as reference.py breaks them.
SELECT auction, bidder, price, date_time
FROM ${bids}
QUALIFY ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, bidder, date_time) <= 10
