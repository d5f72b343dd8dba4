//! Partitioned filesystem tables in SQL (`PARTITIONED BY`): an INSERT whose partition columns
//! are computed in the SELECT writes Hive-style directories and commits each partition with a
//! success file; the output is the same at parallelism 1 and 4 and across a kill and a restore;
//! a read of the table takes the partition columns from the directories and skips the
//! directories a WHERE rules out.

use crate::checkpoints::{assert_same_rows, run_and_kill};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::path::Path;
use weir::{CheckpointLocation, Engine, RestoreFrom, RunOptions};

/// Input rows.
const ROWS: i64 = 3000;
/// 2026-12-02 00:00:00 UTC in epoch milliseconds.
const DAY: i64 = 1_796_169_600_000;

/// Writes `dir/events.csv`: `id`, `ms` spread over 2026-12-02 00:00 .. 05:00 out of order
/// (a stride through the range), so many rows are late behind the watermark.
fn write_events(dir: &Path) {
    let mut text = String::from("id,ms\n");
    for i in 0..ROWS {
        let ms = DAY + (i * 7_919_000) % (5 * 3_600_000);
        text.push_str(&format!("{i},{ms}\n"));
    }
    std::fs::write(dir.join("events.csv"), text).expect("write input");
}

/// The script writing `events` into the partitioned table `o` at `dir/out`, `extra` first.
fn insert_script(dir: &Path, extra: &str) -> String {
    format!(
        "{extra}CREATE TABLE events (id BIGINT NOT NULL, ms BIGINT NOT NULL, \
           ts AS TO_TIMESTAMP_LTZ(ms, 3), WATERMARK FOR ts AS ts - INTERVAL '10' MINUTE) \
         WITH ('connector' = 'filesystem', 'path' = '{d}/events.csv', 'format' = 'csv', \
           'batch-size' = '16');\n\
         CREATE TABLE o (id BIGINT, dt STRING, `hour` INT) PARTITIONED BY (dt, `hour`) \
         WITH ('connector' = 'filesystem', 'path' = '{d}/out', 'format' = 'parquet', \
           'sink.partition-commit.trigger' = 'partition-time', \
           'sink.partition-commit.delay' = '1 h', \
           'sink.partition-commit.policy.kind' = 'success-file', \
           'partition.time-extractor.timestamp-pattern' = '$dt $hour:00:00');\n\
         INSERT INTO o SELECT id, DATE_FORMAT(ts, 'yyyy-MM-dd') AS dt, HOUR(ts) AS `hour` \
           FROM events;",
        d = dir.display()
    )
}

/// Every published row below `out` as `directory | id`, sorted, and the directories holding a
/// `_SUCCESS` file. Staged files are skipped.
fn partitioned_rows(out: &Path) -> (Vec<String>, Vec<String>) {
    fn walk(root: &Path, dir: &Path, rows: &mut Vec<String>, done: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten() {
            let path = entry.expect("dir entry").path();
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            let relative = dir.strip_prefix(root).expect("below").display().to_string();
            if path.is_dir() {
                if !name.starts_with('_') {
                    walk(root, &path, rows, done);
                }
            } else if name == "_SUCCESS" {
                done.push(relative);
            } else if name.starts_with("part-") {
                let file = std::fs::File::open(&path).expect("open part file");
                let reader = ParquetRecordBatchReaderBuilder::try_new(file)
                    .expect("parquet")
                    .build()
                    .expect("reader");
                for batch in reader {
                    let batch = batch.expect("batch");
                    let names: Vec<&str> = batch
                        .schema_ref()
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect();
                    assert_eq!(names, ["id"], "partition columns are not in the files");
                    for row in crate::support::format_rows(&[batch]) {
                        rows.push(format!("{relative} | {row}"));
                    }
                }
            }
        }
    }
    let (mut rows, mut done) = (Vec::new(), Vec::new());
    walk(out, out, &mut rows, &mut done);
    rows.sort();
    done.sort();
    (rows, done)
}

/// The rows the input should give: `dt=2026-12-02/hour=H | id`.
fn expected_rows() -> Vec<String> {
    let mut rows: Vec<String> = (0..ROWS)
        .map(|i| {
            let hour = (i * 7_919_000) % (5 * 3_600_000) / 3_600_000;
            format!("dt=2026-12-02/hour={hour} | {i}")
        })
        .collect();
    rows.sort();
    rows
}

fn options(cp: &Path, restore: Option<RestoreFrom>) -> RunOptions {
    RunOptions {
        state: None,
        state_dir: None,
        checkpoint_storage: Some(CheckpointLocation::local(cp).expect("checkpoint dir")),
        restore,
        accept_duplicates: false,
        evolution: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_insert_writes_computed_partitions_the_same_at_parallelism_1_and_4() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_events(dir.path());
    let engine = Engine::new();
    let out = dir.path().join("out");
    let all_hours: Vec<String> = (0..5).map(|h| format!("dt=2026-12-02/hour={h}")).collect();
    let mut outputs = Vec::new();
    for (parallelism, checkpoints) in [(1, false), (4, false), (4, true)] {
        let mut extra = format!("SET 'parallelism' = '{parallelism}';\n");
        if checkpoints {
            extra.push_str("SET 'checkpoint.interval' = '5ms';\n");
        }
        let job = engine
            .compile_sql(&insert_script(dir.path(), &extra), "partitions.sql")
            .await
            .expect("compiles");
        assert_eq!(
            job.spec.sinks[0].options["partition_by"],
            serde_json::json!(["dt", "hour"])
        );
        if checkpoints {
            let summary = engine
                .start_with(
                    engine
                        .prepare(&job.spec, Some("partitions.sql"))
                        .await
                        .expect("prepares"),
                    options(&dir.path().join("cp"), None),
                )
                .await
                .expect("starts")
                .wait()
                .await
                .expect("runs");
            assert!(summary.checkpoints.is_some());
        } else {
            engine
                .run(&job.spec, Some("partitions.sql"))
                .await
                .expect("runs");
        }
        let (rows, done) = partitioned_rows(&out);
        assert_same_rows(&rows, &expected_rows(), "partitioned output");
        // At end of input every partition is committed.
        assert_eq!(done, all_hours, "parallelism {parallelism}");
        outputs.push(rows);
        std::fs::remove_dir_all(&out).expect("clear the output");
    }
    assert!(outputs.windows(2).all(|w| w[0] == w[1]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_partitioned_insert_killed_and_restored_writes_every_row_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_events(dir.path());
    let engine = Engine::new();
    let out = dir.path().join("out");
    let cp = dir.path().join("cp");
    let mut killed = 0;
    for (parallelism, restore) in [(2, None), (3, Some(RestoreFrom::Latest))] {
        let extra =
            format!("SET 'checkpoint.interval' = '2ms';\nSET 'parallelism' = '{parallelism}';\n");
        let job = engine
            .compile_sql(&insert_script(dir.path(), &extra), "partitions.sql")
            .await
            .expect("compiles");
        if run_and_kill(&engine, job.spec, options(&cp, restore), 2).await {
            killed += 1;
        }
    }
    let job = engine
        .compile_sql(
            &insert_script(dir.path(), "SET 'checkpoint.interval' = '2ms';\n"),
            "partitions.sql",
        )
        .await
        .expect("compiles");
    let prepared = engine
        .prepare(&job.spec, Some("partitions.sql"))
        .await
        .expect("prepares");
    let summary = engine
        .start_with(prepared, options(&cp, Some(RestoreFrom::Latest)))
        .await
        .expect("starts")
        .wait()
        .await
        .expect("restored run");
    assert!(killed >= 1, "at least one run was killed part way");
    assert!(
        summary
            .checkpoints
            .expect("counters")
            .restored_from
            .is_some(),
        "the last run restored a checkpoint"
    );
    let (rows, done) = partitioned_rows(&out);
    assert_same_rows(&rows, &expected_rows(), "partitioned output");
    let all_hours: Vec<String> = (0..5).map(|h| format!("dt=2026-12-02/hour={h}")).collect();
    assert_eq!(done, all_hours);
}

/// The read-back script: the partitioned table `p` at `dir/out` into `r` at `dir/read`.
fn read_script(dir: &Path, filter: &str) -> String {
    format!(
        "CREATE TABLE p (id BIGINT, dt STRING, `hour` INT) PARTITIONED BY (dt, `hour`) \
         WITH ('connector' = 'filesystem', 'path' = '{d}/out', 'format' = 'parquet');\n\
         CREATE TABLE r (id BIGINT, dt STRING, `hour` INT) \
         WITH ('connector' = 'filesystem', 'path' = '{d}/read', 'format' = 'parquet');\n\
         INSERT INTO r SELECT id, dt, `hour` FROM p {filter};",
        d = dir.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_a_partitioned_table_types_its_directories_and_prunes_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_events(dir.path());
    let engine = Engine::new();
    let job = engine
        .compile_sql(&insert_script(dir.path(), ""), "partitions.sql")
        .await
        .expect("compiles");
    engine
        .run(&job.spec, Some("partitions.sql"))
        .await
        .expect("writes");
    let read = dir.path().join("read");
    let mut counts = Vec::new();
    for filter in ["", "WHERE dt = '2026-12-02' AND `hour` >= 3 AND id % 2 = 0"] {
        let job = engine
            .compile_sql(&read_script(dir.path(), filter), "read.sql")
            .await
            .expect("compiles");
        let summary = engine
            .run(&job.spec, Some("read.sql"))
            .await
            .expect("reads");
        let rows = crate::support::format_rows(&crate::support::read_parquet_dir(&read));
        let want: Vec<String> = {
            let mut want: Vec<String> = (0..ROWS)
                .filter_map(|i| {
                    let hour = (i * 7_919_000) % (5 * 3_600_000) / 3_600_000;
                    let kept = filter.is_empty() || (hour >= 3 && i % 2 == 0);
                    kept.then(|| format!("{i} | 2026-12-02 | {hour}"))
                })
                .collect();
            want.sort();
            want
        };
        assert_same_rows(&rows, &want, filter);
        if !filter.is_empty() {
            let prune = serde_json::to_value(&job.spec.sources[0].prune).expect("serializes");
            assert_eq!(
                prune,
                serde_json::json!([
                    { "column": "dt", "op": "=", "value": "2026-12-02" },
                    { "column": "hour", "op": ">=", "value": 3 },
                ])
            );
        }
        counts.push(summary.metrics.source_rows());
        std::fs::remove_dir_all(&read).expect("clear the output");
    }
    // Hours 0..3 are never opened: only the rows of hours 3 and 4 are read.
    let late_hours = (0..ROWS)
        .filter(|i| (i * 7_919_000) % (5 * 3_600_000) / 3_600_000 >= 3)
        .count() as u64;
    assert_eq!(counts, [ROWS as u64, late_hours]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_by_errors_point_at_the_script() {
    let engine = Engine::new();
    let script = |table: &str| {
        format!(
            "CREATE TABLE g (a BIGINT, b STRING)\n{table}\nWITH ('connector' = 'datagen', \
             'number-of-rows' = '3');\n\
             CREATE TABLE o (a BIGINT, b STRING) WITH ('connector' = 'blackhole');\n\
             INSERT INTO o SELECT a, b FROM g;"
        )
    };
    let err = engine
        .compile_sql(&script("PARTITIONED BY (b)"), "p.sql")
        .await
        .expect_err("datagen takes no partitions")
        .to_string();
    assert!(
        err.starts_with("p.sql:2:1:") && err.contains("does not take PARTITIONED BY"),
        "{err}"
    );
    let err = engine
        .compile_sql(&script("PARTITIONED BY (b, c)"), "p.sql")
        .await
        .expect_err("no column c")
        .to_string();
    assert!(
        err.starts_with("p.sql:2:20:") && err.contains("(c)"),
        "{err}"
    );
}
