-- Tumbling windows of 10 s per auction: [k*10000, (k+1)*10000) in epoch milliseconds.
SELECT auction,
       date_time // 10000 * 10000 AS window_start,
       date_time // 10000 * 10000 + 10000 AS window_end,
       COUNT(*) AS bids, SUM(price)::BIGINT AS total, MAX(price) AS max_price
FROM ${bids}
GROUP BY ALL
