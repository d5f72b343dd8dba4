-- The GROUP BY without a window as a batch: per auction COUNT(*), SUM(price), MAX(price) over
-- every row (the final table of Weir's and Flink's changes).
SELECT auction, COUNT(*) AS bids, SUM(price)::BIGINT AS total, MAX(price) AS top
FROM ${bids}
GROUP BY auction
