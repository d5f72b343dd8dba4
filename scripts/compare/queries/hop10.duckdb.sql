-- Sliding (hop) windows of 10 s starting every 2 s, per auction: a row is in every
-- window [k*2000, k*2000 + 10000) that contains its date_time, that is for k from
-- (date_time - 10000) // 2000 + 1 to date_time // 2000 (date_time > 0 here).
SELECT auction,
       k * 2000 AS window_start,
       k * 2000 + 10000 AS window_end,
       COUNT(*) AS bids, SUM(price)::BIGINT AS total, MAX(price) AS max_price
FROM (
  SELECT auction, price,
         unnest(generate_series((date_time - 10000) // 2000 + 1, date_time // 2000)) AS k
  FROM ${bids}
)
GROUP BY ALL
