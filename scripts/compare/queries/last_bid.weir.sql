-- Last-row deduplication (docs/sql.md, "Top-N and the last row without a window"): the latest
-- bid of each auction in event time, ROW_NUMBER() ... ORDER BY the time attribute DESC = 1.
-- A later bid replaces its auction's row (-U of the old, +U of the new), an older one changes
-- nothing; no row is late. The table the changes leave is one row per auction (10,000). The
-- result table's options (compare.py fills them in): the blackhole sink for the timed runs, a
-- 'changelog-json' filesystem sink for the check, which compare.py materializes; the
-- parallelism comes from `weir run -p`.
CREATE TABLE result (
  auction   BIGINT,
  bidder    BIGINT,
  price     BIGINT,
  date_time BIGINT
) WITH (${sink_options});

INSERT INTO result
SELECT auction, bidder, price, date_time
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY ts DESC) AS rn FROM bids)
WHERE rn = 1;
