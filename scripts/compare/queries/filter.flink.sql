-- Filter and project: the bids above 90,000 (prices are 1..100,000, so about 10% pass).
-- The query of queries/filter.weir.sql in Flink SQL; the sink table is `results` (RESULT is a
-- reserved word in Flink). The sink's options (compare.py fills them in): the blackhole sink
-- for the timed runs, a CSV filesystem sink for the check; the parallelism is Flink's
-- `parallelism.default`.
CREATE TABLE results (
  auction   BIGINT,
  bidder    BIGINT,
  price     BIGINT,
  date_time BIGINT
) WITH (${sink_options});

INSERT INTO results
SELECT auction, bidder, price, date_time
FROM bids
WHERE price > 90000;
