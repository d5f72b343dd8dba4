-- Every bid with its bidder's latest bid above 95,000 at or before its time, as a batch (an
-- ASOF join). A batch has no arrival order, so every bid above 95,000 is a version of its
-- bidder here, also a late one that the streaming view skips (it comes after a later bid of its
-- bidder); compare.py compares it with the reference read the same way (README.md).
SELECT b.auction, b.bidder, b.price, b.date_time, h.high_auction, h.high_price, h.high_time
FROM ${bids} b
ASOF JOIN (SELECT bidder, auction AS high_auction, price AS high_price, date_time AS high_time
           FROM ${bids} WHERE price > 95000) h
  ON b.bidder = h.bidder AND b.date_time >= h.high_time
