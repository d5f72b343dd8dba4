-- Enrichment: every bid joined with its auction's row of a bounded dimension table (10,000
-- auctions, ids 1000 to 10999, a file next to the bids in the same format; docs/sql.md, "Joins
-- with a bounded table"). The auctions table has no watermark: it is read to its end first
-- and kept in keyed state; bids that come before it has ended wait, later ones are joined as
-- they come. No bid is late for the join: one row out per bid. The result table's options
-- (compare.py fills them in): the blackhole sink for the timed runs, a Parquet filesystem sink
-- for the check; the parallelism comes from `weir run -p`.
CREATE TABLE auctions (
  id       BIGINT NOT NULL,
  seller   BIGINT NOT NULL,
  category VARCHAR NOT NULL
) WITH (
  'connector' = 'filesystem',
  'path' = '${auctions_path}',
  'format' = '${auctions_format}'${auctions_options}
);

CREATE TABLE result (
  auction   BIGINT,
  bidder    BIGINT,
  price     BIGINT,
  date_time BIGINT,
  seller    BIGINT,
  category  VARCHAR
) WITH (${sink_options});

INSERT INTO result
SELECT b.auction, b.bidder, b.price, b.date_time, a.seller, a.category
FROM bids b JOIN auctions a ON b.auction = a.id;
