-- The window join as a batch query over every row (none late): each Google bid with each Apple
-- bid of the same auction and 10 s window [k*10000, (k+1)*10000) in epoch milliseconds.
SELECT L.window_start, L.window_start + 10000 AS window_end, L.auction,
       L.bidder AS l_bidder, L.price AS l_price, L.date_time AS l_time,
       R.bidder AS r_bidder, R.price AS r_price, R.date_time AS r_time
FROM (SELECT *, date_time // 10000 * 10000 AS window_start FROM ${bids}
      WHERE channel = 'Google') L
JOIN (SELECT *, date_time // 10000 * 10000 AS window_start FROM ${bids}
      WHERE channel = 'Apple') R
  ON L.window_start = R.window_start AND L.auction = R.auction
