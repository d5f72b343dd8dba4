-- Top-10 bids by price per auction without a window, the row number not selected. The query
-- of queries/top10.weir.sql in Flink SQL: in streaming mode Flink's Top-N over an insert-only
-- input (AppendOnlyTopNFunction; an updating result: a bid entering an auction's top 10 is
-- +I, the one it pushes out -D; equal prices are ranked by arrival). The sink table is
-- `results` (RESULT is a reserved word in Flink). The sink's options (compare.py fills them
-- in): the blackhole sink for the timed runs (streaming mode), a CSV filesystem sink for the
-- check, which runs in batch mode (Flink's filesystem sink takes inserts only; the batch result
-- is the final table of the changes); the parallelism is Flink's `parallelism.default`.
CREATE TABLE results (
  auction   BIGINT,
  bidder    BIGINT,
  price     BIGINT,
  date_time BIGINT
) WITH (${sink_options});

INSERT INTO results
SELECT auction, bidder, price, date_time
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bids)
WHERE rn <= 10;
