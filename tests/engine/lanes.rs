//! Lanes: one job run as independent lane jobs, each with its own job id and reading only its
//! share of the splits (`PreparedJob::with_split_share`), the way the Agents of a distributed
//! job run it. The lanes' outputs together must be the job's output, also when a lane is
//! killed and restored from its own checkpoints while the others run to the end. A file
//! source with a watermark is one stream, read whole by one lane.

use crate::checkpoints::{assert_same_rows, kill_after_epochs, options, published_rows};
use std::path::Path;
use weir::{Engine, JobSpec, RestoreFrom, SplitShare};

/// Input files; each holds its own keys and its own stretch of event time, so a keyed window
/// gives the same result whichever lane reads the file.
const FILES: usize = 12;
/// Rows per file.
const ROWS_PER_FILE: usize = 500;
/// Lanes of the distributed runs.
const LANES: u32 = 3;

fn write_input(dir: &Path) {
    for f in 0..FILES {
        let mut text = String::from("ts,k,v\n");
        for i in 0..ROWS_PER_FILE {
            let ts = f * 100_000 + i * 7;
            text.push_str(&format!("{ts},k{f}-{},{}\n", i % 8, (i * 31) % 1000));
        }
        std::fs::write(dir.join(format!("in-{f:02}.csv")), text).expect("write input");
    }
}

/// The job of the checkpoint tests (tumbling 100 ms windows per key, count and sum, to Parquet
/// in `dir/out`) under the id `id`, checkpointing every 5 ms when `checkpoint`.
fn spec(dir: &Path, id: &str, checkpoint: bool) -> JobSpec {
    let mut job = crate::checkpoints::spec(dir, 1, checkpoint.then_some(5), 100, None);
    job.job = Some(id.to_owned());
    job
}

/// Starts lane `lane` of the job in `dir` and runs it to the end (or kills it after its first
/// durable epoch when `kill`); returns whether it was killed.
async fn run_lane(engine: &Engine, dir: &Path, lane: u32, kill: bool, restore: bool) -> bool {
    let id = format!("lanes-lane-{lane}");
    let job = spec(dir, &id, true);
    let share = SplitShare::new(lane, LANES).expect("share");
    let prepared = engine
        .prepare(&job, Some("lanes.yaml"))
        .await
        .expect("prepare")
        .with_split_share(share);
    let opts = options(&dir.join("cp"), restore.then_some(RestoreFrom::Latest));
    if kill {
        let running = engine.start_with(prepared, opts).await.expect("start");
        return kill_after_epochs(running, 1).await;
    }
    let summary = engine
        .start_with(prepared, opts)
        .await
        .expect("start")
        .wait()
        .await
        .expect("lane runs to the end");
    if restore {
        assert!(
            summary
                .checkpoints
                .expect("counters")
                .restored_from
                .is_some(),
            "lane {lane} restored its own checkpoint"
        );
    }
    false
}

#[test]
fn every_split_belongs_to_exactly_one_share() {
    let ids: Vec<String> = (0..200).map(|i| format!("topic/{i}")).collect();
    let mut per_lane = [0usize; LANES as usize];
    for id in &ids {
        let owners: Vec<u32> = (0..LANES)
            .filter(|&l| SplitShare::new(l, LANES).expect("share").contains(id))
            .collect();
        assert_eq!(owners.len(), 1, "{id} belongs to one lane: {owners:?}");
        per_lane[owners[0] as usize] += 1;
    }
    assert!(
        per_lane.iter().all(|&n| n > 40),
        "shares spread splits: {per_lane:?}"
    );
    assert!(SplitShare::new(3, 3).is_err());
    assert!(SplitShare::new(0, 0).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lanes_together_publish_the_jobs_output_also_when_one_is_killed_and_restored() {
    // The reference: the whole job in one run.
    let reference_dir = tempfile::tempdir().expect("tempdir");
    write_input(reference_dir.path());
    let engine = Engine::new();
    engine
        .run(
            &spec(reference_dir.path(), "lanes", false),
            Some("lanes.yaml"),
        )
        .await
        .expect("reference run");
    let want = published_rows(&reference_dir.path().join("out"));
    assert!(want.len() > 500, "the reference has output: {}", want.len());

    // The lanes, into one output directory and one checkpoint directory.
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    // The source has a watermark, so its files are one stream: one lane reads them all, in
    // order (the lane whose share holds the source's id), and the others read nothing.
    let mut readers = Vec::new();
    for lane in 0..LANES {
        let prepared = engine
            .prepare(&spec(dir.path(), "lanes", true), Some("lanes.yaml"))
            .await
            .expect("prepare")
            .with_split_share(SplitShare::new(lane, LANES).expect("share"));
        let splits: usize = prepared.splits.values().map(Vec::len).sum();
        if splits > 0 {
            assert_eq!(splits, FILES, "lane {lane} reads every file of the stream");
            readers.push(lane);
        }
    }
    assert_eq!(readers.len(), 1, "one lane reads the stream: {readers:?}");
    // That lane is killed part way and restored.
    let victim = readers[0];
    let mut killed = 0;
    for lane in 0..LANES {
        if lane == victim {
            killed += usize::from(run_lane(&engine, dir.path(), lane, true, false).await);
        }
        run_lane(&engine, dir.path(), lane, false, lane == victim).await;
    }
    assert_eq!(
        killed, 1,
        "lane {victim} was killed after its first durable epoch"
    );
    assert_same_rows(
        &published_rows(&dir.path().join("out")),
        &want,
        "the lanes' published output",
    );
}

/// A job over the 12 input files of `dir` whose source has a watermark, with `operators` (YAML
/// list items reading `rows`, the last named `last`).
fn watermarked_spec(dir: &Path, operators: &str) -> JobSpec {
    let yaml = format!(
        r#"
job: one-stream
sources:
  - name: rows
    connector: file
    schema:
      - {{ name: ts, type: int64, nullable: false }}
      - {{ name: k, type: string, nullable: false }}
      - {{ name: v, type: int64, nullable: false }}
    computed:
      - {{ name: t, expression: "to_timestamp_millis(ts)" }}
    watermark: {{ column: t, interval: 0 }}
    options: {{ path: "{input}", format: csv }}
operators: [{operators}]
sinks:
  - name: out
    connector: file
    input: last
    options: {{ path: "{output}", format: parquet }}
"#,
        input = dir.join("in-*.csv").display(),
        output = dir.join("out").display()
    );
    JobSpec::from_yaml_str(&yaml, "one-stream.yaml").expect("valid spec")
}

#[tokio::test]
async fn a_watermark_no_operator_reads_leaves_the_files_shared_among_lanes() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    let engine = Engine::new();
    let filter = r#"{ name: last, type: filter, input: rows, options: { predicate: "v > 10" } }"#;
    let window = r#"{ name: last, type: window, input: rows, options: {
        time_column: t, window: { type: tumble, size: 10s },
        aggregates: [ { function: count, as: n } ] } }"#;
    let filter_then_window = r#"{ name: kept, type: filter, input: rows, options: { predicate: "v > 10" } },
        { name: last, type: window, input: kept, options: {
        time_column: t, window: { type: tumble, size: 10s },
        aggregates: [ { function: count, as: n } ] } }"#;
    for (operators, one_stream) in [(filter, false), (window, true), (filter_then_window, true)] {
        let job = watermarked_spec(dir.path(), operators);
        let prepared = engine
            .prepare(&job, Some("one-stream.yaml"))
            .await
            .expect("prepare");
        let source = weir::api::OperatorId::from("rows");
        assert_eq!(
            prepared.reads_as_one_stream(&source),
            one_stream,
            "{operators}: the files are one stream only when an operator reads event time"
        );
        let mut readers = 0;
        for lane in 0..LANES {
            let share = SplitShare::new(lane, LANES).expect("share");
            let lane_job = engine
                .prepare(&job, Some("one-stream.yaml"))
                .await
                .expect("prepare");
            let splits: usize = lane_job
                .with_split_share(share)
                .splits
                .values()
                .map(Vec::len)
                .sum();
            readers += usize::from(splits > 0);
        }
        let want = if one_stream { 1 } else { LANES as usize };
        assert_eq!(readers, want, "{operators}: lanes that read files");
    }
}
