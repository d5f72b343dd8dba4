//! Delta Lake tables in SQL: an INSERT with checkpoints writes a partitioned Delta table (one
//! commit per epoch); a second job reads a version of it back (`'scan.startup.version'`) with
//! its partition column, as a backfill from the lake would.

use crate::checkpoints::assert_same_rows;
use weir::{CheckpointLocation, Engine, RunOptions};

/// Input rows: `id`, and a day that alternates, out of order.
const ROWS: i64 = 2000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delta_table_written_in_sql_is_read_back_in_sql_at_a_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().display();
    let mut csv = String::from("id,day\n");
    for i in 0..ROWS {
        let id = (i * 7_919) % ROWS;
        csv.push_str(&format!("{id},2026-12-0{}\n", 2 + id % 2));
    }
    std::fs::write(dir.path().join("events.csv"), csv).expect("write input");
    let engine = Engine::new();

    let write = format!(
        "SET 'parallelism' = '2';\nSET 'checkpoint.interval' = '5ms';\n\
         CREATE TABLE events (id BIGINT NOT NULL, day STRING) WITH ('connector' = 'filesystem', \
           'path' = '{d}/events.csv', 'format' = 'csv', 'batch-size' = '64');\n\
         CREATE TABLE lake (id BIGINT NOT NULL, doubled BIGINT, dt STRING) PARTITIONED BY (dt) \
           WITH ('connector' = 'delta', 'path' = '{d}/lake');\n\
         INSERT INTO lake SELECT id, id * 2, day FROM events;"
    );
    let job = engine
        .compile_sql(&write, "write.sql")
        .await
        .expect("compiles");
    assert_eq!(job.spec.sinks[0].connector, "delta");
    assert_eq!(
        job.spec.sinks[0].options["partition_by"],
        serde_json::json!(["dt"])
    );
    let options = RunOptions {
        state: None,
        state_dir: None,
        checkpoint_storage: Some(
            CheckpointLocation::local(&dir.path().join("cp")).expect("checkpoint dir"),
        ),
        restore: None,
        accept_duplicates: false,
        evolution: Default::default(),
    };
    let prepared = engine
        .prepare(&job.spec, Some("write.sql"))
        .await
        .expect("prepares");
    let summary = engine
        .start_with(prepared, options)
        .await
        .expect("starts")
        .wait()
        .await
        .expect("runs");
    assert!(summary.checkpoints.is_some());
    for part in ["dt=2026-12-02", "dt=2026-12-03"] {
        assert!(dir.path().join("lake").join(part).is_dir(), "{part}");
    }
    let mut versions: Vec<u64> = std::fs::read_dir(dir.path().join("lake/_delta_log"))
        .expect("log")
        .filter_map(|e| {
            let name = e.expect("entry").file_name().into_string().ok()?;
            name.strip_suffix(".json")?.parse().ok()
        })
        .collect();
    versions.sort_unstable();
    let newest = *versions.last().expect("a commit");
    assert!(
        newest >= 1,
        "the creation and at least one epoch: {versions:?}"
    );

    let read = format!(
        "CREATE TABLE lake (id BIGINT, doubled BIGINT, dt STRING) WITH ('connector' = 'delta', \
           'path' = '{d}/lake', 'scan.startup.version' = '{newest}');\n\
         CREATE TABLE copy (id BIGINT, doubled BIGINT, dt STRING) WITH ('connector' = \
           'filesystem', 'path' = '{d}/copy', 'format' = 'parquet');\n\
         INSERT INTO copy SELECT id, doubled, dt FROM lake WHERE id % 2 = 0;"
    );
    let job = engine
        .compile_sql(&read, "read.sql")
        .await
        .expect("compiles");
    engine.run(&job.spec, Some("read.sql")).await.expect("runs");
    let mut rows =
        crate::support::format_rows(&crate::support::read_parquet_dir(&dir.path().join("copy")));
    rows.sort();
    let mut expected: Vec<String> = (0..ROWS)
        .filter(|i| i % 2 == 0)
        .map(|i| format!("{i} | {} | 2026-12-02", i * 2))
        .collect();
    expected.sort();
    assert_same_rows(&rows, &expected, "the Delta table read back");

    // Version 0 is the empty table the first writer created: a read of nothing is refused,
    // naming the table and the version.
    let read_v0 = read.replace(
        &format!("'scan.startup.version' = '{newest}'"),
        "'scan.startup.version' = '0'",
    );
    let job = engine
        .compile_sql(&read_v0, "read0.sql")
        .await
        .expect("compiles");
    let err = engine
        .run(&job.spec, Some("read0.sql"))
        .await
        .expect_err("an empty version is refused")
        .to_string();
    assert!(err.contains("no data files at version 0"), "{err}");
    assert!(err.contains("sources[0].options.path"), "{err}");
}
