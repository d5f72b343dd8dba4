-- Event-time temporal join: every bid with its bidder's latest bid above 95,000 as of the
-- bid's time. The query of queries/temporal_join.weir.sql in Flink SQL: the versioned view is
-- Flink's event-time keep-last-row deduplication (a later bid of the bidder replaces its row,
-- +U), the join its TemporalRowTimeJoinOperator, which keeps the bids in state until the
-- watermark passes them and then joins each with the version at or before its time. Flink
-- drops no row as late: a late bid is joined with the versions its bidder still holds, a late
-- version is added to them (scripts/compare/README.md, Flink). The sink table is `results`
-- (RESULT is a reserved word in Flink). The sink's options (compare.py fills them in): the
-- blackhole sink for the timed runs, a CSV filesystem sink for the check; the parallelism is
-- Flink's `parallelism.default`.
CREATE TEMPORARY VIEW high_bids AS
SELECT bidder, auction AS high_auction, price AS high_price, date_time AS high_time, ts
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder ORDER BY ts DESC) AS rn
      FROM bids WHERE price > 95000)
WHERE rn = 1;

CREATE TABLE results (
  auction      BIGINT,
  bidder       BIGINT,
  price        BIGINT,
  date_time    BIGINT,
  high_auction BIGINT,
  high_price   BIGINT,
  high_time    BIGINT
) WITH (${sink_options});

INSERT INTO results
SELECT b.auction, b.bidder, b.price, b.date_time, h.high_auction, h.high_price, h.high_time
FROM bids b
JOIN high_bids FOR SYSTEM_TIME AS OF b.ts AS h ON b.bidder = h.bidder;
