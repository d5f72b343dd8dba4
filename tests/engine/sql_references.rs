//! Interval joins, first-row deduplication, window Top-N, OVER aggregations and joins with a
//! bounded table give one answer whatever the parallelism or the split size. Files with late and
//! out-of-order rows are joined inner and left outer at parallelism 1, 2 and 4 and with the
//! default and 64 KiB splits; deduplicated per key at parallelism 1, 2 and 4; ranked per
//! tumbling window and aggregated over ROWS and RANGE frames, each at parallelism 1, 2 and 4
//! and with 16 KiB splits; and joined with a dimension file at parallelism 1, 2 and 4. Each
//! result equals a reference computed here by reading each file from its first row to its last
//! (a row is late when it is at or behind its own file's watermark before it, or for a window,
//! when the watermark before it had reached the window's last millisecond; a late row joins,
//! counts or ranks nothing; the dimension file is read in full before any row is joined).

use crate::support::{Rng, format_rows, read_parquet_dir};
use std::path::Path;
use weir::Engine;

/// Rows in each file.
const ROWS: usize = 6_000;
/// Keys the rows spread over.
const KEYS: u64 = 25;
/// The watermarks' out-of-orderness, ms (`ts - INTERVAL '1' SECOND` is max - 1000 - 1).
const OOO_MS: i64 = 1_000;
/// The join's bounds on `s.ts - o.ts`, ms.
const LOWER_MS: i64 = -2_000;
const UPPER_MS: i64 = 3_000;

/// One row: `(key, value, ts)`, in file order.
type Row = (i64, i64, i64);

/// Rows 25 ms apart on average, up to 800 ms out of order, 5% late by 2 to 20 s.
fn rows(seed: u64) -> Vec<Row> {
    let mut rng = Rng(seed);
    (0..ROWS)
        .map(|i| {
            let on_time = 1_000_000 + i as i64 * 25 - rng.below(800) as i64;
            let ts = if rng.below(100) < 5 {
                on_time - 2_000 - rng.below(18_000) as i64
            } else {
                on_time
            };
            (rng.below(KEYS) as i64, rng.below(1_000_000) as i64, ts)
        })
        .collect()
}

/// The rows not late against their own file's watermark (emitted on every advance).
fn on_time(rows: &[Row]) -> (Vec<Row>, usize) {
    on_time_by(rows, OOO_MS)
}

/// [`on_time`] with the out-of-orderness `ooo` ms.
fn on_time_by(rows: &[Row], ooo: i64) -> (Vec<Row>, usize) {
    let mut max: Option<i64> = None;
    let mut kept = Vec::new();
    let mut late = 0;
    for &row in rows {
        // At or behind the watermark `max - OOO_MS - 1`.
        if max.is_some_and(|m| row.2 < m - ooo) {
            late += 1;
            continue;
        }
        max = Some(max.map_or(row.2, |m| m.max(row.2)));
        kept.push(row);
    }
    (kept, late)
}

/// Inner and left-outer results as the sink's formatted rows, sorted, and the late rows.
fn reference(orders: &[Row], shipments: &[Row]) -> (Vec<String>, Vec<String>, usize) {
    let (o, late_o) = on_time(orders);
    let (s, late_s) = on_time(shipments);
    let mut inner = Vec::new();
    let mut left = Vec::new();
    for a in &o {
        let mut matched = false;
        for b in &s {
            if a.0 == b.0 && b.2 - a.2 >= LOWER_MS && b.2 - a.2 <= UPPER_MS {
                matched = true;
                inner.push(format!("{} | {} | {} | {} | {}", a.0, a.1, a.2, b.1, b.2));
                left.push(format!("{} | {} | {} | {} | {}", a.0, a.1, a.2, b.1, b.2));
            }
        }
        if !matched {
            left.push(format!("{} | {} | {} | NULL | NULL", a.0, a.1, a.2));
        }
    }
    inner.sort();
    left.sort();
    (inner, left, late_o + late_s)
}

/// Sets the `buffer_bytes` option of every operator of type `type_name`; how many there are.
fn set_buffer_bytes(spec: &mut weir::plan::JobSpec, type_name: &str, bytes: u64) -> usize {
    let operators = spec
        .operators
        .iter_mut()
        .filter(|o| o.type_name == type_name);
    let mut count = 0;
    for operator in operators {
        operator.options["buffer_bytes"] = serde_json::json!(bytes);
        count += 1;
    }
    count
}

fn csv(rows: &[Row]) -> String {
    let mut text = String::from("k,v,ts\n");
    for (k, v, t) in rows {
        text.push_str(&format!("{k},{v},{t}\n"));
    }
    text
}

fn job(input: &Path, output: &Path, parallelism: u32, split: Option<&str>) -> String {
    let (input, output) = (input.display(), output.display());
    let split = split.map_or(String::new(), |s| format!(", 'split-size' = '{s}'"));
    let table = |name: &str| {
        format!(
            "CREATE TABLE {name} (k BIGINT, v BIGINT, ts BIGINT,\n\
               WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)\n\
             WITH ('connector' = 'filesystem', 'path' = '{input}/{name}.csv', 'format' = 'csv',\n\
               'batch-size' = '500', 'watermark.interval' = '1'{split});\n"
        )
    };
    let sink = |name: &str| {
        format!(
            "CREATE TABLE {name} (k BIGINT, ov BIGINT, ots BIGINT, sv BIGINT, sts BIGINT)\n\
             WITH ('connector' = 'filesystem', 'path' = '{output}/{name}', 'format' = 'parquet');\n"
        )
    };
    format!(
        "SET 'parallelism' = '{parallelism}';\n{}{}{}{}\
         INSERT INTO inner_out SELECT o.k, o.v, o.ts, s.v, s.ts\n\
           FROM orders o JOIN shipments s ON o.k = s.k\n\
           AND s.ts BETWEEN o.ts - 2000 AND o.ts + 3000;\n\
         INSERT INTO left_out SELECT o.k, o.v, o.ts, s.v, s.ts\n\
           FROM orders o LEFT JOIN shipments s ON o.k = s.k\n\
           AND s.ts >= o.ts - 2000 AND s.ts <= o.ts + 3000;\n",
        table("orders"),
        table("shipments"),
        sink("inner_out"),
        sink("left_out"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn interval_joins_equal_a_sequential_reference_at_every_parallelism_and_split_size() {
    let input = tempfile::tempdir().expect("tempdir");
    let (orders, shipments) = (rows(7), rows(8));
    std::fs::write(input.path().join("orders.csv"), csv(&orders)).expect("write");
    std::fs::write(input.path().join("shipments.csv"), csv(&shipments)).expect("write");
    let (inner, left, late) = reference(&orders, &shipments);
    assert!(late > 400, "the files have late rows ({late})");
    assert!(inner.len() > 10_000, "pairs match ({})", inner.len());
    assert!(left.len() > inner.len(), "some orders match nothing");
    // The rows wait in memory (the default budget), in keyed state (budget 0: written after
    // each batch) or in both (a budget that a few batches outgrow).
    let runs = [
        (1, None, None),
        (2, None, None),
        (4, None, None),
        (2, Some("65536"), None),
        (2, None, Some(0)),
        (2, None, Some(60_000)),
    ];
    for (parallelism, split, buffer_bytes) in runs {
        let output = tempfile::tempdir().expect("tempdir");
        let sql = job(input.path(), output.path(), parallelism, split);
        let engine = Engine::new();
        let mut compiled = engine
            .compile_sql(&sql, "join.sql")
            .await
            .expect("compiles");
        if let Some(bytes) = buffer_bytes {
            let set = set_buffer_bytes(&mut compiled.spec, "interval_join", bytes);
            assert_eq!(set, 2, "both joins get the budget");
        }
        let summary = engine
            .run(&compiled.spec, Some("join.sql"))
            .await
            .expect("runs");
        let dropped: u64 = summary.metrics.operators.iter().map(|o| o.dropped).sum();
        let what = format!("parallelism {parallelism}, split {split:?}, buffer {buffer_bytes:?}");
        assert_eq!(dropped, 2 * late as u64, "late rows, {what}");
        let got_inner = format_rows(&read_parquet_dir(&output.path().join("inner_out")));
        assert!(got_inner == inner, "inner join differs, {what}");
        let got_left = format_rows(&read_parquet_dir(&output.path().join("left_out")));
        assert!(got_left == left, "left join differs, {what}");
    }
}

/// The first row per `v % 2000` in event-time order among the rows not late against the file's
/// watermark: `(key, ts, k)` sorted, as the sink formats them.
fn first_rows(rows: &[Row], ooo: i64) -> Vec<String> {
    let (kept, _) = on_time_by(rows, ooo);
    let mut best: std::collections::BTreeMap<i64, Row> = std::collections::BTreeMap::new();
    for row in kept {
        let key = row.1 % 2_000;
        let slot = best.entry(key).or_insert(row);
        if row.2 < slot.2 {
            *slot = row;
        }
    }
    let mut out: Vec<String> = best
        .iter()
        .map(|(key, r)| format!("{key} | {} | {}", r.2, r.0))
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn first_row_dedup_equals_a_sequential_reference_at_every_parallelism() {
    let input = tempfile::tempdir().expect("tempdir");
    // Distinct times, so no key has two first rows.
    let mut orders = rows(9);
    for (i, row) in orders.iter_mut().enumerate() {
        row.2 = row.2 * 10_000 + i as i64;
    }
    std::fs::write(input.path().join("orders.csv"), csv(&orders)).expect("write");
    // The times are scaled by 10,000, and so is the watermark's delay.
    let expected = first_rows(&orders, 10_000 * OOO_MS);
    assert!(expected.len() > 1_000, "keys ({})", expected.len());
    for parallelism in [1, 2, 4] {
        let output = tempfile::tempdir().expect("tempdir");
        let sql = format!(
            "SET 'parallelism' = '{parallelism}';\n\
             CREATE TABLE orders (k BIGINT, v BIGINT, ts BIGINT,\n\
               WATERMARK FOR ts AS ts - INTERVAL '10000' SECOND)\n\
             WITH ('connector' = 'filesystem', 'path' = '{}/orders.csv', 'format' = 'csv',\n\
               'batch-size' = '500', 'watermark.interval' = '1');\n\
             CREATE TABLE firsts (key BIGINT, ts BIGINT, k BIGINT)\n\
             WITH ('connector' = 'filesystem', 'path' = '{}/firsts', 'format' = 'parquet');\n\
             INSERT INTO firsts SELECT key, ts, k FROM (\n\
               SELECT key, ts, k, ROW_NUMBER() OVER (PARTITION BY key ORDER BY ts) AS rn\n\
               FROM (SELECT v % 2000 AS key, ts, k FROM orders))\n\
             WHERE rn = 1;\n",
            input.path().display(),
            output.path().display()
        );
        let engine = Engine::new();
        let compiled = engine
            .compile_sql(&sql, "dedup.sql")
            .await
            .expect("compiles");
        engine
            .run(&compiled.spec, Some("dedup.sql"))
            .await
            .expect("runs");
        let got = format_rows(&read_parquet_dir(&output.path().join("firsts")));
        assert!(
            got == expected,
            "first rows differ at parallelism {parallelism}"
        );
    }
}

/// The window Top-3 reference: per tumbling window of `size` ms and `k % 3`, the three largest
/// `v` among the rows whose window had not ended (its last millisecond at or behind the
/// watermark before the row): `(window_end, group, v, rank)` sorted, as the sink formats them,
/// and the late rows.
fn top3(rows: &[Row], size: i64) -> (Vec<String>, usize) {
    let mut max: Option<i64> = None;
    let mut late = 0;
    let mut windows: std::collections::BTreeMap<(i64, i64), Vec<i64>> = Default::default();
    for &(k, v, ts) in rows {
        let end = ts - ts.rem_euclid(size) + size;
        // The window's last millisecond, end - 1, at or behind the watermark before the row,
        // max - OOO_MS - 1.
        if max.is_some_and(|m| end <= m - OOO_MS) {
            late += 1;
        } else {
            windows.entry((end, k % 3)).or_default().push(v);
        }
        max = Some(max.map_or(ts, |m| m.max(ts)));
    }
    let mut out = Vec::new();
    for ((end, group), mut values) in windows {
        values.sort_unstable_by(|a, b| b.cmp(a));
        for (rank, v) in values.iter().take(3).enumerate() {
            out.push(format!("{end} | {group} | {v} | {}", rank + 1));
        }
    }
    out.sort();
    (out, late)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn window_top_n_equals_a_sequential_reference_at_every_parallelism_and_split_size() {
    let input = tempfile::tempdir().expect("tempdir");
    // Distinct values, so no rank is a tie.
    let mut orders = rows(11);
    for (i, row) in orders.iter_mut().enumerate() {
        row.1 = row.1 * 10_000 + i as i64;
    }
    std::fs::write(input.path().join("orders.csv"), csv(&orders)).expect("write");
    let (expected, late) = top3(&orders, 2_000);
    assert!(late > 100, "the file has late rows ({late})");
    assert!(expected.len() > 400, "ranked rows ({})", expected.len());
    for (parallelism, split) in [(1, ""), (2, ""), (4, ""), (2, ", 'split-size' = '16384'")] {
        let output = tempfile::tempdir().expect("tempdir");
        let sql = format!(
            "SET 'parallelism' = '{parallelism}';\n\
             CREATE TABLE orders (k BIGINT, v BIGINT, ts BIGINT,\n\
               WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)\n\
             WITH ('connector' = 'filesystem', 'path' = '{}/orders.csv', 'format' = 'csv',\n\
               'batch-size' = '500', 'watermark.interval' = '1'{split});\n\
             CREATE TABLE ranked (we BIGINT, g BIGINT, v BIGINT, rn BIGINT)\n\
             WITH ('connector' = 'filesystem', 'path' = '{}/ranked', 'format' = 'parquet');\n\
             INSERT INTO ranked SELECT window_end, g, v, rn FROM (\n\
               SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, g\n\
                                            ORDER BY v DESC) AS rn\n\
               FROM (SELECT window_start, window_end, k % 3 AS g, v\n\
                     FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '2' SECOND))))\n\
             WHERE rn <= 3;\n",
            input.path().display(),
            output.path().display()
        );
        let engine = Engine::new();
        let compiled = engine
            .compile_sql(&sql, "top3.sql")
            .await
            .expect("compiles");
        let summary = engine
            .run(&compiled.spec, Some("top3.sql"))
            .await
            .expect("runs");
        let what = format!("parallelism {parallelism}, split {split:?}");
        let dropped: u64 = summary.metrics.operators.iter().map(|o| o.dropped).sum();
        assert_eq!(dropped, late as u64, "late rows, {what}");
        let got = format_rows(&read_parquet_dir(&output.path().join("ranked")));
        assert!(got == expected, "the ranking differs, {what}");
    }
}

/// The OVER reference: per `k`, in time order among the rows not late, the sum of `v` over the
/// row and the two before it, and the largest `v` of the rows at most `range` older: `(k, ts,
/// v, sum, max)` sorted, as the sink formats them.
fn over(rows: &[Row], ooo: i64, range: i64) -> Vec<String> {
    let (kept, _) = on_time_by(rows, ooo);
    let mut by_key: std::collections::BTreeMap<i64, Vec<Row>> = Default::default();
    for row in kept {
        by_key.entry(row.0).or_default().push(row);
    }
    let mut out = Vec::new();
    for (k, mut rows) in by_key {
        rows.sort_by_key(|r| r.2);
        for (i, &(_, v, ts)) in rows.iter().enumerate() {
            let sum: i64 = rows[i.saturating_sub(2)..=i].iter().map(|r| r.1).sum();
            let max = rows[..=i]
                .iter()
                .filter(|r| r.2 >= ts - range)
                .map(|r| r.1)
                .max()
                .unwrap_or(v);
            out.push(format!("{k} | {ts} | {v} | {sum} | {max}"));
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn over_aggregates_equal_a_sequential_reference_at_every_parallelism_and_split_size() {
    let input = tempfile::tempdir().expect("tempdir");
    // Distinct times, so the order of the rows within a key is plain; half the rows keep the
    // test quick in a debug build (every row advances the watermark and fires on its own).
    let mut orders = rows(13);
    orders.truncate(ROWS / 2);
    for (i, row) in orders.iter_mut().enumerate() {
        row.2 = row.2 * 10_000 + i as i64;
    }
    std::fs::write(input.path().join("orders.csv"), csv(&orders)).expect("write");
    // The times are scaled by 10,000, and so are the watermark's delay and the range (1 s).
    let expected = over(&orders, 10_000 * OOO_MS, 10_000 * 1_000);
    let late = orders.len() - expected.len();
    assert!(late > 100, "the file has late rows ({late})");
    // The rows and histories stay in memory (the default budget), go to keyed state after
    // each batch (budget 0) or now and then (a budget a few batches outgrow).
    let runs = [
        (1, "", None),
        (2, "", None),
        (4, "", None),
        (2, ", 'split-size' = '16384'", None),
        (2, "", Some(0)),
        (1, "", Some(100_000)),
    ];
    for (parallelism, split, buffer_bytes) in runs {
        let output = tempfile::tempdir().expect("tempdir");
        let sql = format!(
            "SET 'parallelism' = '{parallelism}';\n\
             CREATE TABLE orders (k BIGINT, v BIGINT, ts BIGINT,\n\
               WATERMARK FOR ts AS ts - INTERVAL '10000' SECOND)\n\
             WITH ('connector' = 'filesystem', 'path' = '{}/orders.csv', 'format' = 'csv',\n\
               'batch-size' = '500', 'watermark.interval' = '1'{split});\n\
             CREATE TABLE aggregated (k BIGINT, ts BIGINT, v BIGINT, s BIGINT, m BIGINT)\n\
             WITH ('connector' = 'filesystem', 'path' = '{}/aggregated', 'format' = 'parquet');\n\
             INSERT INTO aggregated SELECT k, ts, v,\n\
               SUM(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW),\n\
               MAX(v) OVER (PARTITION BY k ORDER BY ts\n\
                            RANGE BETWEEN 10000000 PRECEDING AND CURRENT ROW)\n\
             FROM orders;\n",
            input.path().display(),
            output.path().display()
        );
        let engine = Engine::new();
        let mut compiled = engine
            .compile_sql(&sql, "over.sql")
            .await
            .expect("compiles");
        if let Some(bytes) = buffer_bytes {
            let set = set_buffer_bytes(&mut compiled.spec, "over_aggregate", bytes);
            assert_eq!(set, 2, "both OVER operators get the budget");
        }
        let summary = engine
            .run(&compiled.spec, Some("over.sql"))
            .await
            .expect("runs");
        let what = format!("parallelism {parallelism}, split {split:?}, buffer {buffer_bytes:?}");
        // Each of the two stacked OVER operators drops the late rows.
        let dropped: u64 = summary.metrics.operators.iter().map(|o| o.dropped).sum();
        assert_eq!(dropped, late as u64, "late rows, {what}");
        let got = format_rows(&read_parquet_dir(&output.path().join("aggregated")));
        assert!(got == expected, "the aggregates differ, {what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_join_with_a_bounded_table_equals_a_reference_at_every_parallelism() {
    let input = tempfile::tempdir().expect("tempdir");
    let orders = rows(17);
    std::fs::write(input.path().join("orders.csv"), csv(&orders)).expect("write");
    // A dimension of keys 0 to 19 (the orders' keys run to 24): keys 0 to 4 have two rows.
    let mut dim = String::from("id,name\n");
    let mut names: std::collections::BTreeMap<i64, Vec<String>> = Default::default();
    for id in (0..20).chain(0..5) {
        let name = format!("n{id}_{}", names.get(&id).map_or(0, Vec::len));
        dim.push_str(&format!("{id},{name}\n"));
        names.entry(id).or_default().push(name);
    }
    std::fs::write(input.path().join("dim.csv"), dim).expect("write");
    let mut expected = Vec::new();
    for &(k, v, ts) in &orders {
        match names.get(&k) {
            Some(list) => {
                for name in list {
                    expected.push(format!("{k} | {v} | {ts} | {name}"));
                }
            }
            None => expected.push(format!("{k} | {v} | {ts} | NULL")),
        }
    }
    expected.sort();
    for parallelism in [1, 2, 4] {
        let output = tempfile::tempdir().expect("tempdir");
        let sql = format!(
            "SET 'parallelism' = '{parallelism}';\n\
             CREATE TABLE orders (k BIGINT, v BIGINT, ts BIGINT,\n\
               WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)\n\
             WITH ('connector' = 'filesystem', 'path' = '{0}/orders.csv', 'format' = 'csv',\n\
               'batch-size' = '500', 'watermark.interval' = '1');\n\
             CREATE TABLE dim (id BIGINT, name STRING)\n\
             WITH ('connector' = 'filesystem', 'path' = '{0}/dim.csv', 'format' = 'csv',\n\
               'batch-size' = '3');\n\
             CREATE TABLE enriched (k BIGINT, v BIGINT, ts BIGINT, name STRING)\n\
             WITH ('connector' = 'filesystem', 'path' = '{1}/enriched', 'format' = 'parquet');\n\
             INSERT INTO enriched SELECT o.k, o.v, o.ts, d.name\n\
               FROM orders o LEFT JOIN dim d ON o.k = d.id;\n",
            input.path().display(),
            output.path().display()
        );
        let engine = Engine::new();
        let compiled = engine
            .compile_sql(&sql, "enrich.sql")
            .await
            .expect("compiles");
        engine
            .run(&compiled.spec, Some("enrich.sql"))
            .await
            .expect("runs");
        let got = format_rows(&read_parquet_dir(&output.path().join("enriched")));
        assert!(
            got == expected,
            "the enrichment differs at parallelism {parallelism}"
        );
    }
}
