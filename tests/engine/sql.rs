//! SQL scripts compiled by the engine outside the goldens (those are in `slt.rs`): user
//! functions registered from Rust, and table options that reach the spec.

use crate::support::{format_rows, read_parquet_dir};
use std::path::Path;
use weir::Engine;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watermark_options_of_a_table_reach_its_source() {
    let sql = "CREATE TABLE t (ts BIGINT NOT NULL, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) \
               WITH ('connector' = 'filesystem', 'path' = 'in.csv', 'format' = 'csv', \
               'scan.watermark.idle-timeout' = '5s', \
               'scan.watermark.alignment.max-drift' = '30s', 'watermark.interval' = '1s');\n\
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
}
