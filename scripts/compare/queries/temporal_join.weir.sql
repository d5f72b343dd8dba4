-- Event-time temporal join (docs/sql.md, "Temporal joins"): every bid with its bidder's latest
-- bid above 95,000 as of the bid's time. The versioned table is a versioned view, the last row
-- of each bidder by its time attribute among a second read of the bids filtered to the prices
-- above 95,000 (about 5% of the bids, one every 40 s per bidder): each such bid that is later
-- than its bidder's latest so far starts a version of its bidder at its time (an older one
-- changes nothing). A bid waits until the watermark passes its time, then joins the version of
-- its bidder at or before its time and is emitted once (insert-only; a bid above 95,000 joins
-- itself); a bid with no version yet is left out (INNER). Late rows: a bid at or behind the
-- watermark is dropped (counted), and so is a version at or behind the versioned side's. The
-- generated bids have no two above 95,000 of one bidder at one time, so "the version at a
-- time" is never ambiguous. The result table's options (compare.py fills them in): the
-- blackhole sink for the timed runs, a Parquet filesystem sink for the check; the parallelism
-- comes from `weir run -p`.
CREATE TEMPORARY VIEW high_bids AS
SELECT bidder, auction AS high_auction, price AS high_price, date_time AS high_time, ts
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder ORDER BY ts DESC) AS rn
      FROM bids WHERE price > 95000)
WHERE rn = 1;

CREATE TABLE result (
  auction      BIGINT,
  bidder       BIGINT,
  price        BIGINT,
  date_time    BIGINT,
  high_auction BIGINT,
  high_price   BIGINT,
  high_time    BIGINT
) WITH (${sink_options});

INSERT INTO result
SELECT b.auction, b.bidder, b.price, b.date_time, h.high_auction, h.high_price, h.high_time
FROM bids b
JOIN high_bids FOR SYSTEM_TIME AS OF b.ts AS h ON b.bidder = h.bidder;
