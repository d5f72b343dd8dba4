//! SQL scripts compiled by the engine outside the goldens (those are in `slt.rs`): user
//! functions registered from Rust, table options that reach the spec, and a `WHERE` pushed
//! into a Parquet source (row groups and pages skipped, also across a kill and a restore), and
//! the file sink's auto-compaction across a kill and a restore.

use crate::checkpoints::{assert_killed_restored_and_published, published_rows, run_and_kill};
use crate::support::{format_rows, read_parquet_dir};
use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use parquet::file::properties::WriterProperties;
use std::path::Path;
use std::sync::Arc;
use weir::{CheckpointLocation, Engine, RestoreFrom, RunOptions};

fn rows(dir: &Path) -> Vec<String> {
    format_rows(&read_parquet_dir(dir))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_calls_scalar_functions_registered_from_rust() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("in.csv"), "a\n1\n5\n21\n").expect("write input");
    let sql = format!(
        "CREATE TABLE t (a BIGINT NOT NULL) WITH ('connector' = 'filesystem', 'path' = \
         '{d}/in.csv', 'format' = 'csv');\n\
         CREATE TABLE o (a BIGINT, b BIGINT) WITH ('connector' = 'filesystem', 'path' = \
         '{d}/out', 'format' = 'parquet');\n\
         INSERT INTO o SELECT a, twice(a) + 1 FROM t WHERE twice(a) > 5;",
        d = dir.path().display()
    );
    let mut engine = Engine::new();
    // Without the function, the script does not compile, and says where.
    let err = engine
        .compile_sql(&sql, "udf.sql")
        .await
        .expect_err("unknown function");
    assert!(err.to_string().contains("udf.sql:3:"), "{err}");
    engine.register_udf(crate::computed::twice());
    let job = engine.compile_sql(&sql, "udf.sql").await.expect("compiles");
    engine.run(&job.spec, Some("udf.sql")).await.expect("runs");
    assert_eq!(rows(&dir.path().join("out")), vec!["21 | 43", "5 | 11"]);
}

/// The deepest expression accepted is compiled, planned, evaluated and dropped on runtime
/// threads with the stack `weir` gives them (in a debug build, whose frames are the largest);
/// one level deeper is refused at its position before anything recursed over it.
#[test]
fn an_expression_as_deep_as_the_limit_runs_on_the_runtime_threads() {
    let depth = weir::plan::sql_depth::MAX_EXPRESSION_DEPTH;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(weir::plan::sql_depth::THREAD_STACK_BYTES)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("in.csv"), "a\n1\n5\n").expect("write input");
    // `a + 1 + ... + 1` holds `terms` operators; the filter's item adds `>`.
    let script = |terms: usize| {
        format!(
            "CREATE TABLE t (a BIGINT NOT NULL) WITH ('connector' = 'filesystem', 'path' = \
             '{d}/in.csv', 'format' = 'csv');\n\
             CREATE TABLE o (a BIGINT, b BIGINT) WITH ('connector' = 'filesystem', 'path' = \
             '{d}/out', 'format' = 'parquet');\n\
             INSERT INTO o SELECT a, a{chain} FROM t WHERE a{chain} > 3;",
            d = dir.path().display(),
            chain = " + 1".repeat(terms)
        )
    };
    let deepest = script(depth - 1);
    let too_deep = script(depth);
    // On a worker thread: `block_on` itself runs on the test's thread.
    let on_worker = runtime.spawn(async move {
        let engine = Engine::new();
        let job = engine
            .compile_sql(&deepest, "deep.sql")
            .await
            .expect("compiles");
        engine.run(&job.spec, Some("deep.sql")).await.expect("runs");
        let err = engine
            .compile_sql(&too_deep, "deep.sql")
            .await
            .expect_err("one level too deep");
        assert!(err.to_string().contains("deep.sql:3:"), "{err}");
    });
    runtime.block_on(on_worker).expect("the job's task");
    let plus = i64::try_from(depth - 1).expect("depth");
    assert_eq!(
        rows(&dir.path().join("out")),
        vec![format!("1 | {}", 1 + plus), format!("5 | {}", 5 + plus)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watermark_options_of_a_table_reach_its_source() {
    let sql = "CREATE TABLE t (ts BIGINT NOT NULL, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) \
               WITH ('connector' = 'filesystem', 'path' = 'in.csv', 'format' = 'csv', \
               'scan.watermark.idle-timeout' = '5s', \
               'scan.watermark.alignment.max-drift' = '30s', 'watermark.interval' = '1s', \
               'scan.watermark.lateness' = 'merged');\n\
               CREATE TABLE o (ts BIGINT) WITH ('connector' = 'filesystem', 'path' = 'out', \
               'format' = 'parquet');\n\
               INSERT INTO o SELECT ts FROM t;";
    let job = Engine::new()
        .compile_sql(sql, "wm.sql")
        .await
        .expect("compiles");
    let w = job.spec.sources[0].watermark.clone().expect("watermark");
    assert_eq!(w.idle_timeout, Some(weir::api::DurationMs(5_000)));
    assert_eq!(w.max_drift, Some(weir::api::DurationMs(30_000)));
    assert_eq!(w.interval, weir::api::DurationMs(1_000));
    assert_eq!(w.lateness, weir::plan::Lateness::Merged);
}

#[tokio::test]
async fn the_state_ttl_and_buffer_size_reach_every_updating_operator() {
    let sql = "SET 'table.exec.state.ttl' = '2 h';\n\
               SET 'state.buffer-size' = '64mb';\n\
               CREATE TABLE t (k STRING, v BIGINT) WITH ('connector' = 'filesystem', \
               'path' = 'in.csv', 'format' = 'csv');\n\
               CREATE TABLE o (k STRING, n BIGINT, top BIGINT) WITH ('connector' = 'blackhole');\n\
               INSERT INTO o SELECT c.k, c.n, m.v FROM \
               (SELECT k, COUNT(*) AS n FROM t GROUP BY k) c JOIN \
               (SELECT k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) \
               AS rn FROM t) WHERE rn = 1) m ON c.k = m.k;";
    let job = Engine::new()
        .compile_sql(sql, "ttl.sql")
        .await
        .expect("compiles");
    let ttls: Vec<(String, Option<u64>)> = job
        .spec
        .operators
        .iter()
        .filter(|o| ["group_aggregate", "top_n", "regular_join"].contains(&o.type_name.as_str()))
        .map(|o| (o.type_name.clone(), o.options["state_ttl"].as_u64()))
        .collect();
    assert_eq!(ttls.len(), 3, "{ttls:?}");
    assert!(
        ttls.iter().all(|(_, ttl)| *ttl == Some(7_200_000)),
        "{ttls:?}"
    );
    // Top-N holds nothing in memory; the other two hold up to the buffer.
    let buffers: Vec<(String, Option<u64>)> = job
        .spec
        .operators
        .iter()
        .filter(|o| o.options.get("buffer_bytes").is_some())
        .map(|o| (o.type_name.clone(), o.options["buffer_bytes"].as_u64()))
        .collect();
    assert_eq!(
        buffers,
        [
            ("group_aggregate".to_owned(), Some(64 << 20)),
            ("regular_join".to_owned(), Some(64 << 20))
        ]
    );
}

/// Rows of the pruning tests' Parquet file: row groups of 500 rows, pages of 50.
const PRUNE_ROWS: i64 = 6_000;

/// Writes `dir/bids.parquet`: `auction` = row, `price` = 10 x row on even pages of 50 rows and
/// 0 on odd ones, `channel` = `c<row % 7>`. `price > 100` thus rules out every odd page.
fn write_bids(dir: &Path) {
    let ids: Vec<i64> = (0..PRUNE_ROWS).collect();
    let batch = RecordBatch::try_from_iter([
        (
            "auction",
            Arc::new(Int64Array::from(ids.clone())) as ArrayRef,
        ),
        (
            "price",
            Arc::new(Int64Array::from_iter_values(
                ids.iter()
                    .map(|i| if (i / 50) % 2 == 0 { i * 10 } else { 0 }),
            )) as ArrayRef,
        ),
        (
            "channel",
            Arc::new(StringArray::from_iter_values(
                ids.iter().map(|i| format!("c{}", i % 7)),
            )) as ArrayRef,
        ),
    ])
    .expect("batch");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(500))
        .set_data_page_row_count_limit(50)
        .set_write_batch_size(50)
        .build();
    let file = std::fs::File::create(dir.join("bids.parquet")).expect("create input");
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

/// The pruning tests' script over `dir`: the rows of `bids` priced above 30000 (rows 3001..),
/// read in splits of about one row group, `extra` statements first.
fn prune_script(dir: &Path, extra: &str) -> String {
    format!(
        "{extra}CREATE TABLE bids (auction BIGINT NOT NULL, price BIGINT NOT NULL, channel STRING) \
         WITH ('connector' = 'filesystem', 'path' = '{d}/bids.parquet', 'format' = 'parquet', \
         'split-size' = '1', 'batch-size' = '16');\n\
         CREATE TABLE o (auction BIGINT, price BIGINT) WITH ('connector' = 'filesystem', \
         'path' = '{d}/out', 'format' = 'parquet');\n\
         INSERT INTO o SELECT auction, price FROM bids WHERE price > 30000 AND channel <> 'c3';",
        d = dir.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_where_over_a_parquet_table_skips_row_groups_and_pages_and_keeps_the_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_bids(dir.path());
    let engine = Engine::new();
    let job = engine
        .compile_sql(&prune_script(dir.path(), ""), "prune.sql")
        .await
        .expect("compiles");
    let prune = serde_json::to_value(&job.spec.sources[0].prune).expect("serializes");
    assert_eq!(
        prune,
        serde_json::json!([
            { "column": "price", "op": ">", "value": 30000 },
            { "column": "channel", "op": "<>", "value": "c3" },
        ])
    );
    let prepared = engine
        .prepare(&job.spec, Some("prune.sql"))
        .await
        .expect("prepares");
    let describe: Vec<String> = prepared.nodes.values().map(|n| n.describe()).collect();
    assert!(
        describe.iter().any(|d| d.ends_with(
            "; skips row groups and pages where no row can satisfy price > 30000 AND channel <> 'c3'"
        )),
        "{describe:?}"
    );
    let pruned = engine
        .run(&job.spec, Some("prune.sql"))
        .await
        .expect("runs");
    let out = format_rows(&read_parquet_dir(&dir.path().join("out")));

    // The same job reading everything.
    let mut unpruned = job.spec.clone();
    unpruned.sources[0].prune = None;
    std::fs::remove_dir_all(dir.path().join("out")).expect("clear the output");
    let whole = engine
        .run(&unpruned, Some("prune.sql"))
        .await
        .expect("runs");
    assert_eq!(format_rows(&read_parquet_dir(&dir.path().join("out"))), out);
    // Rows 3000..6000 on even pages, minus channel c3: 1500 - 1500/7 rounded.
    let want = (3001..PRUNE_ROWS)
        .filter(|i| (i / 50) % 2 == 0 && i % 7 != 3)
        .count();
    assert_eq!(out.len(), want);
    assert_eq!(whole.metrics.source_rows(), PRUNE_ROWS as u64);
    // Row groups 0..6 are skipped, and every odd page of the others: 1500 rows are read.
    assert_eq!(pruned.metrics.source_rows(), 1_500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pruned_parquet_job_killed_and_restored_loses_and_repeats_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_bids(dir.path());
    let engine = Engine::new();
    let reference = engine
        .compile_sql(&prune_script(dir.path(), ""), "prune.sql")
        .await
        .expect("compiles");
    let mut reference = reference.spec;
    reference.sources[0].prune = None;
    engine
        .run(&reference, Some("prune.sql"))
        .await
        .expect("reference run");
    let want = published_rows(&dir.path().join("out"));
    std::fs::remove_dir_all(dir.path().join("out")).expect("clear the output");

    let cp = dir.path().join("cp");
    let options = |restore: Option<RestoreFrom>| RunOptions {
        state: None,
        state_dir: None,
        checkpoint_storage: Some(CheckpointLocation::local(&cp).expect("checkpoint dir")),
        restore,
        accept_duplicates: false,
        evolution: Default::default(),
    };
    let mut killed = 0;
    for (parallelism, restore) in [(2, None), (3, Some(RestoreFrom::Latest))] {
        let script = prune_script(
            dir.path(),
            &format!("SET 'checkpoint.interval' = '2ms';\nSET 'parallelism' = '{parallelism}';\n"),
        );
        let job = engine
            .compile_sql(&script, "prune.sql")
            .await
            .expect("compiles");
        assert!(job.spec.sources[0].prune.is_some());
        if run_and_kill(&engine, job.spec, options(restore), 2).await {
            killed += 1;
        }
    }
    // The last run reads everything: cursors of a pruned run mean the same rows, so its
    // checkpoint restores into a job without `prune` (the logical fingerprint leaves it out).
    let script = prune_script(dir.path(), "SET 'checkpoint.interval' = '2ms';\n");
    let mut job = engine
        .compile_sql(&script, "prune.sql")
        .await
        .expect("compiles");
    job.spec.sources[0].prune = None;
    let prepared = engine
        .prepare(&job.spec, Some("prune.sql"))
        .await
        .expect("prepares");
    let summary = engine
        .start_with(prepared, options(Some(RestoreFrom::Latest)))
        .await
        .expect("starts")
        .wait()
        .await
        .expect("restored run");
    assert_killed_restored_and_published(killed, summary, &dir.path().join("out"), &want);
}

/// Rows of the compaction test: 40,000 `ts,k,v`, out of order (shuffled in blocks of 40 rows)
/// with every 97th row 5 s late, behind the watermark.
fn late_rows() -> Vec<String> {
    let mut rng = crate::support::Rng(11);
    let mut rows = Vec::new();
    for block in 0..1_000u64 {
        let mut ts: Vec<u64> = (0..40).map(|i| (block * 40 + i) * 10).collect();
        for i in (1..ts.len()).rev() {
            ts.swap(i, rng.below(i as u64 + 1) as usize);
        }
        rows.extend(ts);
    }
    rows.iter()
        .enumerate()
        .map(|(i, ts)| {
            let ts = if i % 97 == 96 {
                ts.saturating_sub(5_000)
            } else {
                *ts
            };
            format!("{ts},k{},{}", rng.below(20), rng.below(1000))
        })
        .collect()
}

/// The compaction test's script over `dir`: a projection of the rows into Parquet with
/// auto-compaction into files of about 16 MiB (more than it writes), a checkpoint every 2 ms.
fn compaction_script(dir: &Path) -> String {
    format!(
        "SET 'checkpoint.interval' = '2ms';\n\
         SET 'parallelism' = '2';\n\
         CREATE TABLE t (ts BIGINT NOT NULL, k STRING NOT NULL, v BIGINT NOT NULL,\n\
           WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)\n\
           WITH ('connector' = 'filesystem', 'path' = '{d}/in/*.csv', 'format' = 'csv',\n\
           'batch-size' = '8');\n\
         CREATE TABLE o (ts BIGINT, k STRING, v BIGINT) WITH ('connector' = 'filesystem',\n\
           'path' = '{d}/out', 'format' = 'parquet', 'auto-compaction' = 'true',\n\
           'compaction.file-size' = '16MB', 'sink.rolling-policy.rollover-interval' = '10 min');\n\
         INSERT INTO o SELECT ts, k, v * 2 FROM t WHERE v % 10 <> 3;",
        d = dir.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn auto_compaction_merges_small_epochs_and_a_restore_publishes_exactly_the_same_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = late_rows();
    // Many files: a source subtask takes a barrier between splits.
    std::fs::create_dir(dir.path().join("in")).expect("input dir");
    for (i, rows) in input.chunks(400).enumerate() {
        let text = format!("ts,k,v\n{}\n", rows.join("\n"));
        std::fs::write(dir.path().join(format!("in/{i:03}.csv")), text).expect("write input");
    }
    let want: Vec<String> = {
        let mut want: Vec<String> = input
            .iter()
            .filter_map(|row| {
                let mut f = row.split(',');
                let (ts, k, v) = (f.next()?, f.next()?, f.next()?.parse::<i64>().ok()?);
                (v % 10 != 3).then(|| format!("{ts} | {k} | {}", v * 2))
            })
            .collect();
        want.sort();
        want
    };
    let engine = Engine::new();
    let job = engine
        .compile_sql(&compaction_script(dir.path()), "compact.sql")
        .await
        .expect("compiles");
    let cp = dir.path().join("cp");
    let options = |restore: Option<RestoreFrom>| RunOptions {
        state: None,
        state_dir: None,
        checkpoint_storage: Some(CheckpointLocation::local(&cp).expect("checkpoint dir")),
        restore,
        accept_duplicates: false,
        evolution: Default::default(),
    };

    // Uninterrupted: many epochs, few files, the rows exactly once.
    let out = dir.path().join("out");
    let prepared = engine
        .prepare(&job.spec, Some("compact.sql"))
        .await
        .expect("prepares");
    let summary = engine
        .start_with(prepared, options(None))
        .await
        .expect("starts")
        .wait()
        .await
        .expect("runs");
    let counters = summary.checkpoints.expect("counters");
    let epochs = counters.completed;
    let files: Vec<_> = std::fs::read_dir(&out)
        .expect("output")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('_'))
        .collect();
    // The target is more than a subtask writes: each one's files are carried to the final
    // epoch and merged there into one file named by its epoch range.
    // `part-{sink}-{subtask}-e{last}-m{first}.parquet`: (first, last).
    let ranges: Vec<(u64, u64)> = files
        .iter()
        .filter_map(|f| {
            let fields: Vec<&str> = f.trim_end_matches(".parquet").split('-').collect();
            let last = fields.get(3)?.strip_prefix('e')?.parse().ok()?;
            let first = fields.get(4)?.strip_prefix('m')?.parse().ok()?;
            Some((first, last))
        })
        .collect();
    assert!(files.len() <= 2 && ranges.len() == files.len(), "{files:?}");
    assert!(
        epochs < 3 || ranges.iter().any(|(first, last)| first < last),
        "{files:?} after {epochs} epochs"
    );
    assert_eq!(published_rows(&out), want);
    std::fs::remove_dir_all(&out).expect("clear the output");
    std::fs::remove_dir_all(&cp).expect("clear the checkpoints");

    // Killed after a few epochs (carried files staged) and restored: the same rows.
    let mut killed = 0;
    if run_and_kill(&engine, job.spec.clone(), options(None), 2).await {
        killed += 1;
    }
    let prepared = engine
        .prepare(&job.spec, Some("compact.sql"))
        .await
        .expect("prepares");
    let summary = engine
        .start_with(prepared, options(Some(RestoreFrom::Latest)))
        .await
        .expect("starts")
        .wait()
        .await
        .expect("restored run");
    assert_killed_restored_and_published(killed, summary, &out, &want);
}
