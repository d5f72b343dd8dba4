-- Enrichment: every bid joined with its auction's row of the auctions file. The query of
-- queries/enrichment.weir.sql in Flink SQL: a regular inner join of the bids stream with a
-- bounded filesystem table (insert-only: neither side retracts; Flink keeps both sides' rows in
-- its join state, the bids too). The auctions columns are nullable: for CSV the header becomes
-- a row of NULLs ('csv.ignore-parse-errors', as in queries/bids.flink.sql), whose NULL id
-- joins nothing. The sink table is `results` (RESULT is a reserved word in Flink). The sink's
-- options (compare.py fills them in): the blackhole sink for the timed runs, a CSV filesystem
-- sink for the check; the parallelism is Flink's `parallelism.default`.
CREATE TABLE auctions (
  id       BIGINT,
  seller   BIGINT,
  category STRING
) WITH (
  'connector' = 'filesystem',
  'path' = '${auctions_path}',
  'format' = '${auctions_format}'${auctions_options}
);

CREATE TABLE results (
  auction   BIGINT,
  bidder    BIGINT,
  price     BIGINT,
  date_time BIGINT,
  seller    BIGINT,
  category  STRING
) WITH (${sink_options});

INSERT INTO results
SELECT b.auction, b.bidder, b.price, b.date_time, a.seller, a.category
FROM bids b JOIN auctions a ON b.auction = a.id;
