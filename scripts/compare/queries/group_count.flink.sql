-- A GROUP BY without a window: per auction COUNT(*), SUM(price), MAX(price) over every bid.
-- The query of queries/group_count.weir.sql in Flink SQL (Flink's GroupAggFunction: an
-- updating result, +I then -U/+U per change, without mini-batch one change per bid that
-- changes the row). The sink table is `results` (RESULT is a reserved word in Flink). The
-- sink's options (compare.py fills them in): the blackhole sink for the timed runs (streaming
-- mode), a CSV filesystem sink for the check, which runs in batch mode (Flink's filesystem sink
-- takes inserts only; the batch result is the final table of the changes); the parallelism is
-- Flink's `parallelism.default`.
CREATE TABLE results (
  auction BIGINT,
  bids    BIGINT,
  total   BIGINT,
  top     BIGINT
) WITH (${sink_options});

INSERT INTO results
SELECT auction, COUNT(*) AS bids, SUM(price) AS total, MAX(price) AS top
FROM bids
GROUP BY auction;
