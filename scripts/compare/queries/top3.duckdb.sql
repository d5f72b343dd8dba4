-- The 3 auctions with the largest SUM(price) in each 10 s tumbling window, over every row
-- (none late). Equal totals are ranked by auction, as reference.py ranks them.
SELECT window_start, window_end, auction, bids, total, rn
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start ORDER BY total DESC, auction) AS rn
  FROM (
    SELECT date_time // 10000 * 10000 AS window_start,
           date_time // 10000 * 10000 + 10000 AS window_end,
           auction, COUNT(*) AS bids, SUM(price)::BIGINT AS total
    FROM ${bids}
    GROUP BY ALL
  )
)
WHERE rn <= 3
