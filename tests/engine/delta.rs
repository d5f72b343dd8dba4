//! Delta Lake tables in SQL: an INSERT with checkpoints writes a partitioned Delta table (one
//! commit per epoch); a second job reads a version of it back (`'scan.startup.version'`) with
//! its partition column, as a backfill from the lake would. The lanes of a bounded distributed
//! job, run in process, commit rounds to one table also when lanes read nothing.

use crate::checkpoints::{assert_same_rows, options};
use weir::Engine;

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
    let options = options(&dir.path().join("cp"), None);
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
    let rows = run_into_parquet(&engine, &read, &dir.path().join("copy")).await;
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

/// The lanes of a distributed job, run here as the Agents run them (each its own job id,
/// parallelism 1, its share of the splits, the [`weir::api::Lane`]): the one file goes to one
/// lane, the other two read nothing and end at once. The table still gets every row, in
/// rounds of all three lanes: the lanes without input say they ended, so the rounds do not
/// wait for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_lanes_of_a_bounded_job_commit_rounds_also_when_lanes_read_nothing() {
    const LANES: u32 = 3;
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().display();
    let mut csv = String::from("id\n");
    for i in 0..ROWS {
        csv.push_str(&format!("{}\n", (i * 7_919) % ROWS));
    }
    std::fs::write(dir.path().join("events.csv"), csv).expect("write input");
    let engine = Engine::new();
    let sql = format!(
        "SET 'checkpoint.interval' = '5ms';\n\
         CREATE TABLE events (id BIGINT NOT NULL) WITH ('connector' = 'filesystem', \
           'path' = '{d}/events.csv', 'format' = 'csv', 'batch-size' = '64');\n\
         CREATE TABLE lake (id BIGINT NOT NULL) WITH ('connector' = 'delta', 'path' = '{d}/lake');\n\
         INSERT INTO lake SELECT id FROM events;"
    );
    let job = engine
        .compile_sql(&sql, "lanes.sql")
        .await
        .expect("compiles");
    let sink = &job.spec.sinks[0];
    let app_id = format!(
        "weir-j-{}",
        sink.uid
            .clone()
            .or(sink.name.clone())
            .expect("the sink's id")
    );
    let lane_ids: Vec<weir::api::JobId> = (0..LANES)
        .map(|l| weir::api::JobId::new(format!("j-lane-{l}")))
        .collect();
    let mut runs = Vec::new();
    for lane in 0..LANES {
        let mut spec = job.spec.clone();
        spec.job = Some(lane_ids[lane as usize].to_string());
        spec.parallelism = Some(1);
        let prepared = engine
            .prepare(&spec, Some("lanes.sql"))
            .await
            .expect("prepares")
            .with_split_share(weir::SplitShare::new(lane, LANES).expect("share"))
            .with_lane(weir::api::Lane {
                job: weir::api::JobId::new("j"),
                index: lane,
                jobs: lane_ids.clone(),
            });
        let options = options(&dir.path().join("cp"), None);
        runs.push(engine.start_with(prepared, options).await.expect("starts"));
    }
    for run in runs {
        run.wait().await.expect("the lane runs to its end");
    }

    // Every commit after the creation is a round with the job's transaction.
    let mut rounds = 0;
    for entry in std::fs::read_dir(dir.path().join("lake/_delta_log")).expect("log") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("commit");
        if text.contains("STREAMING UPDATE") {
            assert!(text.contains(&format!(r#""appId":"{app_id}""#)), "{text}");
            rounds += 1;
        }
    }
    assert!(rounds >= 1, "no round was committed");
    assert!(
        !dir.path()
            .join("lake/_weir/lanes")
            .join(&app_id)
            .read_dir()
            .expect("staging")
            .any(|lane| lane
                .expect("lane")
                .path()
                .read_dir()
                .expect("lane dir")
                .any(|f| !f
                    .expect("file")
                    .file_name()
                    .to_string_lossy()
                    .starts_with("end"))),
        "staged epochs left uncommitted"
    );

    let read = format!(
        "CREATE TABLE lake (id BIGINT) WITH ('connector' = 'delta', 'path' = '{d}/lake');\n\
         CREATE TABLE copy (id BIGINT) WITH ('connector' = 'filesystem', 'path' = '{d}/copy', \
           'format' = 'parquet');\n\
         INSERT INTO copy SELECT id FROM lake;"
    );
    let rows = run_into_parquet(&engine, &read, &dir.path().join("copy")).await;
    let mut expected: Vec<String> = (0..ROWS).map(|i| i.to_string()).collect();
    expected.sort();
    assert_same_rows(&rows, &expected, "the Delta table the lanes wrote");
}

/// Runs `sql` (which writes Parquet into `copy`) and returns the rows written, formatted and
/// sorted.
async fn run_into_parquet(engine: &Engine, sql: &str, copy: &std::path::Path) -> Vec<String> {
    let job = engine.compile_sql(sql, "read.sql").await.expect("compiles");
    engine.run(&job.spec, Some("read.sql")).await.expect("runs");
    let mut rows = crate::support::format_rows(&crate::support::read_parquet_dir(copy));
    rows.sort();
    rows
}
