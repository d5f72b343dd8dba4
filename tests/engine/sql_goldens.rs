//! Golden SQL tests: every `sql/*.slt` file is a job with its inputs and expected results,
//! run by `cargo test` at each listed parallelism.
//!
//! File format (blocks start with a `## ` header line; a block runs to the next header):
//!
//! ```text
//! # a comment
//! ## parallelism 1 4           (optional; default: 1 and 4)
//! ## input events.csv          (the file's content, written to $DIR/events.csv)
//! ts,k,v
//! 1,a,1
//! ## sql                       (the script; $DIR is the test's directory)
//! CREATE TABLE ...;
//! INSERT INTO out SELECT ...;
//! ## result out                (the rows in $DIR/out, Parquet, sorted, cells joined by " | ")
//! a | 1970-01-01T00:00:00 | 1970-01-01T00:00:00.010 | 2
//! ## dropped 3                 (optional: rows dropped by policy over all operators)
//! ## error                     (instead of results: the error must contain each line)
//! job.sql:3:1: ORDER BY is not supported
//! ```

use crate::support::{format_rows, read_parquet_dir};
use std::path::{Path, PathBuf};
use weir::Engine;

#[derive(Debug, Default)]
pub(crate) struct Golden {
    pub(crate) parallelism: Vec<u32>,
    pub(crate) inputs: Vec<(String, String)>,
    pub(crate) sql: String,
    pub(crate) results: Vec<(String, Vec<String>)>,
    pub(crate) error: Vec<String>,
    pub(crate) dropped: Option<u64>,
}

pub(crate) fn parse(path: &Path) -> Golden {
    let text = std::fs::read_to_string(path).expect("read golden");
    let mut golden = Golden::default();
    let mut header: Option<String> = None;
    let mut body: Vec<String> = Vec::new();
    let finish = |header: Option<String>, body: &mut Vec<String>, golden: &mut Golden| {
        while body.last().is_some_and(|l| l.trim().is_empty()) {
            body.pop();
        }
        let Some(header) = header else {
            body.clear();
            return;
        };
        let mut words = header.split_whitespace();
        match words.next() {
            Some("parallelism") => {
                golden.parallelism = words.map(|w| w.parse().expect("parallelism")).collect();
            }
            Some("input") => golden.inputs.push((
                words.next().expect("input name").to_owned(),
                body.join("\n") + "\n",
            )),
            Some("sql") => golden.sql = body.join("\n"),
            Some("result") => golden
                .results
                .push((words.next().expect("table").to_owned(), body.clone())),
            Some("error") => golden.error = body.clone(),
            Some("dropped") => golden.dropped = Some(words.next().expect("n").parse().expect("n")),
            other => panic!("{}: unknown block {other:?}", path.display()),
        }
        body.clear();
    };
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            finish(header.take(), &mut body, &mut golden);
            header = Some(h.trim().to_owned());
        } else if header.is_some() && !line.starts_with('#') {
            body.push(line.to_owned());
        }
    }
    finish(header, &mut body, &mut golden);
    if golden.parallelism.is_empty() {
        golden.parallelism = vec![1, 4];
    }
    golden
}

fn rows(dir: &Path) -> Vec<String> {
    format_rows(&read_parquet_dir(dir))
}

async fn run_golden(path: &Path) {
    let golden = parse(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for &parallelism in &golden.parallelism {
        let dir = tempfile::tempdir().expect("tempdir");
        for (file, content) in &golden.inputs {
            std::fs::write(dir.path().join(file), content).expect("write input");
        }
        let sql = golden
            .sql
            .replace("$DIR", &dir.path().display().to_string());
        let outcome = async {
            let job = Engine::new()
                .compile_sql(&sql, &name)
                .await
                .map_err(|e| e.to_string())?;
            let mut spec = job.spec;
            spec.parallelism = Some(parallelism);
            Engine::new()
                .run(&spec, Some(&name))
                .await
                .map_err(|e| format!("{e:#}"))
        }
        .await;
        let context = format!("{name} at parallelism {parallelism}");
        if !golden.error.is_empty() {
            let err = outcome.expect_err(&format!("{context}: expected an error"));
            for line in &golden.error {
                assert!(
                    err.contains(line.trim()),
                    "{context}: error `{err}` lacks `{line}`"
                );
            }
            continue;
        }
        let summary = outcome.unwrap_or_else(|e| panic!("{context}: {e}"));
        for (table, want) in &golden.results {
            let mut want = want.clone();
            want.sort();
            assert_eq!(
                rows(&dir.path().join(table)),
                want,
                "{context}: table {table}"
            );
        }
        if let Some(dropped) = golden.dropped {
            let total: u64 = summary.metrics.operators.iter().map(|o| o.dropped).sum();
            assert_eq!(total, dropped, "{context}: dropped rows");
        }
    }
}

pub(crate) fn golden_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("sql/ directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sql_golden_files() {
    let files = golden_files();
    assert!(!files.is_empty(), "no sql/*.slt files");
    for file in files {
        run_golden(&file).await;
    }
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
