-- Top-N without a window (docs/sql.md, "Top-N and the last row without a window"): the 10
-- highest bids of each auction over every bid so far, without the row number (rows enter the
-- top 10 with +I and leave it with -D). No row is late. The table the changes leave is the 10
-- highest bids per auction (fewer where an auction has fewer bids). Equal prices are ranked by
-- the encoded row. The result table's options (compare.py fills them in): the blackhole sink
-- for the timed runs, a 'changelog-json' filesystem sink for the check, which compare.py
-- materializes; the parallelism comes from `weir run -p`.
CREATE TABLE result (
  auction   BIGINT,
  bidder    BIGINT,
  price     BIGINT,
  date_time BIGINT
) WITH (${sink_options});

INSERT INTO result
SELECT auction, bidder, price, date_time
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bids)
WHERE rn <= 10;
