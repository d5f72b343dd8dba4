-- A regular join with a changing dimension (docs/sql.md, "Regular joins"): every bid joined
-- with its auction's highest price so far, a GROUP BY without a window over a second read of
-- the bids. The GROUP BY's results update (a new highest price replaces the auction's row:
-- -U/+U), so the join is a regular join: it keeps every bid and every auction's current row,
-- and a replaced row retracts the pairs it made and joins the bids again with the new one. An
-- auction's maximum changes about ln(bids per auction) times, so the changes grow with the
-- bids, not with their square (a COUNT(*) would change on every bid). No row is late. The
-- table the changes leave is one row per bid with its auction's highest price. The result
-- table's options (compare.py fills them in): the blackhole sink for the timed runs, a
-- 'changelog-json' filesystem sink for the check, which compare.py materializes; the
-- parallelism comes from `weir run -p`. The join holds its rows in memory up to
-- 'state.buffer-size' per subtask (default 32 MiB) and reads and writes keyed state row by row
-- beyond it; the 10M bids' rows take about 1 GB at parallelism 1, so the buffer is 2 GiB (Flink,
-- with its default heap state backend, holds them all on the JVM heap).
SET 'state.buffer-size' = '2gb';

CREATE TABLE result (
  auction   BIGINT,
  bidder    BIGINT,
  price     BIGINT,
  date_time BIGINT,
  top       BIGINT
) WITH (${sink_options});

INSERT INTO result
SELECT b.auction, b.bidder, b.price, b.date_time, m.top
FROM bids b
JOIN (SELECT auction, MAX(price) AS top FROM bids GROUP BY auction) m
  ON b.auction = m.auction;
