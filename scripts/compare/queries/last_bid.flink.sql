-- The latest bid of each auction in event time (ROW_NUMBER() ... ORDER BY ts DESC = 1). The
-- query of queries/last_bid.weir.sql in Flink SQL: in streaming mode Flink's event-time
-- keep-last-row deduplication (RowTimeDeduplicateFunction, keepLastRow; an updating result:
-- a later bid retracts its auction's row, -U/+U; of two rows at one time the later arrival
-- wins). The sink table is `results` (RESULT is a reserved word in Flink). The sink's options
-- (compare.py fills them in): the blackhole sink for the timed runs (streaming mode), a CSV
-- filesystem sink for the check, which runs in batch mode (Flink's filesystem sink takes
-- inserts only; the batch result is the final table of the changes); the parallelism is
-- Flink's `parallelism.default`.
CREATE TABLE results (
  auction   BIGINT,
  bidder    BIGINT,
  price     BIGINT,
  date_time BIGINT
) WITH (${sink_options});

INSERT INTO results
SELECT auction, bidder, price, date_time
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY ts DESC) AS rn FROM bids)
WHERE rn = 1;
