//! Window goldens through whole jobs: a hand-made CSV (out-of-order rows, rows on window
//! boundaries, negative times, a null time, late rows) with source watermarks, through each
//! window kind and each late policy, to Parquet; parallelism 1 and 4 give the same results.
//!
//! The input, in file order (`ts`, `k`, `v`), with the source watermark after each row
//! (out-of-orderness 2 ms, emitted on every advance: `max - 2 - 1`):
//!
//! ```text
//!  #   ts   k     v   watermark after
//!  1    1   a     1   -2
//!  2   -3   b     2   -2
//!  3    9   a     4    6
//!  4   10   a     8    7
//!  5    5   b    16    7
//!  6    -   a    32    7     (null event time)
//!  7   13   b    64   10
//!  8    2   a   128   10
//!  9   25   a   256   22
//! 10   19   b   512   22
//! 11   21   b  1024   22     then the end of input
//! ```

use crate::support::read_parquet_dir;
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int64Type};
use std::path::Path;
use weir::{Engine, JobSpec};

const INPUT: &str = "ts,k,v\n1,a,1\n-3,b,2\n9,a,4\n10,a,8\n5,b,16\n,a,32\n13,b,64\n2,a,128\n25,a,256\n19,b,512\n21,b,1024\n";

/// (k, window_start, window_end, n, total, top, update marker)
type Row = (String, i64, i64, i64, i64, i64, Option<bool>);

fn spec(dir: &Path, window: &str, late: &str, parallelism: u32, late_sink: bool) -> JobSpec {
    let late_sink = if late_sink {
        format!(
            r#"
  - name: late_out
    connector: file
    input: w.late
    options: {{ path: "{}", format: parquet }}"#,
            dir.join("late").display()
        )
    } else {
        String::new()
    };
    let yaml = format!(
        r#"
job: windows
parallelism: {parallelism}
state_shards: 8
sources:
  - name: events
    connector: file
    schema:
      - {{ name: ts, type: int64 }}
      - {{ name: k, type: string, nullable: false }}
      - {{ name: v, type: int64, nullable: false }}
    options: {{ path: "{input}", format: csv, batch_size: 3 }}
    watermark: {{ column: ts, max_out_of_orderness: 2, interval: 1 }}
operators:
  - name: w
    type: window
    input: {{ from: events, partition: {{ hash: [k] }} }}
    options:
      time_column: ts
      window: {window}
      key_by: [k]
      aggregates:
        - {{ function: count, as: n }}
        - {{ function: sum, column: v, as: total }}
        - {{ function: max, column: v, as: top }}
      late: {late}
sinks:
  - name: out
    connector: file
    input: w
    options: {{ path: "{out}", format: parquet }}{late_sink}
"#,
        input = dir.join("events.csv").display(),
        out = dir.join("out").display(),
    );
    JobSpec::from_yaml_str(&yaml, "windows.yaml").expect("spec parses")
}

fn int64(batch: &RecordBatch, name: &str) -> Vec<Option<i64>> {
    let col = batch.column(batch.schema().index_of(name).expect("column"));
    let col = cast(col, &DataType::Int64).expect("as int64");
    let col = col.as_primitive::<Int64Type>();
    (0..col.len())
        .map(|i| col.is_valid(i).then(|| col.value(i)))
        .collect()
}

fn results(dir: &Path) -> Vec<Row> {
    let mut rows = Vec::new();
    for batch in read_parquet_dir(dir) {
        let k = batch.column(0).as_string::<i32>().clone();
        let (start, end) = (int64(&batch, "window_start"), int64(&batch, "window_end"));
        let (n, total, top) = (
            int64(&batch, "n"),
            int64(&batch, "total"),
            int64(&batch, "top"),
        );
        let marker = batch
            .schema()
            .index_of("__weir_window_update")
            .ok()
            .map(|i| batch.column(i).as_boolean().clone());
        for i in 0..batch.num_rows() {
            rows.push((
                k.value(i).to_owned(),
                start[i].expect("start"),
                end[i].expect("end"),
                n[i].expect("n"),
                total[i].expect("total"),
                top[i].expect("top"),
                marker.as_ref().map(|m| m.value(i)),
            ));
        }
    }
    rows.sort();
    rows
}

fn row(k: &str, start: i64, end: i64, n: i64, total: i64, top: i64) -> Row {
    (k.to_owned(), start, end, n, total, top, None)
}

/// Runs the job at parallelism 1 and 4 and checks both against `want` and the dropped count.
async fn golden(window: &str, late: &str, mut want: Vec<Row>, dropped: u64) {
    want.sort();
    for parallelism in [1, 4] {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("events.csv"), INPUT).expect("write input");
        let summary = Engine::new()
            .run(
                &spec(dir.path(), window, late, parallelism, false),
                Some("windows.yaml"),
            )
            .await
            .expect("job runs");
        assert_eq!(
            results(&dir.path().join("out")),
            want,
            "{window} {late} at parallelism {parallelism}"
        );
        let w = summary.metrics.operator("w").expect("window metrics");
        assert_eq!(
            w.dropped, dropped,
            "dropped rows, parallelism {parallelism}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tumble_drop() {
    // Watermark 10 (after row 7) fires [-10,0) and [0,10): row 8 (ts 2) is late. Watermark 22
    // (after row 9) fires [10,20): row 10 (ts 19) is late. Null, 2 and 19 are dropped.
    let want = vec![
        row("b", -10, 0, 1, 2, 2),
        row("a", 0, 10, 2, 5, 4),
        row("b", 0, 10, 1, 16, 16),
        row("a", 10, 20, 1, 8, 8),
        row("b", 10, 20, 1, 64, 64),
        row("a", 20, 30, 1, 256, 256),
        row("b", 20, 30, 1, 1024, 1024),
    ];
    golden("{type: tumble, size: 10}", "{policy: drop}", want, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hop_size_10_slide_5() {
    // Size 10, slide 5. Row 10 (ts 19) misses the fired [10,20) but still counts in [15,25).
    let want = vec![
        row("b", -10, 0, 1, 2, 2),
        row("a", -5, 5, 1, 1, 1),
        row("b", -5, 5, 1, 2, 2),
        row("a", 0, 10, 2, 5, 4),
        row("b", 0, 10, 1, 16, 16),
        row("a", 5, 15, 2, 12, 8),
        row("b", 5, 15, 2, 80, 64),
        row("a", 10, 20, 1, 8, 8),
        row("b", 10, 20, 1, 64, 64),
        row("b", 15, 25, 2, 1536, 1024),
        row("a", 20, 30, 1, 256, 256),
        row("b", 20, 30, 1, 1024, 1024),
        row("a", 25, 35, 1, 256, 256),
    ];
    golden("{type: hop, size: 10, slide: 5}", "{}", want, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cumulate_step_5_max_10() {
    let want = vec![
        row("b", -10, 0, 1, 2, 2),
        row("a", 0, 5, 1, 1, 1),
        row("a", 0, 10, 2, 5, 4),
        row("b", 0, 10, 1, 16, 16),
        row("a", 10, 15, 1, 8, 8),
        row("b", 10, 15, 1, 64, 64),
        row("a", 10, 20, 1, 8, 8),
        row("b", 10, 20, 1, 64, 64),
        row("b", 20, 25, 1, 1024, 1024),
        row("a", 20, 30, 1, 256, 256),
        row("b", 20, 30, 1, 1024, 1024),
    ];
    golden("{type: cumulate, step: 5, max_size: 10}", "{}", want, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn session_gap_5() {
    // a: [1,6) fires at watermark 10; 9 and 10 share [9,15); row 8 (ts 2) finds no open
    // session and its own [2,7) is complete: late. b: 19 and 21 share [19,26).
    let want = vec![
        row("a", 1, 6, 1, 1, 1),
        row("b", -3, 2, 1, 2, 2),
        row("b", 5, 10, 1, 16, 16),
        row("a", 9, 15, 2, 12, 8),
        row("b", 13, 18, 1, 64, 64),
        row("a", 25, 30, 1, 256, 256),
        row("b", 19, 26, 2, 1536, 1024),
    ];
    golden("{type: session, gap: 5}", "{}", want, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tumble_update_reemits_corrected_rows_within_allowed_lateness() {
    // Allowed lateness 5: [0,10) is kept until watermark 14, so row 8 (ts 2, at watermark 10)
    // corrects a's row; [10,20) is kept until 24, so row 10 (ts 19, at 22) corrects b's row.
    // Only the null time is dropped.
    let plain = |k: &str, s, e, n, t, m| (k.to_owned(), s, e, n, t, m, Some(false));
    let update = |k: &str, s, e, n, t, m| (k.to_owned(), s, e, n, t, m, Some(true));
    let want = vec![
        plain("b", -10, 0, 1, 2, 2),
        plain("a", 0, 10, 2, 5, 4),
        plain("b", 0, 10, 1, 16, 16),
        update("a", 0, 10, 3, 133, 128),
        plain("a", 10, 20, 1, 8, 8),
        plain("b", 10, 20, 1, 64, 64),
        update("b", 10, 20, 2, 576, 512),
        plain("a", 20, 30, 1, 256, 256),
        plain("b", 20, 30, 1, 1024, 1024),
    ];
    golden(
        "{type: tumble, size: 10}",
        "{policy: update, allowed_lateness: 5}",
        want,
        1,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn route_sends_late_rows_with_a_reason_to_their_own_sink() {
    for parallelism in [1, 4] {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("events.csv"), INPUT).expect("write input");
        let job = spec(
            dir.path(),
            "{type: tumble, size: 10}",
            "{policy: route}",
            parallelism,
            true,
        );
        let summary = Engine::new()
            .run(&job, Some("windows.yaml"))
            .await
            .expect("job runs");
        assert_eq!(results(&dir.path().join("out")).len(), 7);
        let mut late = Vec::new();
        for batch in read_parquet_dir(&dir.path().join("late")) {
            let ts = int64(&batch, "ts");
            let v = int64(&batch, "v");
            let reason = batch.column(3).as_string::<i32>().clone();
            for i in 0..batch.num_rows() {
                late.push((ts[i], v[i], reason.value(i).to_owned()));
            }
        }
        late.sort();
        assert_eq!(
            late,
            vec![
                (None, Some(32), "null event time".to_owned()),
                (Some(2), Some(128), "late".to_owned()),
                (Some(19), Some(512), "late".to_owned()),
            ]
        );
        assert_eq!(summary.metrics.operator("w").expect("metrics").dropped, 0);
    }
}

#[tokio::test]
async fn validation_requires_the_hash_exchange_and_a_reader_of_late_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("events.csv"), INPUT).expect("write input");
    let engine = Engine::new();
    // Routed late rows nobody reads.
    let job = spec(
        dir.path(),
        "{type: tumble, size: 10}",
        "{policy: route}",
        1,
        false,
    );
    let err = engine
        .prepare(&job, Some("windows.yaml"))
        .await
        .expect_err("unread late output");
    let text = format!("{err:#}");
    assert!(text.contains("w.late"), "{text}");
    // Keys without the hash exchange at parallelism 2.
    let mut job = spec(dir.path(), "{type: tumble, size: 10}", "{}", 2, false);
    job.operators[0].input =
        Some(serde_json::from_value(serde_json::json!("events")).expect("input"));
    let err = engine
        .prepare(&job, Some("windows.yaml"))
        .await
        .expect_err("no hash exchange");
    let text = format!("{err:#}");
    assert!(
        text.contains("operators[0].input") && text.contains("hash: [k]"),
        "{text}"
    );
}
