-- A regular join with a changing dimension: every bid joined with its auction's highest price
-- so far (a GROUP BY without a window over a second read of the bids). The query of
-- queries/changing_join.weir.sql in Flink SQL: in streaming mode Flink's regular join
-- (StreamingJoinOperator) of the insert-only bids with the updating GROUP BY (GroupAggFunction
-- emits a change only when an auction's MAX changes), keeping both sides in its join state; a
-- new maximum retracts the pairs of the old one. The sink table is `results` (RESULT is a
-- reserved word in Flink). The sink's options (compare.py fills them in): the blackhole sink
-- for the timed runs (streaming mode), a CSV filesystem sink for the check, which runs in
-- batch mode (Flink's filesystem sink takes inserts only; the batch result is the final table
-- of the changes); the parallelism is Flink's `parallelism.default`.
CREATE TABLE results (
  auction   BIGINT,
  bidder    BIGINT,
  price     BIGINT,
  date_time BIGINT,
  top       BIGINT
) WITH (${sink_options});

INSERT INTO results
SELECT b.auction, b.bidder, b.price, b.date_time, m.top
FROM bids b
JOIN (SELECT auction, MAX(price) AS top FROM bids GROUP BY auction) m
  ON b.auction = m.auction;
