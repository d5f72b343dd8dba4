-- Filter and project: the bids above 90,000 (prices are 1..100,000, so about 10% pass).
SELECT auction, bidder, price, date_time
FROM ${bids}
WHERE price > 90000
