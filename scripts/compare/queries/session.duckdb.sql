-- Session windows per bidder with a gap of 3 s, as Weir and Flink define them
-- (docs/windows.md): a row opens [date_time, date_time + 3000) and merges with every session
-- of its bidder it touches, bounds inclusive. In date_time order a row starts a new session
-- when it comes more than 3000 ms after the previous row of its bidder (exactly 3000 ms apart
-- still share one); a session is [first, last + 3000).
SELECT bidder,
       MIN(date_time) AS window_start,
       MAX(date_time) + 3000 AS window_end,
       COUNT(*) AS bids, MAX(price) AS max_price
FROM (
  SELECT bidder, price, date_time,
         SUM(new_session) OVER (PARTITION BY bidder ORDER BY date_time
                                ROWS UNBOUNDED PRECEDING) AS session
  FROM (
    SELECT bidder, price, date_time,
           CASE WHEN date_time - LAG(date_time) OVER (PARTITION BY bidder ORDER BY date_time) <= 3000
                THEN 0 ELSE 1 END AS new_session
    FROM ${bids}
  )
)
GROUP BY bidder, session
