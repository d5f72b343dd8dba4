//! Jobs with their keyed state in a real Redis server (`weir_testkit::redis`): two jobs with
//! the same operators and state names run at once on one server, each into its own namespace,
//! and each publishes exactly what the job publishes with its state in redb; so does a third
//! whose run chooses Redis over its redb script (`RunOptions::state`, `weir run
//! --state-backend`). The input has late and out-of-order rows.

use crate::support::{read_published_parts, table_rows};
use std::path::Path;
use weir::Engine;
use weir_testkit::redis::RedisServer;

/// An OVER aggregation and a first-row deduplication (both keep rows in keyed state) over the
/// bids in `input`, into Parquet files under `out`; `settings` go first.
fn job(input: &Path, out: &Path, settings: &str) -> String {
    format!(
        "{settings}SET 'parallelism' = '2';\n\
         CREATE TABLE bids (auction BIGINT NOT NULL, price BIGINT NOT NULL, ts BIGINT NOT NULL,\n\
         \x20 t AS TO_TIMESTAMP_MILLIS(ts), WATERMARK FOR t AS t - INTERVAL '5' SECOND)\n\
         \x20 WITH ('connector' = 'filesystem', 'path' = '{input}/bids.csv', 'format' = 'csv',\n\
         \x20 'batch-size' = '500');\n\
         CREATE TABLE running (auction BIGINT, ts BIGINT, price BIGINT, n BIGINT, total BIGINT)\n\
         \x20 WITH ('connector' = 'filesystem', 'path' = '{out}/running', 'format' = 'parquet');\n\
         CREATE TABLE firsts (price BIGINT, auction BIGINT, ts BIGINT)\n\
         \x20 WITH ('connector' = 'filesystem', 'path' = '{out}/firsts', 'format' = 'parquet');\n\
         INSERT INTO running\n\
         SELECT auction, ts, price,\n\
         \x20 COUNT(*) OVER (PARTITION BY auction ORDER BY t ROWS BETWEEN 3 PRECEDING AND CURRENT ROW),\n\
         \x20 SUM(price) OVER (PARTITION BY auction ORDER BY t ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)\n\
         FROM bids;\n\
         INSERT INTO firsts\n\
         SELECT price, auction, ts FROM (\n\
         \x20 SELECT *, ROW_NUMBER() OVER (PARTITION BY price ORDER BY t) AS rn FROM bids)\n\
         WHERE rn = 1;\n",
        input = input.display(),
        out = out.display(),
    )
}

fn tables(out: &Path) -> [Vec<String>; 2] {
    ["running", "firsts"].map(|t| table_rows(&read_published_parts(&out.join(t))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_jobs_with_the_same_state_names_share_a_redis_server_and_publish_what_redb_does() {
    // Without a server the test fails with the kit's message: it was not run.
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).expect("input dir");
    let bids = crate::determinism::bids();
    std::fs::write(input.join("bids.csv"), crate::determinism::csv_text(&bids)).expect("write");
    let engine = Engine::new();

    let on_redb = dir.path().join("redb");
    let reference = engine
        .compile_sql(&job(&input, &on_redb, ""), "reference.sql")
        .await
        .expect("compiles");
    engine
        .run(&reference.spec, Some("reference.sql"))
        .await
        .expect("the run on redb");
    let want = tables(&on_redb);
    assert!(
        want.iter().all(|rows| rows.len() > 100),
        "both tables hold rows"
    );

    let on_redis = |name: &str| {
        format!(
            "SET 'job.name' = '{name}';\n\
             SET 'state.backend' = 'redis';\n\
             SET 'state.redis.url' = '{}';\n",
            server.url()
        )
    };
    let (a_out, b_out) = (dir.path().join("a"), dir.path().join("b"));
    let a = engine
        .compile_sql(&job(&input, &a_out, &on_redis("job-a")), "a.sql")
        .await
        .expect("compiles");
    let b = engine
        .compile_sql(&job(&input, &b_out, &on_redis("job-b")), "b.sql")
        .await
        .expect("compiles");
    let (ran_a, ran_b) = tokio::join!(
        engine.run(&a.spec, Some("a.sql")),
        engine.run(&b.spec, Some("b.sql"))
    );
    ran_a.expect("job a on Redis");
    ran_b.expect("job b on Redis");
    assert_eq!(tables(&a_out), want, "job a");
    assert_eq!(tables(&b_out), want, "job b");
    // A job written for redb, run with the run's override (`weir run --state-backend redis`).
    let c_out = dir.path().join("c");
    let c = engine
        .compile_sql(&job(&input, &c_out, "SET 'job.name' = 'job-c';\n"), "c.sql")
        .await
        .expect("compiles");
    let prepared = engine
        .prepare(&c.spec, Some("c.sql"))
        .await
        .expect("prepares");
    let options = weir::RunOptions {
        state: Some(weir::plan::StateBackendSpec::redis(server.url())),
        ..weir::RunOptions::default()
    };
    engine
        .start_with(prepared, options)
        .await
        .expect("starts")
        .wait()
        .await
        .expect("job c on Redis");
    assert_eq!(tables(&c_out), want, "job c");
    // Each kept its state under its own namespace.
    for job in ["job-a", "job-b", "job-c"] {
        let keys = server
            .command(&["KEYS", &format!("weir:{job}:index:*")])
            .expect("KEYS");
        assert!(
            keys.contains(&format!("weir:{job}:index:")),
            "{job}: {keys}"
        );
    }
}
