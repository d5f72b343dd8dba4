-- An interval join of the bids with themselves: each bid with the later bids of its auction
-- within one second. The query of queries/interval_join.weir.sql in Flink SQL; the sink table
-- is `results` (RESULT is a reserved word in Flink). The times written are date_time (BIGINT):
-- Flink refuses to write two time attributes (a.ts and b.ts) into one sink. Flink keeps a late
-- bid and joins it with the rows of the other side it still holds (TimeIntervalJoin), where
-- Weir drops it: see scripts/compare/README.md. The sink's options (compare.py fills them
-- in): the blackhole sink for the timed runs, a CSV filesystem sink for the check; the
-- parallelism is Flink's `parallelism.default`.
CREATE TABLE results (
  auction  BIGINT,
  a_bidder BIGINT,
  a_price  BIGINT,
  a_time   BIGINT,
  b_bidder BIGINT,
  b_price  BIGINT,
  b_time   BIGINT
) WITH (${sink_options});

INSERT INTO results
SELECT a.auction, a.bidder, a.price, a.date_time, b.bidder, b.price, b.date_time
FROM bids a JOIN bids b ON a.auction = b.auction
  AND b.ts > a.ts AND b.ts <= a.ts + INTERVAL '1' SECOND;
