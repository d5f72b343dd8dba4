-- Deduplication keeping the first bid of each bidder in event-time order. The query of
-- queries/dedup.weir.sql in Flink SQL; the sink table is `results` (RESULT is a reserved word
-- in Flink). Flink runs it as its event-time keep-first-row deduplication, which emits each
-- bidder's row once the watermark passes it (insert-only) and drops rows behind the watermark
-- (RowTimeDeduplicateKeepFirstRowFunction). The sink's options (compare.py fills them in): the
-- blackhole sink for the timed runs, a CSV filesystem sink for the check; the parallelism is
-- Flink's `parallelism.default`.
CREATE TABLE results (
  bidder    BIGINT,
  auction   BIGINT,
  price     BIGINT,
  date_time BIGINT
) WITH (${sink_options});

INSERT INTO results
SELECT bidder, auction, price, date_time
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder ORDER BY ts ASC) AS rn FROM bids)
WHERE rn = 1;
